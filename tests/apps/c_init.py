"""MPI initialised and finalised from C by a library (c_init.c, compiled
with mpicc into the path given as argv[1]), as petsc4py's PETSc does; the
application never imports mpi4py.MPI."""
import ctypes
import sys

lib = ctypes.CDLL(sys.argv[1])
lib.ring.restype = ctypes.c_double
lib.ring.argtypes = [ctypes.c_double]
rank = lib.start()
total = sum(lib.ring(float(rank + k)) for k in range(3))
print(f"rank {rank} ring total {total:g}", flush=True)
lib.finish()
