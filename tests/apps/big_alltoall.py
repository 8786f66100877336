"""Large alltoalls with nothing computed between them (osu_alltoall's shape).

    mpiexec -n 2 python tests/apps/big_alltoall.py

A replay that freed each logged payload (up to 2 MiB) after its call's
exit clock charged the free (26-100 us) to the computation that follows.
"""
import mmap

from mpi4py import MPI

w = MPI.COMM_WORLD
s, r = mmap.mmap(-1, 2 << 20), mmap.mmap(-1, 2 << 20)
for n in (1 << 18, 1 << 19, 1 << 20):    # bytes per peer, growing as in the OSU demo
    for i in range(10):
        s[i] = s[n + i] = i + w.rank + 1     # one byte per block: payloads differ
        w.Alltoall([s, n, MPI.BYTE], [r, n, MPI.BYTE])
print(f"rank {w.rank} sum {sum(r[:1 << 21:4096])}", flush=True)
