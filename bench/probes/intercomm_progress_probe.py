"""How a rendezvous message advances when its sender sleeps between
polls: over an intracommunicator and over an intercommunicator of the
same two ranks (mpi4py.futures talks over one).

    mpiexec -n 2 python bench/probes/intercomm_progress_probe.py

Rank 1 Issends a message and polls its Test, sleeping 0, 1 or 4 ms
between polls; rank 0 sees it by Iprobe (spinning) and times its
blocking Recv (median of 12).  MPICH on this host's shared memory, 2026-11-28:
intracommunicator: 0.005-0.05 ms whatever the sender does; over the
intercommunicator, 16 KiB took 3.3 ms with 1 ms sleeps and 12 ms with
4 ms, 256 KiB 37 and 137 ms: the transfer advances a few KiB per call
the sender makes, where the simulator lets it run at network speed.
"""
import statistics
import time

import numpy as np
from mpi4py import MPI

world = MPI.COMM_WORLD
rank = world.rank
inter = world.Split(rank, 0).Create_intercomm(0, world, 1 - rank, 5)
for name, comm, other in (("intra", world, 1 - rank), ("inter", inter, 0)):
    for gap in (0.0, 0.001, 0.004):
        for size in (4000, 16384, 262144):
            buf, into, took = np.ones(size, "B"), np.empty(size, "B"), []
            for _ in range(15):
                world.Barrier()
                if rank == 1:
                    time.sleep(0.002)
                    req = comm.Issend(buf, other, 1)
                    while not req.Test():
                        if gap:
                            time.sleep(gap)
                else:
                    while not comm.Iprobe(other, 1):
                        pass
                    t0 = MPI.Wtime()
                    comm.Recv(into, other, 1)
                    took.append(MPI.Wtime() - t0)
            if rank == 0:
                print(f"{name}: sender sleeps {gap * 1e3:.0f} ms between Tests, {size:7d} B: "
                      f"Recv {statistics.median(took[3:]) * 1e3:.3f} ms")
