"""Single-node replay of representative ranks (docs/METHODS.md: the replay step).

    python -m replay --rank R --log LOG_DIR -o OUT app.py [args]
    python -m replay --reps reps.csv --log LOG_DIR -o OUT [--concurrent K] app.py [args]
    python -m replay.expand TRACE REPS.csv OUT -o compute.csv

Python API: :func:`replay_rank`, :func:`replay_many` here;
``replay.expand.expand``, ``contracts.replayed.read_replayed`` and
``contracts.compute.read_compute`` in their modules.  This package imports
nothing until used: a replayed rank imports it before the application,
whose heap must stay as a plain run has it.
"""
from .errors import ReplayError

__all__ = ["replay_rank", "replay_many", "ReplayError"]


def __getattr__(name):
    # the runners on first use: a replayed rank loads them away from the
    # application's heap (launch.in_own_arena)
    if name in ("replay_rank", "replay_many"):
        from . import run
        return getattr(run, name)
    raise AttributeError(f"module 'replay' has no attribute {name!r}")
