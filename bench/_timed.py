"""Run an application (script path + args) and print the wall time of its run
as seen by rank 0 after a closing barrier: ``TIMED <seconds>``.

Used by the benchmarks to time the same span with and without the tracer
(under the tracer this file itself is the traced application, so start-up
and the final merge are not counted)."""
import runpy
import sys
import time

import numpy  # noqa: F401  (the examples' import time is not what we measure)
from mpi4py import MPI

app = sys.argv[1]
sys.argv = sys.argv[1:]
MPI.COMM_WORLD.Barrier()
t0 = time.perf_counter()
runpy.run_path(app, run_name="__main__")
MPI.COMM_WORLD.Barrier()
if MPI.COMM_WORLD.rank == 0:
    print("TIMED %.6f" % (time.perf_counter() - t0), flush=True)
