"""A run that goes wrong on purpose: `raise` (rank 1 raises after 5
iterations, half a second after the others began to wait for it in the next one) or
`hang` (every rank computes forever after 20 iterations)."""
import sys
import time

from mpi4py import MPI

w = MPI.COMM_WORLD
mode = sys.argv[1]
for i in range(25):
    w.allreduce(i)
    if mode == "raise" and i == 5 and w.rank == 1:
        time.sleep(0.5)
        raise RuntimeError("deliberate failure on rank 1")
    if mode == "hang" and i == 20:
        print("computing", flush=True)
        while True:
            time.sleep(0.01)
