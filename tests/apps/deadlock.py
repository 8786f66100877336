"""101 barriers, then both ranks wait for a message nobody sends: blocked
inside MPI for good (run with 2 ranks)."""
from mpi4py import MPI

w = MPI.COMM_WORLD
for _i in range(101):
    w.Barrier()
if w.rank == 0:
    w.recv(source=1, tag=99)      # never sent: blocked in MPI
else:
    w.recv(source=0, tag=99)
