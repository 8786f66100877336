"""An application that calls MPI below Python: a C library (below_python.c,
compiled with mpicc into the path given as argv[1]) does a ring exchange and
an Allreduce on the raw communicator handle, beside one mpi4py Allreduce."""
import ctypes
import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
lib = ctypes.CDLL(sys.argv[1])
lib.ring_sum.restype = ctypes.c_double
lib.ring_sum.argtypes = [ctypes.c_int, ctypes.c_double]
calls = int(sys.argv[2]) if len(sys.argv) > 2 else 5
total = 0.0
for _ in range(calls):
    total += lib.ring_sum(MPI._handleof(comm), float(comm.rank))
check = comm.allreduce(comm.rank)
if comm.rank == 0:
    print(f"ring sums {total:g}, mpi4py sum {check}")
