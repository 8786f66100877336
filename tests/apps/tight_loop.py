"""Small collectives back to back, with nothing computed between them.

Rank 0 also times the same loop with a do-nothing Python method in place
of MPI: that is all the computation between two calls is worth."""
import time

import numpy as np
from mpi4py import MPI

N = 20000
w = MPI.COMM_WORLD
buf = np.zeros(8)
for i in range(N):
    w.Allreduce(MPI.IN_PLACE, [buf, 1, MPI.DOUBLE])


class Idle:
    def Allreduce(self, *args):
        pass


idle = Idle()
t0 = time.perf_counter()
for i in range(N):
    idle.Allreduce(MPI.IN_PLACE, [buf, 1, MPI.DOUBLE])
if w.rank == 0:
    print(f"rank 0 idle loop {(time.perf_counter() - t0) / N * 1e6:.3f} us per iteration")
