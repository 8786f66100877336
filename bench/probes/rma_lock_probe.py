"""What a passive-target lock epoch costs, and when the target must be in
MPI for it: the probe behind nxtval-rma's error (bench/RESULTS.md).

    mpiexec -n 2 .venv/bin/python bench/probes/rma_lock_probe.py

Rank 1 draws from a counter in rank 0's window (Lock, Get_accumulate,
Unlock; exclusive, as mpi4py's nxtval demo does), on a window made by
Win.Allocate and by Win.Create.  Three settings of rank 0:

* ``own window``: rank 0 draws from its own window, alone (the cost of
  the calls themselves, which calibrate measures as ``rma``);
* ``target in MPI``: rank 1 draws while rank 0 waits in a Barrier;
* ``target computing``: rank 1 draws while rank 0 computes in chunks of
  100 us with an Iprobe between them.  A draw that takes about k chunks
  needed rank 0 inside MPI k times: the target's progress serves it.

Medians per draw, in microseconds.
"""
import time

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
DRAWS, CHUNK = 1000, 100e-6


def draw_loop(win, n):
    one, got = np.ones(1, np.int64), np.zeros(1, np.int64)
    each = np.empty(n)
    for k in range(n):
        t0 = time.perf_counter()
        win.Lock(0)
        win.Get_accumulate(one, got, 0, op=MPI.SUM)
        win.Unlock(0)
        each[k] = time.perf_counter() - t0
    return float(np.median(each)) * 1e6


def computing(done):
    """Rank 0: compute in chunks, one Iprobe between them, until rank 1 is done."""
    while not done.Test():
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < CHUNK:
            pass
        comm.Iprobe()


for kind in ("Allocate", "Create"):
    if kind == "Allocate":
        win = MPI.Win.Allocate(8 if comm.rank == 0 else 0, 8, comm=comm)
    else:
        mem = np.zeros(1, np.int64)
        win = MPI.Win.Create(mem if comm.rank == 0 else None, 8, comm=comm)
    row = {}
    row["own window"] = draw_loop(win, DRAWS) if comm.rank == 0 else None
    comm.Barrier()
    if comm.rank == 1:
        row["target in MPI"] = draw_loop(win, DRAWS)
    comm.Barrier()
    if comm.rank == 1:
        row["target computing"] = draw_loop(win, DRAWS // 10)
        comm.Isend(b"", 0, 5).Wait()
    else:
        computing(comm.Irecv(bytearray(1), 1, 5))
    rows = comm.gather(row, root=0)
    if comm.rank == 0:
        got = {**rows[0], **{k: v for k, v in rows[1].items() if v is not None}}
        print(f"Win.{kind}: " + ", ".join(f"{k} {v:.1f} us" for k, v in got.items())
              + f" (chunks of {CHUNK * 1e6:.0f} us)", flush=True)
    win.Free()
