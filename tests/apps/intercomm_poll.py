"""A rendezvous message over an intercommunicator whose sender polls:
rank 1 Issends 20,000 bytes to rank 0 over an intercommunicator of the
two ranks and polls the request's Test, sleeping 2 ms between polls, as
mpi4py.futures' workers send their results; rank 0 receives it."""
import time

import numpy as np
from mpi4py import MPI

world = MPI.COMM_WORLD
local = world.Split(world.rank, 0)
inter = local.Create_intercomm(0, world, 1 - world.rank, 3)
buf = np.zeros(20000, np.uint8)
if world.rank == 1:
    buf[:] = 7
    time.sleep(0.05)
    req = inter.Issend(buf, 0, 5)
    while not req.Test():
        time.sleep(0.002)
else:
    inter.Recv(buf, 0, 5)
inter.Free()
local.Free()
print(f"rank {world.rank} has {int(buf.sum())}")
