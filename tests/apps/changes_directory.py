"""An application that changes its working directory before and between
its MPI calls (as pySDC's studies do, writing into a folder of their
own): the tool's output paths, given relative to where it was started,
must still land there."""
import os
import tempfile

from mpi4py import MPI

w = MPI.COMM_WORLD
here = tempfile.mkdtemp(prefix=f"elsewhere{w.rank}_")
os.chdir(here)
total = w.allreduce(w.rank + 1)
os.chdir(tempfile.mkdtemp(prefix="further_"))
w.Barrier()
print(f"rank {w.rank} total {total}")
