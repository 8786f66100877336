"""One sequence of communication made twice: through mpi4py, then by a C
library on the raw handles (below_python_ops.c, compiled with mpicc into
the path given as argv[1]).  Prints both checksums, which must agree; the
trace must hold both halves alike.  A third part calls MPI_Alltoallw from
C, which the tracer only counts (left out with a second argument,
``replayable``: the C log cannot answer it either)."""
import ctypes
import sys

import numpy as np
from mpi4py import MPI

N = 64
world = MPI.COMM_WORLD


def exchange(n: int) -> float:
    dup = world.Dup()
    p = dup.size
    cart = dup.Create_cart([p], periods=[True], reorder=False)
    me = cart.rank
    left, right = cart.Shift(0, 1)
    a = me + 0.5 * np.arange(n * p, dtype=float)
    b = np.zeros(n * p)
    check = 0.0
    r = [cart.Irecv([b, n, MPI.DOUBLE], MPI.ANY_SOURCE, 5),
         cart.Isend([a, n, MPI.DOUBLE], right, 5)]
    MPI.Request.Waitall(r)
    check += b[:n].sum()
    st = MPI.Status()
    cart.Sendrecv([a, n, MPI.DOUBLE], right, 6, [b, n, MPI.DOUBLE], left, 6, st)
    check += b[:n].sum()
    cart.Bcast([a, n, MPI.DOUBLE], 0)
    check += a[:n].sum()
    cart.Reduce([a, n, MPI.DOUBLE], [b, n, MPI.DOUBLE] if me == p - 1 else None, MPI.SUM, p - 1)
    if me == p - 1:
        check += b[:n].sum()
    counts = [i + 1 for i in range(p)]
    displs = [sum(counts[:i]) for i in range(p)]
    total = p * (p + 1) // 2
    cart.Gatherv([a, me + 1, MPI.DOUBLE],
                 [b, (counts, displs), MPI.DOUBLE] if me == 0 else None, 0)
    if me == 0:
        check += b[:total].sum()
    cart.Allgatherv([a, me + 1, MPI.DOUBLE], [b, (counts, displs), MPI.DOUBLE])
    check += b[:total].sum()
    mine = [me + 1] * p
    cart.Alltoallv([a, (counts, displs), MPI.DOUBLE],
                   [b, (mine, [i * (me + 1) for i in range(p)]), MPI.DOUBLE])
    check += b[:p * (me + 1)].sum()
    cart.Iallreduce([a, n, MPI.DOUBLE], [b, n, MPI.DOUBLE], MPI.SUM).Wait()
    check += b[:n].sum()
    req = cart.Irecv([b, n, MPI.DOUBLE], left, 9)
    cart.Barrier()
    cart.Send([a, n, MPI.DOUBLE], right, 9)
    while not req.Test():
        pass
    check += b[:n].sum()
    s = cart.Isend([a, 2 * n, MPI.DOUBLE], right, 10)
    cart.Probe(MPI.ANY_SOURCE, 10, st)
    cart.Recv([b, 2 * n, MPI.DOUBLE], st.source, 10)
    s.Wait()
    check += b[:2 * n].sum()
    pr = [cart.Recv_init([b, n, MPI.DOUBLE], left, 11),
          cart.Send_init([a, n, MPI.DOUBLE], right, 11)]
    for _ in range(2):
        MPI.Prequest.Startall(pr)
        MPI.Request.Waitall(pr)
        check += b[:n].sum()
    for r in pr:
        r.Free()
    cart.Allreduce([a, n, MPI.DOUBLE], [b, n, MPI.DOUBLE])
    check += b[:n].sum()
    cart.Free()
    dup.Free()
    return float(check)


lib = ctypes.CDLL(sys.argv[1])
lib.exchange.restype = ctypes.c_double
lib.exchange.argtypes = [ctypes.c_int, ctypes.c_int]
lib.untraced.argtypes = [ctypes.c_int]
in_python = exchange(N)
world.Barrier()
in_c = lib.exchange(MPI._handleof(world), N)
world.Barrier()
extra = ""
if sys.argv[2:] != ["replayable"]:
    lib.untraced(MPI._handleof(world))
else:                                   # group calls, answered in a replay too
    lib.groups.restype = ctypes.c_longlong
    lib.groups.argtypes = [ctypes.c_int]
    extra = f" groups {lib.groups(MPI._handleof(world))} waitsome {lib.waitsome_of_nulls()}"
sys.stdout.write(f"rank {world.rank} python {in_python:.6f} c {in_c:.6f}{extra}\n")
sys.stdout.flush()
