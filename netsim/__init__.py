"""The network simulator of the target machine (METHODS.md M1 S6, M4).

Python API::

    from netsim import load_platform, predict
    res = predict("trace_dir", load_platform("config/platforms/ib-cluster.yaml"))
    res.predicted_time, res.per_rank

Command line: ``python -m netsim TRACE_DIR --platform P.yaml -o prediction.json``.
The core loop is netsim/engine.py; schedules (what it runs) netsim/schedule.py;
collective algorithms and analytic costs netsim/collectives.py.
"""
from __future__ import annotations

import importlib

# The names below are imported on first use (PEP 562), not here: ``python -m
# netsim.clock`` imports this package inside every rank of a real run before
# the application starts, and numpy, scipy and numba loaded there changed
# what the application's start-up costs (heat's real runs, paired: 5.6-6.3 s
# with them loaded, 4.6-5.5 s without).
_LAZY = {"load_platform": "platform", "from_dict": "platform", "Platform": "platform",
         "PlatformError": "platform", "Schedule": "schedule", "ScheduleError": "schedule",
         "Builder": "schedule", "from_trace": "schedule"}

__all__ = ["predict", "run", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def run(schedule, platform):
    """Simulate a schedule on a platform (netsim.predict.Result)."""
    from .predict import run as _run
    return _run(schedule, platform)


def predict(trace_dir: str, platform, compute=None, vector: str = "cpu"):
    """Predict a traced run on ``platform``; ``compute`` optional per-event seconds."""
    from instrument import load_trace
    from .schedule import from_trace
    t = load_trace(trace_dir)
    if compute is None and vector != "cpu":
        compute = t.events[vector].to_numpy()
    return run(from_trace(t, platform, compute), platform)
