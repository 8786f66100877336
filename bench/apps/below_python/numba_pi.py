"""pi by the midpoint rule, each rank a strided share of the intervals,
summed with an Allreduce inside numba-jitted code (numba-mpi), repeated
with a number of intervals the root broadcasts each round.

    mpiexec -n 4 python bench/apps/below_python/numba_pi.py [--intervals N] [--rounds R]
"""
import argparse

import numba
import numba_mpi as mpi
import numpy as np


@numba.njit
def share(n, rank, size):
    h = 1.0 / n
    s = 0.0
    for i in range(rank, n, size):
        x = h * (i + 0.5)
        s += 4.0 / (1.0 + x * x)
    return s * h


@numba.njit
def run(rounds, intervals):
    rank, size = mpi.rank(), mpi.size()
    n = np.zeros(1, np.int64)
    mine = np.zeros(1)
    total = np.zeros(1)
    worst = 0.0
    for r in range(rounds):
        if rank == 0:
            n[0] = intervals + 100 * (r % 50)
        mpi.bcast(n, 0)
        mine[0] = share(n[0], rank, size)
        mpi.allreduce(mine, total, mpi.Operator.SUM)
        worst = max(worst, abs(total[0] - np.pi))
    return worst


ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--intervals", type=int, default=20_000,
                help="intervals of the first round (default 20000; each round adds "
                     "100 more, up to 4900)")
ap.add_argument("--rounds", type=int, default=400, help="rounds (default 400)")
a = ap.parse_args()
err = run(a.rounds, a.intervals)
if mpi.rank() == 0:
    print(f"largest error {err:.3e}")
