"""Code that tells mpi4py's objects by their class's module (petsc4py's
Comm conversion checks ``type(comm).__module__ == "mpi4py.MPI"``) must
take the tools' stand-ins for mpi4py's: this fails, untraced never, if one
says another module."""
from mpi4py import MPI

comm = MPI.COMM_WORLD
dup = comm.Dup()
cart = comm.Create_cart([comm.size])
req = comm.Isend(bytearray(1), comm.rank, 3)
comm.Recv(bytearray(1), comm.rank, 3)
req.Wait()
for obj in (comm, dup, cart, req):
    if type(obj).__module__ != "mpi4py.MPI":
        raise SystemExit(f"{type(obj).__name__} says module {type(obj).__module__}")
print(f"rank {comm.rank} all from mpi4py.MPI", flush=True)
