"""Exercises every traced mpi4py operation once or twice (run with 4 ranks).

The test (tests/test_trace_coverage.py) checks the resulting trace; comments
say what each block must produce.  Deterministic: no wildcard races.
"""

import numpy as np
from mpi4py import MPI

w = MPI.COMM_WORLD
r, n = w.rank, w.size
assert n == 4, "run with 4 ranks"
nxt, prv = (r + 1) % n, (r - 1) % n
a = np.arange(8, dtype="d") + r          # 64 bytes
b = np.empty(8)

# blocking point-to-point, ring: tag 10..13
w.Send(a, nxt, 10)
w.Recv(b, prv, 10)
MPI.Attach_buffer(bytearray(1 << 16))
w.Bsend(a, nxt, 11)
w.Recv(b, prv, 11)
w.Ssend(a[:4], nxt, 12) if r % 2 == 0 else None
w.Recv(b[:4], prv, 12) if r % 2 == 1 else None
w.Ssend(a[:4], nxt, 12) if r % 2 == 1 else None
w.Recv(b[:4], prv, 12) if r % 2 == 0 else None
req = w.Irecv(b, prv, 13)
w.Barrier()
w.Rsend(a, nxt, 13)
req.Wait()
w.send({"x": r}, nxt, 14)
w.recv(source=prv, tag=14)
w.bsend([r] * 3, nxt, 15)
w.recv(None, prv, 15)
w.ssend("s", nxt, 16) if r % 2 == 0 else w.recv(source=prv, tag=16)
w.recv(source=prv, tag=16) if r % 2 == 0 else w.ssend("s", nxt, 16)

# wildcard receive: rank 0 gets one message from each other rank, tag 20+src
if r == 0:
    st = MPI.Status()
    for _ in range(n - 1):
        w.Recv(b, MPI.ANY_SOURCE, MPI.ANY_TAG, st)
else:
    w.Send(a, 0, 20 + r)
w.Barrier()

# nonblocking: all send flavours, completed by the different waits/tests
reqs = [w.Irecv(b, prv, 30), w.Isend(a, nxt, 30)]
MPI.Request.Waitall(reqs)
r1 = w.Ibsend(a, nxt, 31)
r2 = w.Irecv(b, prv, 31)
MPI.Request.Waitany([r1, r2])
MPI.Request.Waitany([r1, r2])
r1 = w.Issend(a, nxt, 32)
r2 = w.Irecv(b, MPI.ANY_SOURCE, 32)
while not MPI.Request.Testall([r1, r2]):
    pass
r2 = w.Irecv(b, prv, 33)
w.Barrier()
r1 = w.Irsend(a, nxt, 33)
done = []
while len(done) < 2:
    done += MPI.Request.Waitsome([r1, r2]) or []
r1 = w.isend(("obj", r), nxt, 34)
r2 = w.irecv(source=prv, tag=34)
got = MPI.Request.waitall([r1, r2])
assert got[1] == ("obj", prv)
r1 = w.issend(r, nxt, 35)
r2 = w.irecv(source=prv, tag=35)
while not r2.Test():
    pass
r1.wait()
r1 = w.ibsend(r, nxt, 36)
r2 = w.irecv(source=prv, tag=36)
idx, flag = MPI.Request.Testany([r2])
while not flag:
    idx, flag = MPI.Request.Testany([r2])
r1.Wait()
r1 = w.Isend(a, nxt, 37)
r2 = w.Irecv(b, prv, 37)
while MPI.Request.Testsome([r1, r2]) is not None:
    pass
MPI.Request.waitany([w.isend(1, nxt, 38)])
w.recv(source=prv, tag=38)
r2 = w.irecv(source=prv, tag=39)
w.send(r, nxt, 39)
flag, obj = r2.test()
while not flag:
    flag, obj = r2.test()

# sendrecv family: ring, tags 40..44
w.Sendrecv(a, nxt, 40, b, prv, 40)
w.Sendrecv_replace(b, nxt, 41, prv, 41)
assert w.sendrecv(r, nxt, 42, None, prv, 42) == prv
MPI.Request.Wait(w.Isendrecv(a, nxt, 43, b, prv, 43))
w.Isendrecv_replace(b, nxt, 44, prv, 44).Wait()

# probes (tag 50..55)
w.Send(a[:2], nxt, 50)
w.Probe(prv, 50)
w.Recv(b[:2], prv, 50)
w.Send(a[:3], nxt, 51)
while not w.Iprobe(MPI.ANY_SOURCE, 51):
    pass
w.Recv(b[:3], prv, 51)
w.Send(a[:4], nxt, 52)
m = w.Mprobe(prv, 52)
m.Recv(b[:4])
w.send("m", nxt, 53)
m = w.mprobe(prv, 53)
assert m.recv() == "m"
w.Send(a[:5], nxt, 54)
m = None
while m is None:
    m = w.Improbe(prv, 54)
m.Irecv(b[:5]).Wait()
w.send(5, nxt, 55)
w.probe(prv, 55)
w.iprobe(prv, 55)
m = w.improbe(prv, 55)
m = m or w.mprobe(prv, 55)
assert m.irecv().wait() == 5

# persistent point-to-point (tag 60)
ps = w.Send_init(a, nxt, 60)
pr = w.Recv_init(b, prv, 60)
for _ in range(2):
    MPI.Prequest.Startall([pr, ps])
    MPI.Request.Waitall([pr, ps])
pr.Start()
ps.Start()
pr.Wait()
ps.Wait()
ps.Free()
pr.Free()
for f in (w.Bsend_init, w.Ssend_init):
    p1, p2 = w.Recv_init(b, prv, 61), f(a, nxt, 61)
    p1.Start()
    p2.Start()
    MPI.Request.Waitall([p1, p2])
    p1.Free()
    p2.Free()

# collectives, buffer and object, blocking
w.Barrier()
w.barrier()
w.Bcast(a, root=1)
w.bcast({"k": 1} if r == 2 else None, root=2)
rb = np.empty(8 * n) if r == 0 else None
w.Gather(a, rb, root=0)
w.Gatherv(a[: r + 1], [rb, [1, 2, 3, 4]] if r == 0 else None, root=0)
w.Scatter(rb, b, root=0)
w.Scatterv([rb, [1, 2, 3, 4]] if r == 0 else None, b[: r + 1], root=0)
ab = np.empty(8 * n)
w.Allgather(a, ab)
w.Allgatherv(a[: r + 1], [ab, [1, 2, 3, 4]])
w.Alltoall(ab, np.empty(8 * n))
sc = [1, 2, 3, 4]
sd = [0, 1, 3, 6]
w.Alltoallv([ab, (sc, sd)], [np.empty(4 * (r + 1)), [r + 1] * 4])
w.Alltoallw([ab, ([1] * n, [0, 8, 16, 24]), [MPI.DOUBLE] * n],
            [np.empty(n), ([1] * n, [0, 8, 16, 24]), [MPI.DOUBLE] * n])
# an explicit count is the count of one block (mpi4py): 3 doubles per rank
w.Alltoall([ab, 3, MPI.DOUBLE], [np.empty(8 * n), 3, MPI.DOUBLE])
w.Allgather([a, 3, MPI.DOUBLE], [ab, 3, MPI.DOUBLE])
w.Reduce(a, b if r == 3 else None, op=MPI.SUM, root=3)
w.Allreduce(a, b)
w.Allreduce(MPI.IN_PLACE, b)
w.Reduce_scatter_block(ab, b)
w.Reduce_scatter(ab, np.empty(8 * (r + 1) // 1)[: [2, 6, 10, 14][r]], [2, 6, 10, 14])
w.Scan(a, b)
w.Exscan(a, b)
w.gather(r, root=1)
w.scatter(list(range(n)) if r == 0 else None, root=0)
w.allgather(r)
w.alltoall([r] * n)
w.reduce(r, root=0)
w.allreduce(r)
w.scan(r)
w.exscan(r)

# nonblocking and persistent collectives
MPI.Request.Waitall([w.Ibarrier(), w.Ibcast(a, root=0), w.Iallreduce(a, b)])
w.Igather(a, rb, root=0).Wait()
w.Iallgather(a, ab).Wait()
w.Ialltoallv([ab, (sc, sd)], [np.empty(4 * (r + 1)), [r + 1] * 4]).Wait()
w.Ireduce(a, b, root=0).Wait()
w.Iscan(a, b).Wait()
w.Iexscan(a, b).Wait()
w.Ireduce_scatter_block(ab, b).Wait()
w.Iscatter(rb, b, root=0).Wait()
w.Ialltoall(ab, np.empty(8 * n)).Wait()
pc = w.Allreduce_init(a, b)
pc.Start()
pc.Wait()
pc.Start()
pc.Wait()
pc.Free()
pb = w.Bcast_init(a, root=2)
pb.Start()
pb.Wait()
pb.Free()

# derived communicators: traffic on them must name world ranks
sub = w.Split(r % 2, r)                  # {0,2} and {1,3}
sub.Send(a, (sub.rank + 1) % 2, 70)
sub.Recv(b, (sub.rank + 1) % 2, 70)
sub.Allreduce(a, b)
d = w.Dup()
d.Barrier()
c = w.Clone()
c.Barrier()
idc, ireq = w.Idup()
ireq.Wait()
idc.Barrier()
grp = w.Get_group().Incl([0, 1])
cr = w.Create(grp)
if cr != MPI.COMM_NULL:
    cr.Bcast(a, root=1)
cg = w.Create_group(grp) if r < 2 else None
if cg is not None:
    cg.Barrier()
fg = MPI.Intracomm.Create_from_group(grp) if r < 2 else None
if fg is not None:
    fg.Allreduce(a, b)
node = w.Split_type(MPI.COMM_TYPE_SHARED)
node.Barrier()
cart = w.Create_cart([2, 2], periods=[True, False])
cart.Neighbor_allgather(a[:2], np.empty(8))
cart.Neighbor_alltoall(np.arange(8.0), np.empty(8))
cart.Neighbor_allgatherv(a[:2], [np.empty(8), [2, 2, 2, 2]])
cart.Neighbor_alltoallv([np.arange(8.0), [2, 2, 2, 2]], [np.empty(8), [2, 2, 2, 2]])
cart.Neighbor_alltoallw([np.arange(8.0), ([2] * 4, [0, 16, 32, 48]), [MPI.DOUBLE] * 4],
                        [np.empty(8), ([2] * 4, [0, 16, 32, 48]), [MPI.DOUBLE] * 4])
cart.Ineighbor_allgather(a[:2], np.empty(8)).Wait()
cart.neighbor_allgather(r)
cart.neighbor_alltoall([r] * 4)
row = cart.Sub([False, True])
row.Allreduce(a, b)
ring = w.Create_dist_graph_adjacent([prv], [nxt])
ring.Neighbor_alltoall(a[:1], b[:1])
gr = w.Create_graph([1, 2, 3, 4], [1, 0, 3, 2])
gr.Neighbor_allgather(a[:1], b[:1])
dg = w.Create_dist_graph([r], [1], [nxt])
dg.Neighbor_allgather(a[:1], b[:1])
inter = sub.Create_intercomm(0, w, 1 - r % 2, tag=80)   # even <-> odd
inter.Send(a, sub.rank, 81)
inter.Recv(b, sub.rank, 81)
inter.Bcast(a, root=MPI.ROOT if r == 0 else (MPI.PROC_NULL if r % 2 == 0 else 0))
merged = inter.Merge(high=(r % 2 == 1))
merged.Barrier()
for cm in (merged, inter, dg, gr, ring, row, cart, node, d, c, idc, sub):
    cm.Free()

# one-sided: traced with its target and bytes, recorded and replayed
win = MPI.Win.Create(b, comm=w)
win.Fence()
win.Put(a[:1], nxt)
win.Fence()
win.Free()
MPI.Detach_buffer()
print(f"rank {r} coverage done, last buffer {b.tolist()}", flush=True)
