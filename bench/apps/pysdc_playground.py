"""Driver for pySDC: its parallel-across-the-nodes SDC study
(pySDC.projects.parallelSDC.preconditioner_playground_MPI, "simulate"):
each rank one collocation node of the sweeper (generic_implicit_MPI,
Allreduce and Bcast per sweep), five preconditioners on four problems.
The study writes its iteration counts to data/ in the working
directory: run here in a temporary one, so the repository stays clean.

    mpiexec -n 2 python bench/apps/pysdc_playground.py
"""
import os
import runpy
import sys
import tempfile

from mpi4py import MPI

with tempfile.TemporaryDirectory() as d:
    os.chdir(d)
    os.makedirs("data")
    sys.argv = [sys.argv[0], "simulate"]
    runpy.run_module("pySDC.projects.parallelSDC.preconditioner_playground_MPI",
                     run_name="__main__", alter_sys=True)
    MPI.COMM_WORLD.Barrier()                  # every rank done with the directory
