"""mpi4py.util.pkl5 and the polling pattern of mpi4py.futures (found by the
futures demo): a library subclasses whatever MPI.Comm is at import time and
asks isinstance about its own class; a pkl5 nonblocking send is polled with
Request.test, the receiver polls Iprobe on ANY_SOURCE."""
from mpi4py import MPI
from mpi4py.util import pkl5

comm = MPI.COMM_WORLD
assert isinstance(comm, MPI.Intracomm)
assert not isinstance(comm, pkl5.Comm), "a plain communicator is not a pkl5 one"
pc = pkl5.Intracomm(comm)
assert isinstance(pc, pkl5.Comm) and isinstance(pc, MPI.Comm)
assert issubclass(pkl5.Intracomm, MPI.Comm) and not issubclass(MPI.Intracomm, pkl5.Comm)

data = list(range(comm.rank, 50000, 7))
polls = 0
if comm.rank == 0:
    for dest in range(1, comm.size):
        req = pc.issend(data, dest=dest, tag=3)
        while not req.test()[0]:
            polls += 1
    msg = f"sent {len(data)} items to {comm.size - 1} ranks"
else:
    while not pc.iprobe(source=MPI.ANY_SOURCE, tag=3):
        polls += 1
    got = pc.recv(source=MPI.ANY_SOURCE, tag=3)
    msg = f"got {len(got)} items, sum {sum(got)}"
total = pc.allreduce(len(data))
print(f"rank {comm.rank} {msg}, total {total}")
