"""A representative's concurrent copies held in step (replay/lockstep.py).

The application sleeps a random time between its collectives, a different
one in every process, and prints the clock before and after each.  Held in
step, no copy leaves a collective before every copy has entered it: a
causal order, not a timing bound.  Free-running, the copies drift apart
and the order breaks (the control that shows the check can fail)."""
from __future__ import annotations

import sys

from conftest import mpirun, run

PY = [sys.executable]

APP = """\
import os, random, time
from mpi4py import MPI
comm = MPI.COMM_WORLD
rnd = random.Random(os.urandom(8))
for k in range({iters}):
    time.sleep(rnd.uniform(0.0, 0.04))
    print("before", k, time.monotonic(), flush=True)
    comm.Allreduce(MPI.IN_PLACE, [bytearray(8), MPI.BYTE], op=MPI.BOR)
    print("after", k, time.monotonic(), flush=True)
"""
ITERS = 12


def clocks(path) -> dict:
    """(before|after, k) -> the clock a copy printed there."""
    out = {}
    for line in path.read_text().splitlines():
        what, k, t = line.split()
        out[what, int(k)] = float(t)
    return out


def replayed(tmp_path, copies: str) -> list[dict]:
    d = tmp_path
    app = d / "app.py"
    if not app.exists():
        app.write_text(APP.format(iters=ITERS))
        mpirun(2, ["-m", "instrument", "record", "--ranks", "0", "-o", d / "log", app])
    out = d / copies
    run([*PY, "-m", "replay", "--rank", "0", "--log", str(d / "log"), "-o", str(out),
         "--load", "3", "--copies", copies, str(app)])
    return [clocks(p) for p in [out / "rank0.out", *sorted(out.glob("copies/copy*/rank0.out"))]]


def out_of_step(copies: list[dict]) -> list[int]:
    """The collectives some copy left before another had entered them."""
    return [k for k in range(ITERS)
            if min(c["after", k] for c in copies) < max(c["before", k] for c in copies)]


def test_copies_in_step_leave_each_collective_together(tmp_path):
    held = replayed(tmp_path, "in-step")
    assert len(held) == 3 and all(len(c) == 2 * ITERS for c in held)
    assert out_of_step(held) == []
    free = replayed(tmp_path, "free")
    assert len(out_of_step(free)) > ITERS // 2
