"""A bandwidth benchmark's pattern (found by the OSU demos): the same 1 MB
buffer sent many times, windows of Isend/Irecv completed by Waitall."""
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
reps, window = 20, 4
buf = np.full(1 << 17, comm.rank + 1.0)        # 1 MiB of doubles
got = [np.empty_like(buf) for _ in range(window)]
total = 0.0
for _ in range(reps):
    if comm.rank == 0:
        MPI.Request.Waitall([comm.Isend(buf, dest=1, tag=5) for _ in range(window)])
    elif comm.rank == 1:
        MPI.Request.Waitall([comm.Irecv(g, source=0, tag=5) for g in got])
        total += sum(float(g[::4096].sum()) for g in got)
# a short message into a large buffer, as the OSU demos do for every size
big = bytearray(8 << 20)
for n in (1, 100, 5000):
    if comm.rank == 0:
        comm.Send([bytes(range(256)) * 20, n, MPI.BYTE], dest=1, tag=6)
    elif comm.rank == 1:
        comm.Recv([big, n, MPI.BYTE], source=0, tag=6)
        total += sum(big[:n])
print(f"rank {comm.rank} received total {total:g}")
