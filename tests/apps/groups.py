"""Local group operations called the ways libraries call them (found by
pylops-mpi's halo example): the class's methods unbound, on a Cartesian
communicator's group; a communicator made from a group; an
intercommunicator disconnected, as mpi4py.futures does at shutdown."""
from mpi4py import MPI

comm = MPI.COMM_WORLD
cart = comm.Create_cart([comm.size], periods=[True])
wg, cg = comm.Get_group(), cart.Get_group()
assert isinstance(wg, MPI.Group)
me = MPI.Group.Translate_ranks(wg, [comm.rank], cg)[0]
evens = wg.Incl(list(range(0, comm.size, 2)))
odds = wg.Excl(list(range(0, comm.size, 2)))
union = MPI.Group.Union(evens, odds)
common = MPI.Group.Intersection(union, evens)
sub = comm.Create_group(evens) if comm.rank % 2 == 0 else None
total = sub.allreduce(comm.rank) if sub is not None else -1
left = cart.sendrecv(comm.rank, dest=(me + 1) % comm.size, source=(me - 1) % comm.size)
color = comm.rank % 2
half = comm.Split(color, comm.rank)
inter = half.Create_intercomm(0, comm, 1 - color, tag=9)
remote = inter.allreduce(comm.rank)
inter.Disconnect()
print(f"rank {comm.rank} remote {remote} cart {me} union {union.Get_size()} "
      f"common {common.Get_size()} "
      f"evens' sum {total} left {left}")
