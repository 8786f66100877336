"""Buffers in Fortran order (found by pylops-mpi's SUMMA example): MPI reads
and writes their memory in memory order; recording and replay must too."""
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
r, n = comm.rank, comm.size
a = np.asfortranarray(np.arange(12.0).reshape(3, 4) * (r + 1))
b = np.empty((3, 4), order="F")
comm.Sendrecv(a, dest=(r + 1) % n, recvbuf=b, source=(r - 1) % n)
c = np.zeros((3, 4), order="F")
comm.Allreduce(a, c)
d = np.asfortranarray(np.ones((2, 3)) * r)
comm.Bcast(d, root=n - 1)
print(f"rank {r} got {b[0].tolist()} {b[:, 1].tolist()} sum {c[2].tolist()} bcast {d.sum()}")
