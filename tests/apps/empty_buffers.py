"""A collective into empty arrays: ranks that receive nothing pass a
(0, 3) array, as Devito's gathers of sparse points do on ranks that hold
none; rank 0 receives every rank's row."""
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
p, me = comm.size, comm.rank
send = np.full((1, 3), float(me + 1))
recv = np.empty((p if me == 0 else 0, 3))
rcount = [3 if me == 0 else 0] * p
rdisp = [3 * r if me == 0 else 0 for r in range(p)]
comm.Alltoallv([send, [3 if r == 0 else 0 for r in range(p)], [0] * p, MPI.DOUBLE],
               [recv, rcount, rdisp, MPI.DOUBLE])
print(f"rank {me} got {recv.sum():g} in {recv.shape[0]} rows", flush=True)
