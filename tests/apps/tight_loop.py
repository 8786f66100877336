"""Small MPI calls back to back, with nothing computed between them.

``allreduce`` (the default): in-place Allreduces of 8 bytes.  ``window``:
as OSU's bandwidth test, rank 0 starts windows of 64 Isends and rank 1
windows of 64 Irecvs of 8 bytes, each window completed by a Waitall.

Every rank also times the same loop with do-nothing Python methods in
place of MPI: that is all the computation between two calls is worth.
The two loops alternate in blocks, and the idle one reports its median
block, so that both sample the same moments of a machine whose speed
drifts (timed once after all the MPI calls, it came out 0.2 us in one
run and 0.4 us in the next, and the test comparing with it failed 1 run
in 3)."""
import statistics
import sys
import time

import numpy as np
from mpi4py import MPI

N, BLOCK, WINDOW = 20480, 1024, 64
w = MPI.COMM_WORLD
buf = np.zeros(8)
mode = sys.argv[1] if len(sys.argv) > 1 else "allreduce"


class Idle:
    def Allreduce(self, *args):
        pass

    def Isend(self, *args):
        return None

    Irecv = Isend


def allreduce(c, calls):
    for _i in range(calls):
        c.Allreduce(MPI.IN_PLACE, [buf, 1, MPI.DOUBLE])


def window(c, calls):
    reqs = [MPI.REQUEST_NULL] * WINDOW
    start = c.Isend if w.rank == 0 else c.Irecv
    peer = 1 - w.rank
    for _i in range(calls // WINDOW):
        for j in range(WINDOW):
            reqs[j] = start([buf, 1, MPI.DOUBLE], peer, 7)
        if c is w:
            MPI.Request.Waitall(reqs)


loop = {"allreduce": allreduce, "window": window}[mode]
idle = Idle()
blocks = []
for _ in range(N // BLOCK):
    loop(w, BLOCK)
    t0 = time.perf_counter()
    loop(idle, BLOCK)
    blocks.append((time.perf_counter() - t0) / BLOCK)
print(f"rank {w.rank} idle loop {statistics.median(blocks) * 1e6:.3f} us per iteration")
