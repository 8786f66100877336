"""Single-node replay of representative ranks (docs/METHODS.md: the replay step).

    python -m replay --rank R --log LOG_DIR -o OUT app.py [args]
    python -m replay --reps reps.csv --log LOG_DIR -o OUT [--concurrent K] app.py [args]
    python -m replay.expand TRACE REPS.csv OUT -o compute.csv

Python API: :func:`replay_rank`, :func:`replay_many` here;
``replay.expand.expand``, ``replay.replayed.read_replayed`` and
``replay.compute.read_compute`` in their modules.  This package imports
nothing heavy (numpy, pandas): a replayed rank imports it before the
application, whose start-up span must cost what it cost when traced.
"""
from .run import ReplayError, replay_many, replay_rank

__all__ = ["replay_rank", "replay_many", "ReplayError"]
