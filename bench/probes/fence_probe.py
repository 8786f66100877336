"""What a fence epoch costs beside a barrier on the same network: the
probe behind rma_halo's -10 % on the emulated target (bench/RESULTS.md).

    python -m emulate run --nodes 2 --rate 1gbit -- \\
        sh -c '$EMULATE_MPIEXEC -n 2 .venv/bin/python bench/probes/fence_probe.py'

Medians over 200 repetitions each, interleaved in one run: a Barrier; an
empty fence epoch (two Fences); a fence epoch with one 64-byte Put; and
a 64-byte Sendrecv with the neighbour (what the model's messages cost).
"""
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
buf = np.zeros(16)
win = MPI.Win.Create(buf, 8, comm=comm)
peer = (comm.rank + 1) % comm.size
data, back = np.ones(8), np.empty(8)
t = {"barrier": [], "empty fence epoch": [], "fence epoch with a Put": [],
     "sendrecv 64 B": []}
for _ in range(200):
    comm.Barrier()
    t0 = MPI.Wtime()
    comm.Barrier()
    t["barrier"].append(MPI.Wtime() - t0)
    comm.Barrier()
    t0 = MPI.Wtime()
    win.Fence()
    win.Fence()
    t["empty fence epoch"].append(MPI.Wtime() - t0)
    comm.Barrier()
    t0 = MPI.Wtime()
    win.Fence()
    win.Put(data, peer)
    win.Fence()
    t["fence epoch with a Put"].append(MPI.Wtime() - t0)
    comm.Barrier()
    t0 = MPI.Wtime()
    comm.Sendrecv(data, peer, 0, back, peer, 0)
    t["sendrecv 64 B"].append(MPI.Wtime() - t0)
win.Free()
if comm.rank == 0:
    for k, v in t.items():
        print(f"{k:<24} median {1e6 * np.median(v):8.1f} us   mean {1e6 * np.mean(v):8.1f} us")
