"""The network simulator of the target machine (docs/METHODS.md: the simulator).

Python API::

    from netsim import load_platform, predict
    res = predict("trace_dir", load_platform("config/platforms/ib-cluster.yaml"))
    res.predicted_time, res.per_rank

Command line: ``python -m netsim TRACE_DIR --platform P.yaml -o prediction.json``.
The core loop is netsim/engine.py; schedules (what it runs) netsim/schedule.py;
collective algorithms and analytic costs netsim/collectives.py; the target
description netsim/platform.py; the prediction file contracts/prediction.py.
"""
from __future__ import annotations

from .compiled_cache import drop_if_stale
from .platform import Platform, PlatformError, from_dict, load_platform
from .predict import run
from .schedule import Builder, Schedule, ScheduleError, from_trace

__all__ = ["predict", "run", "load_platform", "from_dict", "Platform", "PlatformError",
           "Schedule", "ScheduleError", "Builder", "from_trace"]

# numba loads cached code at a function's first call, not at import: in time
drop_if_stale()


def predict(trace_dir: str, platform, compute=None, vector: str = "cpu"):
    """Predict a traced run on ``platform``; ``compute`` optional per-event seconds."""
    from contracts.trace import load_trace
    t = load_trace(trace_dir)
    if compute is None and vector != "cpu":
        compute = t.events[vector].to_numpy()
    return run(from_trace(t, platform, compute), platform)
