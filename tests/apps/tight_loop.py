"""Small collectives back to back, with nothing computed between them.

Rank 0 also times the same loop with a do-nothing Python method in place
of MPI: that is all the computation between two calls is worth.  The two
loops alternate in blocks, and the idle one reports its median block, so
that both sample the same moments of a machine whose speed drifts (timed
once after all the MPI calls, it came out 0.2 us in one run and 0.4 us
in the next, and the test comparing with it failed 1 run in 3)."""
import statistics
import time

import numpy as np
from mpi4py import MPI

N, BLOCK = 20000, 1000
w = MPI.COMM_WORLD
buf = np.zeros(8)


class Idle:
    def Allreduce(self, *args):
        pass


idle = Idle()
blocks = []
for _ in range(N // BLOCK):
    for _i in range(BLOCK):
        w.Allreduce(MPI.IN_PLACE, [buf, 1, MPI.DOUBLE])
    t0 = time.perf_counter()
    for _i in range(BLOCK):
        idle.Allreduce(MPI.IN_PLACE, [buf, 1, MPI.DOUBLE])
    blocks.append((time.perf_counter() - t0) / BLOCK)
if w.rank == 0:
    print(f"rank 0 idle loop {statistics.median(blocks) * 1e6:.3f} us per iteration")
