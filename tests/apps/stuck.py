"""A rank that stops: after one barrier, rank 1 sleeps (no MPI call, no
computation) while rank 0 waits in the next barrier; with ``--compute S``
rank 1 computes for S seconds instead, then joins (not stuck, only slow).

    mpiexec -n 2 python tests/apps/stuck.py [--compute S]
"""
import argparse
import time

from mpi4py import MPI

ap = argparse.ArgumentParser()
ap.add_argument("--compute", type=float)
a = ap.parse_args()
comm = MPI.COMM_WORLD
comm.Barrier()
if comm.rank == 1:
    if a.compute is None:
        time.sleep(3600)
    t0 = time.process_time()
    x = 0
    while time.process_time() - t0 < a.compute:
        x += 1
comm.Barrier()
print(f"rank {comm.rank} done", flush=True)
