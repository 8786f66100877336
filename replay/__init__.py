"""Single-node replay of representative ranks (METHODS.md M1 S4).

    python -m replay --rank R --log LOG_DIR -o OUT app.py [args]
    python -m replay --reps reps.csv --log LOG_DIR -o OUT [--concurrent K] app.py [args]

Python API: :func:`replay_rank`, :func:`replay_many`, :func:`expand`.
"""
from .run import ReplayError, replay_many, replay_rank

__all__ = ["replay_rank", "replay_many", "ReplayError"]
