"""The simulator's files in other tools' formats, apart from the engine:
LogGOPSim's GOAL schedules read and written (:mod:`interop.goal`, its
compiled scanner in :mod:`interop.goal_scan`), and SimGrid's
time-independent traces written (:mod:`interop.simgrid`).  ``python -m
netsim`` offers them as ``--goal-in``, ``--goal-out`` and ``--simgrid-out``.
"""
