"""An application whose exit handler communicates after its main body, as a
worker pool's shutdown does: the tool has closed its trace or log by then."""
import atexit

from mpi4py import MPI

comm = MPI.COMM_WORLD


def goodbye():
    comm.Barrier()
    if comm.rank == 0:
        comm.send("bye", dest=1, tag=9)
    elif comm.rank == 1:
        print("rank 1 got", comm.recv(source=0, tag=9), flush=True)


atexit.register(goodbye)
comm.Barrier()
print(f"rank {comm.rank} main done", flush=True)
