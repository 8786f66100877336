"""Rank 0 sends N and then N + 1 bytes (N from the command line) with a
blocking Send while rank 1 posts each receive 0.2 s late: prints whether
each Send returned at once (eager) or waited for the receive."""
import sys
import time

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
n = int(sys.argv[1])
buf = np.zeros(n + 1, np.uint8)
said = []
for size in (n, n + 1):
    comm.Barrier()
    if comm.rank == 0:
        t0 = time.perf_counter()
        comm.Send([buf, size, MPI.BYTE], 1, 3)
        said.append("eager" if time.perf_counter() - t0 < 0.1 else "waited")
    else:
        time.sleep(0.2)
        comm.Recv([buf, size, MPI.BYTE], 0, 3)
if comm.rank == 0:
    print("rank 0", " ".join(said))
