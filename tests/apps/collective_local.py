"""Collectives that do local work or none (tests of the simulator's model).

    mpiexec -n 2 python tests/apps/collective_local.py

Rank 0 computes 0.2 s of CPU, then both ranks call collectives that move
0 bytes (MPICH returns from them at once, without waiting), then rank 1
computes 0.2 s: the run takes 0.2 s, not 0.4.  Then 40 Alltoalls and 40
Allgathers of 64 KiB per rank, and 40 Allgathers in place.
"""
import time

import numpy as np
from mpi4py import MPI


def spin(seconds):
    t0, x = time.process_time(), 0.0
    while time.process_time() - t0 < seconds:
        x += sum(i * 0.5 for i in range(1000))
    return x


w = MPI.COMM_WORLD
r, p = w.rank, w.size
empty, none = np.zeros(0), np.zeros(0)
if r == 0:
    spin(0.2)
w.Alltoall(empty, none)
w.Allgather(empty, none)
w.Bcast(empty, root=0)
w.Allreduce(empty, none, op=MPI.SUM)
if r == 1:
    spin(0.2)
w.Barrier()
n = 8192                                 # doubles: 64 KiB per rank
s, g = np.full(n * p, float(r)), np.zeros(n * p)
for _ in range(40):
    w.Alltoall(s, g)
    w.Allgather(s[:n], g)
    g[r * n:(r + 1) * n] = r
    w.Allgather(MPI.IN_PLACE, g)
print(f"rank {r} sum {g.sum():.1f}", flush=True)
