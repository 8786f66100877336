"""``python -m lazy_mpi.main``: the package imports mpi4py.MPI while runpy
imports it, before this module runs."""
from lazy_mpi import MPI

comm = MPI.COMM_WORLD
total = comm.allreduce(comm.rank + 1)
comm.Barrier()
print(f"rank {comm.rank} module total {total}", flush=True)
