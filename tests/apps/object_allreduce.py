"""Allreduce of a 1 MiB NumPy array as a Python object, or of the same buffer.

    mpiexec -n 2 python tests/apps/object_allreduce.py objects|buffer [CALLS]

CALLS calls (8 unless given), each followed by a barrier (so that the
computation spans before and after each call are apart).  mpi4py runs the object form as
its own algorithm, pickling, unpickling and summing in Python; the buffer
form is MPI's.  Rank r prints the sum of its last result.
"""
import sys

import numpy as np
from mpi4py import MPI

w = MPI.COMM_WORLD
x = np.full(1 << 17, w.rank + 1.0)
y = np.empty_like(x)
for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 8):
    if sys.argv[1] == "objects":
        y = w.allreduce(x)
    else:
        w.Allreduce(x, y)
    w.Barrier()
print(f"rank {w.rank} sum {y.sum():.1f}", flush=True)
