"""Rank 1 draws from a counter in rank 0's window (exclusive Lock,
Get_accumulate, Unlock) while rank 0 computes in chunks, each ended by
an empty Sendrecv with itself: the only moments rank 0's MPI can serve
rank 1 (a Send to MPI.PROC_NULL would not do: MPICH returns from it
without making progress)."""
import sys
import time

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
chunks, draws, chunk = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
win = MPI.Win.Allocate(8 if comm.rank == 0 else 0, 8, comm=comm)
one, got = np.ones(1, np.int64), np.zeros(1, np.int64)
comm.Barrier()
if comm.rank == 0:
    for _ in range(chunks):
        t0 = time.process_time()
        while time.process_time() - t0 < chunk:
            pass
        comm.Sendrecv(b"", 0, 3, bytearray(0), 0, 3)
else:
    for _ in range(draws):
        win.Lock(0)
        win.Get_accumulate(one, got, 0, op=MPI.SUM)
        win.Unlock(0)
comm.Barrier()
win.Free()
