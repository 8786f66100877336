"""Receives into memory never touched before, or into a buffer already used.

    mpiexec -n 2 python tests/apps/fresh_recv.py [fresh|reused]

Each of 8 Sendrecvs exchanges 4 MiB with the other rank.  ``fresh``: the
receive buffer is a new anonymous mapping every time (as a NumPy array
allocated afresh per call can be), whose pages fault in at MPI's copy;
``reused``: one buffer, written before the first call.  Rank r prints its
last buffer's checksum.
"""
import mmap
import sys

import numpy as np
from mpi4py import MPI

w = MPI.COMM_WORLD
n = 4 << 20
fresh = sys.argv[1:] == ["fresh"]
send = np.full(n, w.rank + 1, np.uint8)
kept = np.ones(n, np.uint8)
for _ in range(8):
    buf = np.frombuffer(mmap.mmap(-1, n), np.uint8) if fresh else kept
    w.Sendrecv(send, 1 - w.rank, 0, buf, 1 - w.rank, 0)
print(f"rank {w.rank} checksum {int(buf.sum())}", flush=True)
