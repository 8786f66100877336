"""The PMPI shim: MPI calls made below Python (compiled code, C extensions,
ctypes/cffi/numba bindings calling the MPI library itself) counted,
traced, recorded and answered in a replay, one level below mpi4py.

build.py generates the shim from the MPI library's own header and the one
table of operations (cwrappers.py: the tracing bodies, cwrappers_log.py:
the record and replay bodies), compiles it with the library's mpicc and
loads it ahead of MPI; control.py is what trace, record and replay ask of
it.  The C runtime: ccount.c (who called), ctrace.c (events),
creplay.c (the C log), ccount_dlsym.c (lookups on libmpi's handle)."""
