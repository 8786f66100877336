"""MPI initialised by the application itself, later than its import of
mpi4py.MPI, as Devito does (``mpi4py.rc.initialize = False``, then
``MPI.Init_thread``); it finalises MPI itself too.

    mpiexec -n 2 python tests/apps/deferred_init.py [--init init|init_thread]
"""
import argparse
import time

import mpi4py

mpi4py.rc.initialize = False
mpi4py.rc.finalize = False
from mpi4py import MPI  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--init", choices=["init", "init_thread"], default="init_thread")
a = ap.parse_args()
assert not MPI.Is_initialized()
x = sum(i * i for i in range(20000))          # work before MPI exists
if a.init == "init":
    MPI.Init()
else:
    MPI.Init_thread(MPI.THREAD_MULTIPLE)
comm = MPI.COMM_WORLD
total = comm.allreduce(comm.rank + 1)
comm.Barrier()
print(f"rank {comm.rank} deferred {a.init} total {total}", flush=True)
# longer than the replay's probe interval: its overhead probe falls due at
# the Finalize (it once called MPI there, after the application's Finalize)
time.sleep(0.05)
MPI.Finalize()
