"""Every one-sided call, deterministically (the same output in every run):
Put/Get/Accumulate between fences, atomics on a neighbour's window under
Lock/Flush, general active target (rank 0 polls with Test), a dynamic
window and a shared one.  Every rank prints what it read."""
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
r, n = comm.rank, comm.size
right, left = (r + 1) % n, (r - 1) % n

# active target with fences
buf = np.zeros(4, dtype="d")
win = MPI.Win.Create(buf, disp_unit=8, comm=comm)
total = 0.0
for it in range(3):
    win.Fence()
    win.Put(np.array([r + it], dtype="d"), right, target=0)
    win.Accumulate(np.array([1.0 + r], dtype="d"), 0, target=1, op=MPI.SUM)
    got = np.zeros(1)
    win.Fence()
    win.Get(got, left, target=0)
    win.Fence()
    total += buf[0] * 10 + got[0] + buf[1]
    sum(i * i for i in range(20000 * (r + 1)))
# request-based forms, each completed by its request
win.Fence()
req = [win.Rput(np.array([10.0 + r]), right, target=2),
       win.Raccumulate(np.array([1.0]), right, target=3, op=MPI.SUM)]
MPI.Request.Waitall(req)
win.Fence()
rgot, racc = np.zeros(1), np.zeros(1)
req = [win.Rget(rgot, left, target=2),
       win.Rget_accumulate(np.array([0.5]), racc, left, target=3, op=MPI.SUM)]
MPI.Request.Waitall(req)
win.Fence()
total += rgot[0] + racc[0] + buf[2] + buf[3]
win.Free()

# atomics, each on the right neighbour's window (one origin per target)
mem = MPI.Win.Allocate(24, 8, comm=comm)
a = np.frombuffer(mem.tomemory(), dtype="i8")
a[:] = [r, 10 * r, 100 * r]
comm.Barrier()
fetched, acc, swapped = np.zeros(1, "i8"), np.zeros(1, "i8"), np.zeros(1, "i8")
mem.Lock(right, MPI.LOCK_EXCLUSIVE)
mem.Fetch_and_op(np.ones(1, "i8"), fetched, right, 0, MPI.SUM)
mem.Get_accumulate(np.full(1, 5, "i8"), acc, right, 1, MPI.SUM)
mem.Compare_and_swap(np.full(1, -1, "i8"), np.full(1, 100 * right, "i8"), swapped, right, 2)
mem.Flush_local(right)
mem.Flush(right)
mem.Unlock(right)
comm.Barrier()
mem.Lock_all()
mem.Sync()
mine = a.tolist()
mem.Flush_local_all()
mem.Flush_all()
mem.Unlock_all()
mem.Free()

# general active target: even ranks expose to the next odd one
pscw = np.full(2, -1.0)
w2 = MPI.Win.Create(pscw, 8, comm=comm)
grp = comm.Get_group()
if r % 2 == 0 and r + 1 < n:
    g = grp.Incl([r + 1])
    w2.Post(g)
    if r == 0:
        while not w2.Test():        # how often it polls varies; what it reads does not
            pass
    else:
        w2.Wait()
    g.Free()
elif r % 2 == 1:
    g = grp.Incl([r - 1])
    w2.Start(g)
    w2.Put(np.array([r * 1.5, r * 2.5]), r - 1)
    w2.Complete()
    g.Free()
w2.Free()

# a dynamic window with attached memory
dyn = MPI.Win.Create_dynamic(comm=comm)
dmem = np.full(3, float(r))
dyn.Attach(dmem)
dyn.Fence()
dyn.Detach(dmem)
dyn.Free()

# a shared window: each rank writes its segment, reads its left neighbour's
sh = MPI.Win.Allocate_shared(16, 8, comm=comm)
seg = np.frombuffer(sh.tomemory(), dtype="d")
seg[:] = [r, r * r]
sh.Fence()
other, _ = sh.Shared_query(left)
seen = np.frombuffer(other, dtype="d").copy()
sh.Fence()
sh.Free()
grp.Free()
print(f"rank {r} total {total:.1f} atomics {fetched[0]} {acc[0]} {swapped[0]} mine {mine} "
      f"pscw {pscw.tolist()} shared {seen.tolist()}", flush=True)
