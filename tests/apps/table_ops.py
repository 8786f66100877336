"""The operations of mpimodel/ops.py's table that tests/apps/coverage.py
does not call, each once (run with 4 ranks).  Together the two programs
call every row of the table that replay does not refuse.

Prints one checksum line per rank, which the replay must reproduce.
"""
import numpy as np
from mpi4py import MPI

w = MPI.COMM_WORLD
r, n = w.rank, w.size
assert n == 4, "run with 4 ranks"
nxt, prv = (r + 1) % n, (r - 1) % n
got = []                                      # what this rank received, in order
a = np.arange(8, dtype="d") + 10 * r
b = np.zeros(8)


def keep(x):
    got.append(float(np.asarray(x, dtype="d").sum()))


# persistent ready send: the receive is posted before the send starts
pr = w.Recv_init(b, prv, 70)
ps = w.Rsend_init(a, nxt, 70)
pr.Start()
w.Barrier()
ps.Start()
MPI.Request.Waitall([pr, ps])
keep(b)
pr.Free()
ps.Free()

# request queries and cancel
# (their answers depend on timing: looked at, never acted on)
rq = w.Irecv(b, prv, 71)
w.Send(a, nxt, 71)
rq.Get_status()
rq.Wait()
keep(b)
r1, r2 = w.Irecv(b, prv, 72), w.Isend(a, nxt, 72)
MPI.Request.Get_status_all([r1, r2])
MPI.Request.Get_status_any([r1, r2])
MPI.Request.Get_status_some([r1, r2])
MPI.Request.Waitall([r1, r2])
keep(b)
rc = w.Irecv(b, prv, 999)                    # never sent: cancelled
rc.Cancel()
rc.Wait()

# nonblocking collectives
counts, displs = [2] * n, [2 * i for i in range(n)]
out = np.zeros(2 * n)
w.Iallgatherv(a[:2], [out, (counts, displs), MPI.DOUBLE]).Wait()
keep(out)
w.Igatherv(a[:2], [out, (counts, displs), MPI.DOUBLE] if r == 0 else None, root=0).Wait()
keep(out if r == 0 else 0)
part = np.zeros(2)
w.Iscatterv([a, (counts, displs), MPI.DOUBLE] if r == 1 else None, part, root=1).Wait()
keep(part)
w.Ireduce_scatter(a, part, recvcounts=counts).Wait()
keep(part)
types = [MPI.DOUBLE] * n
w.Ialltoallw([a, (counts, [8 * d for d in displs]), types],
             [out, (counts, [8 * d for d in displs]), types]).Wait()
keep(out)

# neighbourhood collectives on a ring
ring = w.Create_cart([n], periods=[True])
nb = np.zeros(4)
ring.Ineighbor_allgatherv(a[:2], [nb, ([2, 2], [0, 2]), MPI.DOUBLE]).Wait()
keep(nb)
ring.Ineighbor_alltoall(a[:4], nb).Wait()
keep(nb)
ring.Ineighbor_alltoallv([a, ([2, 2], [0, 2]), MPI.DOUBLE],
                         [nb, ([2, 2], [0, 2]), MPI.DOUBLE]).Wait()
keep(nb)
ring.Ineighbor_alltoallw([a, ([2, 2], [0, 16]), [MPI.DOUBLE] * 2],
                         [nb, ([2, 2], [0, 16]), [MPI.DOUBLE] * 2]).Wait()
keep(nb)

# persistent collectives: each started twice
one = np.zeros(1)
full = np.zeros(n)
blocks = np.zeros(2 * n)
persistent = [
    (w.Barrier_init(), None),
    (w.Gather_init(a[:1], full if r == 0 else None, root=0), full),
    (w.Gatherv_init(a[:2], [out, (counts, displs), MPI.DOUBLE] if r == 0 else None, root=0),
     out),
    (w.Scatter_init(a[:n] if r == 0 else None, one, root=0), one),
    (w.Scatterv_init([a, (counts, displs), MPI.DOUBLE] if r == 0 else None, part, root=0),
     part),
    (w.Allgather_init(a[:1], full), full),
    (w.Allgatherv_init(a[:2], [blocks, (counts, displs), MPI.DOUBLE]), blocks),
    (w.Alltoall_init(a[:n], full), full),
    (w.Alltoallv_init([a, (counts, displs), MPI.DOUBLE], [blocks, (counts, displs), MPI.DOUBLE]),
     blocks),
    (w.Alltoallw_init([a, (counts, [8 * d for d in displs]), types],
                      [blocks, (counts, [8 * d for d in displs]), types]), blocks),
    (w.Reduce_init(a[:1], one if r == 0 else None, root=0), one),
    (w.Reduce_scatter_block_init(a[:n], one), one),
    (w.Reduce_scatter_init(a, part, recvcounts=counts), part),
    (w.Scan_init(a[:1], one), one),
    (w.Exscan_init(a[:1], one), one),
    (ring.Neighbor_allgather_init(a[:2], nb), nb),
    (ring.Neighbor_allgatherv_init(a[:2], [nb, ([2, 2], [0, 2]), MPI.DOUBLE]), nb),
    (ring.Neighbor_alltoall_init(a[:4], nb), nb),
    (ring.Neighbor_alltoallv_init([a, ([2, 2], [0, 2]), MPI.DOUBLE],
                                  [nb, ([2, 2], [0, 2]), MPI.DOUBLE]), nb),
    (ring.Neighbor_alltoallw_init([a, ([2, 2], [0, 16]), [MPI.DOUBLE] * 2],
                                  [nb, ([2, 2], [0, 16]), [MPI.DOUBLE] * 2]), nb),
]
for req, buf in persistent:
    for _ in range(2):
        a += 1
        req.Start()
        req.Wait()
        if buf is not None:
            keep(buf)
    req.Free()

# an intercommunicator from two groups (the even and the odd ranks)
g = w.Get_group()
evens, odds = g.Incl([0, 2]), g.Incl([1, 3])
mine, theirs = (evens, odds) if r % 2 == 0 else (odds, evens)
ic = MPI.Intercomm.Create_from_groups(mine, 0, theirs, 0, "table-ops")
keep(ic.allreduce(r))
ic.Free()

# a disconnected duplicate
d = w.Dup()
keep(d.allreduce(r))
d.Disconnect()

print(f"rank {r} table ops {sum(got):.6f} {len(got)}", flush=True)
