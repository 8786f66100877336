"""The replay's errors, in a module that imports nothing: a replay's
start-up loads them before the application initialises MPI."""
from __future__ import annotations


class ReplayError(Exception):
    """A replay that cannot run or did not finish (rank named)."""


class ReplayCut(BaseException):
    """A partial replay reached the end of its cut log (replay/loops.py):
    the application stops there, its spans so far measured.

    A BaseException for the same reason as Divergence."""


class Divergence(BaseException):
    """The application did something other than what the log recorded.

    A BaseException: an application's ``except Exception`` must not carry
    on past it with answers meant for another call."""
