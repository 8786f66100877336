"""MPI called below Python: ctypes on the MPI library's own handle.

Rank 0 sends 8 bytes to rank 1 through ctypes (``MPI_Send`` looked up on
a ``ctypes.CDLL`` of libmpi, as numba-jitted codes do), between two
mpi4py barriers.  The Python-level tracer does not see that message, and
a replay of rank 1 recorded without the PMPI shim (``--no-c-calls``)
blocks in the real ``MPI_Recv``: its one-process world has no rank 0 to
send.  With the argument ``alltoallw`` every rank then calls
``MPI_Alltoallw`` through ctypes too, which the C log cannot answer.
"""
import ctypes
import sys

import numpy as np
from mpi4py import MPI


def libmpi() -> ctypes.CDLL:
    """The MPI library this process loaded (opened again by path)."""
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "/libmpi" in line}
    return ctypes.CDLL(sorted(paths)[0])


comm = MPI.COMM_WORLD
comm.Barrier()
lib = libmpi()
buf = np.zeros(1, np.float64)
status = ctypes.create_string_buffer(64)
if comm.rank == 0:
    buf[0] = 42.0
    lib.MPI_Send(buf.ctypes.data_as(ctypes.c_void_p), ctypes.c_int(8),
                 ctypes.c_int(MPI.BYTE.handle), ctypes.c_int(1), ctypes.c_int(5),
                 ctypes.c_int(comm.handle))
elif comm.rank == 1:
    lib.MPI_Recv(buf.ctypes.data_as(ctypes.c_void_p), ctypes.c_int(8),
                 ctypes.c_int(MPI.BYTE.handle), ctypes.c_int(0), ctypes.c_int(5),
                 ctypes.c_int(comm.handle), status)
if sys.argv[1:] == ["alltoallw"]:
    n = comm.size
    ints = ctypes.c_int * n
    types = ints(*[MPI.BYTE.handle] * n)
    out = np.zeros(n)
    lib.MPI_Alltoallw(buf.ctypes.data_as(ctypes.c_void_p), ints(*[8] * n), ints(*[0] * n),
                      types, out.ctypes.data_as(ctypes.c_void_p), ints(*[8] * n),
                      ints(*[8 * i for i in range(n)]), types, ctypes.c_int(comm.handle))
comm.Barrier()
print(f"rank {comm.rank} value {buf[0]}", flush=True)
