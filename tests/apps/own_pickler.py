"""Objects sent with a pickler of the application's own (as mpipool
configures dill): rank 0 sends rank 1 a lambda, which the standard pickler
refuses; mpi4py pickles it with the one set on MPI.pickle, and so must the
recorder when it logs what rank 1 received."""
import marshal
import pickle
import types

from mpi4py import MPI


def dumps(obj, protocol=None):
    if isinstance(obj, types.FunctionType):
        return b"F" + marshal.dumps(obj.__code__)
    return b"P" + pickle.dumps(obj, protocol)


def loads(data):
    data = bytes(data)
    if data[:1] == b"F":
        return types.FunctionType(marshal.loads(data[1:]), globals())
    return pickle.loads(data[1:])


MPI.pickle.__init__(dumps, loads)
comm = MPI.COMM_WORLD
if comm.rank == 0:
    comm.send(lambda x: x * x + 1, dest=1, tag=4)
elif comm.rank == 1:
    f = comm.recv(source=0, tag=4)
    total = comm.allreduce(f(3))
    print(f"rank 1 f(3) = {f(3)}, sum {total}", flush=True)
if comm.rank != 1:
    comm.allreduce(0)
