"""A distributed transpose by Alltoallw with subarray datatypes, as
mpi4py-fft redistributes pencils: rows local before, columns after."""
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
p, r = comm.size, comm.rank
m = 64                                       # block edge
a = np.arange(m * m * p, dtype=float).reshape(m, m * p) + 1000 * r
b = np.empty((m * p, m))
send = [MPI.DOUBLE.Create_subarray([m, m * p], [m, m], [0, q * m]).Commit() for q in range(p)]
recv = [MPI.DOUBLE.Create_subarray([m * p, m], [m, m], [q * m, 0]).Commit() for q in range(p)]
ones, zeros = [1] * p, [0] * p
for _ in range(5):
    comm.Alltoallw([a, (ones, zeros), send], [b, (ones, zeros), recv])
contiguous = np.empty(m * m * p)
comm.Alltoall(a.ravel(), contiguous)
print(f"rank {r} transposed checksum {b.sum():g} {contiguous.sum():g}")
