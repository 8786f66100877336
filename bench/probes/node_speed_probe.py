"""How steady is one node's computation speed, and how does it change as
more of its cores work, or wait by spinning?

    mpiexec -n 16 python bench/probes/node_speed_probe.py [--seconds 5] [--work 40000]

A validation compares a replay's computation (representatives alone, or
beside load copies) with a real run's (every rank, some of them waiting
in MPI).  Both sides assume that one unit of work costs the same on the
node whichever of its cores are busy.  Hyper-threads sharing a core, a
shared host's other tenants, or turbo clocks that fall as cores wake
break that: then no model of the application can come closer than the
node's own spread.  This probe measures it.

Each phase lasts ``--seconds``.  Its *working* ranks time a fixed NumPy
unit (examples/uneven.py's: ten sweeps of sqrt over ``--work`` doubles)
again and again; the other ranks wait, either *spinning* in MPI (a
blocking wait: MPICH polls, as a real run's early ranks do) or *idle*
(a test every millisecond, sleeping between).  The phases:

    1 working, others idle | 1 working, others spinning |
    half working, others idle | half working, others spinning |
    all working | 1 working, others idle (again: the drift over the probe)

Prints the node's CPU topology (logical CPUs per physical core) and per
phase the median milliseconds per unit over all working ranks, the 10th
and 90th percentiles of single units, and the slowest working rank's
median against the fastest's.  Ratios between phases, measured in one
run, are what to read: absolute figures move with the machine.
"""
from __future__ import annotations

import argparse
import glob
import os
import time

import numpy as np
from mpi4py import MPI


def topology() -> str:
    """Logical CPUs, physical cores (distinct sibling sets) and the model."""
    sib = set()
    for f in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/topology/thread_siblings_list"):
        with open(f) as fh:
            sib.add(fh.read().strip())
    model = "?"
    try:
        with open("/proc/cpuinfo") as fh:
            model = next(line.split(":", 1)[1].strip() for line in fh
                         if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (f"{os.cpu_count()} logical CPUs, {len(sib) or '?'} physical cores "
            f"({max((s.count(',') + s.count('-') + 1 for s in sib), default='?')} "
            f"threads per core), {model}")


def unit(x: np.ndarray) -> np.ndarray:
    for _ in range(10):
        x = np.sqrt(x * x + 1.0) - 0.5 * x
    return x


def phase(comm, working: set[int], others: str, seconds: float, work: int) -> list[float]:
    """This rank's unit times (seconds) in one phase; [] if it waited."""
    comm.Barrier()
    times = []
    if comm.rank in working:
        x = np.linspace(0.0, 1.0, work) + comm.rank
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            x = unit(x)
            times.append(time.perf_counter() - t0)
        comm.Ibarrier().Wait()
    else:
        req = comm.Ibarrier()
        if others == "spinning":
            req.Wait()
        else:
            while not req.Test():
                time.sleep(0.001)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="length of one phase")
    ap.add_argument("--work", type=int, default=40000, help="doubles in the unit's vector")
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    n = comm.size
    half = set(range(max(1, n // 2)))
    phases = [("1 working, others idle", {0}, "idle"),
              ("1 working, others spinning", {0}, "spinning"),
              (f"{len(half)} working, others idle", half, "idle"),
              (f"{len(half)} working, others spinning", half, "spinning"),
              (f"all {n} working", set(range(n)), "idle"),
              ("1 working, others idle (again)", {0}, "idle")]
    if comm.rank == 0:
        print(f"# node: {topology()}; {n} ranks, {a.seconds:g} s per phase, "
              f"unit: 10 sqrt sweeps over {a.work} doubles", flush=True)
        print("| phase | units | median ms | p10-p90 ms | slowest / fastest rank |")
        print("|---|---|---|---|---|", flush=True)
    base = None
    for name, working, others in phases:
        mine = phase(comm, working, others, a.seconds, a.work)
        every = comm.gather(mine, root=0)
        if comm.rank != 0:
            continue
        units = np.concatenate([np.asarray(t) for t in every if t])
        medians = [np.median(t) for t in every if t]
        med = float(np.median(units))
        base = base or med
        print(f"| {name} | {len(units)} | {1e3 * med:.2f} ({med / base:.2f}x) | "
              f"{1e3 * np.percentile(units, 10):.2f}-{1e3 * np.percentile(units, 90):.2f} | "
              f"{max(medians) / min(medians):.2f} |", flush=True)


if __name__ == "__main__":
    main()
