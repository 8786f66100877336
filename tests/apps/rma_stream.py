"""Rank 0 moves --mib MiB to rank 1 --reps times, one-sided (Put inside
fences) or two-sided (Send/Recv then a barrier): --mode put|get|send."""
import argparse

import numpy as np
from mpi4py import MPI

ap = argparse.ArgumentParser()
ap.add_argument("--mode", default="put")
ap.add_argument("--mib", type=float, default=4)
ap.add_argument("--reps", type=int, default=4)
a = ap.parse_args()
comm = MPI.COMM_WORLD
data = np.full(int(a.mib * (1 << 20)) // 8, float(comm.rank))
if a.mode in ("put", "get"):
    win = MPI.Win.Create(data, 8, comm=comm)
    win.Fence()
    for _ in range(a.reps):
        if comm.rank == 0 and a.mode == "put":
            win.Put(data, 1)
        if comm.rank == 1 and a.mode == "get":
            win.Get(data, 0)
        win.Fence()
    win.Free()
else:
    comm.Barrier()
    for _ in range(a.reps):
        if comm.rank == 0:
            comm.Send(data, 1)
        elif comm.rank == 1:
            comm.Recv(data, 0)
        comm.Barrier()
print(f"rank {comm.rank} sum {data.sum():.1f}", flush=True)
