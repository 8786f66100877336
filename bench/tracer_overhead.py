"""Tracer overhead: per call (micro-benchmarks) and on the examples.

    python bench/tracer_overhead.py [--repeats 5] [--quick] [--examples]

Each measurement runs the untraced and the traced program alternately in the
same session, ``--repeats`` times, and keeps the minimum of each (the machine
is shared and noisy; the minimum is the least disturbed run).  Reported:
the ratio traced/untraced and the microseconds added per MPI call.  Runs
use at most 2 ranks so that no core is oversubscribed.
Goal: <= 2 us added per call, <= 1 us per poll that finds nothing, <= 3 %
on the examples; <= 0.5 us per call made below Python (the ``C:`` rows,
traced with ``--c-calls``).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
MPIEXEC = str(BIN / "mpiexec") if (BIN / "mpiexec").exists() else "mpiexec"

# (name, ranks, program args, traced calls on the critical path per call of
# rank 0).  In the ping-pong every round trip chains four traced calls (Send
# and Recv on each rank), so the time added is spread over 2 x rank 0's calls.
MICRO = [
    ("ping-pong 8 B (Send/Recv)", 2, ["pingpong", "200000"], 2),
    ("Allreduce 8 B", 2, ["allreduce", "100000"], 1),
    ("Irecv+Isend+Waitall to self", 1, ["isend", "150000"], 1),
    ("Lock+Get_accumulate+Unlock, self", 1, ["rma", "150000"], 1),
    ("Iprobe finding nothing", 1, ["iprobe", "300000"], 1),
    ("Test completing nothing", 1, ["test", "300000"], 1),
    # the same calls made below Python, traced by the PMPI shim (--c-calls)
    ("C: ping-pong 8 B (Send/Recv)", 2, ["c-pingpong", "400000"], 2),
    ("C: Irecv+Isend+Waitall to self", 1, ["c-isend", "300000"], 1),
    ("C: Test completing nothing", 1, ["c-test", "600000"], 1),
]
EXAMPLES = [
    ("jacobi", ["examples/jacobi.py", "--n", "512", "--iters", "300"]),
    ("cg", ["examples/cg.py", "--n", "400000", "--iters", "150"]),
    ("master_worker", ["examples/master_worker.py", "--tasks", "60", "--size", "250"]),
    ("uneven", ["examples/uneven.py", "--iters", "20", "--work", "100000"]),
]


def env():
    e = dict(os.environ)
    # at most 2 ranks on 2 cores: spinning waits are the fastest MPI there is,
    # which makes the tracer's share as large as it can be
    e["MPIR_CVAR_ENABLE_HEAVY_YIELD"] = "0"
    # one BLAS thread per rank: 2 ranks x 2 threads on 2 cores is noise
    for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        e[v] = "1"
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    return e


def run(n, args, traced, tmp):
    cmd = [MPIEXEC, "-n", str(n), sys.executable]
    if traced:
        out = Path(tmp) / "trace"
        shutil.rmtree(out, ignore_errors=True)
        cmd += ["-m", "instrument", "trace", "-o", str(out)]
        if args[1].startswith("c-"):             # calls below Python: the shim traces them
            cmd.append("--c-calls")
    p = subprocess.run(cmd + args, capture_output=True, text=True, cwd=ROOT, env=env())
    if p.returncode:
        raise SystemExit(f"{' '.join(cmd + args)} failed:\n{p.stderr[-3000:]}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="fewer calls, 2 repeats")
    ap.add_argument("--examples", action="store_true", help="only the examples")
    a = ap.parse_args()
    reps = 2 if a.quick else a.repeats
    tmp = tempfile.mkdtemp()
    rows = []
    print(f"{'benchmark':<34}{'untraced s':>11}{'traced s':>10}{'ratio':>8}{'us/call':>9}")
    for name, n, args, chain in [] if a.examples else MICRO:
        if a.quick:
            args = [args[0], str(int(args[1]) // 5)]
        base, tr = [], []
        for _ in range(reps):
            for traced, acc in ((False, base), (True, tr)):
                m = re.search(r"CALLS (\d+) SECONDS ([\d.]+)",
                              run(n, ["bench/_calls.py"] + args, traced, tmp))
                acc.append(float(m.group(2)))
        calls = int(args[1]) * chain
        b, t = min(base), min(tr)
        rows.append((name, b, t, t / b, (t - b) / calls * 1e6))
        print(f"{name:<34}{b:>11.3f}{t:>10.3f}{t / b:>8.3f}{(t - b) / calls * 1e6:>9.2f}")
    for name, args in EXAMPLES:
        if a.quick:
            args = args[:1]
        base, tr = [], []
        for _ in range(reps):
            for traced, acc in ((False, base), (True, tr)):
                m = re.search(r"TIMED ([\d.]+)", run(2, ["bench/_timed.py"] + args, traced, tmp))
                acc.append(float(m.group(1)))
        b, t = min(base), min(tr)
        rows.append((name, b, t, t / b, None))
        print(f"{'example ' + name + ' (2 ranks)':<34}{b:>11.3f}{t:>10.3f}{t / b:>8.3f}{'':>9}")
    shutil.rmtree(tmp, ignore_errors=True)
    return rows


if __name__ == "__main__":
    main()
