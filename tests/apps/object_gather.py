"""Object collectives whose root works for everyone: a gather of Python
lists to rank 1 and an allreduce of a scalar (mpi4py reduces to rank 0).

    mpiexec -n 4 python tests/apps/object_gather.py [--items N] [--iters K]

Every rank does the same computation; only mpi4py's own work inside the
calls differs: the gather's root unpickles every rank's list, rank 0
receives and adds at every level of the allreduce's tree.  Rank 1 prints
what it gathered last, every rank the last sum.
"""
import argparse

from mpi4py import MPI

ap = argparse.ArgumentParser()
ap.add_argument("--items", type=int, default=100_000)
ap.add_argument("--iters", type=int, default=4)
a = ap.parse_args()
w = MPI.COMM_WORLD
mine = [float(w.rank + i) for i in range(a.items)]
total = 0.0
for _ in range(a.iters):
    mine = [x * 0.5 + 1.0 for x in mine]          # the same work on every rank
    got = w.gather(mine, root=1)
    if w.rank == 1:
        kept = got                                 # the root only keeps them
    total = w.allreduce(mine[-1])
if w.rank == 1:
    print(f"rank 1 gathered {len(kept)} lists, last {kept[-1][-1]:.6e}", flush=True)
print(f"rank {w.rank} total {total:.6e}", flush=True)
