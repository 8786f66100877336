"""A shared counter and a spin lock over passive-target RMA: tickets drawn
with Get_accumulate under Lock/Unlock, a Compare_and_swap lock, a final
Fetch_and_op and a read under a shared lock.  Who gets which ticket
changes from run to run; the replay must print what the recorded run
printed."""
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
r, n = comm.rank, comm.size
win = MPI.Win.Allocate(8 if r == 0 else 0, 8, comm=comm)
if r == 0:
    np.frombuffer(win.tomemory(), dtype="i8")[:] = 0
comm.Barrier()
tickets = []
for _ in range(4):
    one, got = np.ones(1, "i8"), np.zeros(1, "i8")
    win.Lock(0)
    win.Get_accumulate(one, got, 0, op=MPI.SUM)
    win.Unlock(0)
    tickets.append(int(got[0]))
    sum(i for i in range(3000 * (r + 1)))
mine = np.zeros(1, "i8")
while True:                       # a spin lock: take it when the count is complete
    win.Lock(0, MPI.LOCK_EXCLUSIVE)
    win.Compare_and_swap(np.array([1000 + r], "i8"), np.array([4 * n], "i8"), mine, 0)
    win.Unlock(0)
    if mine[0] == 4 * n:
        break
win.Lock(0)
old = np.zeros(1, "i8")
win.Fetch_and_op(np.array([4 * n], "i8"), old, 0, op=MPI.REPLACE)
win.Unlock(0)
peek = np.zeros(1, "i8")          # a read under a shared lock, which excludes no one
win.Lock(0, MPI.LOCK_SHARED)
win.Get(peek, 0)
win.Unlock(0)
win.Free()
print(f"rank {r} tickets {tickets} released {old[0]}", flush=True)
