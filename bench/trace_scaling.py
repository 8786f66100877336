"""Tracing and recording on one host as N grows: their time against the untraced run's.

    python bench/trace_scaling.py [--ranks 64,128,256] [--rounds 2] [--iters 200]

Per N, in each round one after the other: the untraced run of
examples/jacobi.py, the same under ``instrument trace``, and under
``instrument record --ranks 0,1``, all with ``mpiexec -n N`` on this host
(oversubscribed: instrument.waits makes MPICH's waits yield, and the
untraced run is given the same setting).  Reported per N: the least wall
seconds of each over the rounds, the ratios traced/untraced and
recorded/untraced, and where the fastest traced run's time went, from
its meta.json's start and end: start-up (launch until rank 0 created the
trace), the run (until every rank had closed its files) and the rest
(merging the ranks' files into the tables, and exit).
Goal: trace and record within 1.5x the untraced run at N=256.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
MPIEXEC = str(BIN / "mpiexec") if (BIN / "mpiexec").exists() else "mpiexec"


def env() -> dict:
    return dict(os.environ, MPIR_CVAR_ENABLE_HEAVY_YIELD="1", OMP_NUM_THREADS="1",
                OPENBLAS_NUM_THREADS="1", PYTHONPATH=str(ROOT))


def timed(cmd: list[str]) -> tuple[float, float]:
    """Run ``cmd``: (wall seconds, epoch seconds at launch)."""
    t, epoch = time.perf_counter(), time.time()
    p = subprocess.run(cmd, cwd=ROOT, env=env(), stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t
    if p.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return wall, epoch


def phases(trace_dir: Path, wall: float, launched: float) -> tuple[float, float, float]:
    """(start-up, run, merge and exit) seconds of a traced run, from its meta.json."""
    meta = json.loads((trace_dir / "meta.json").read_text())
    start = datetime.datetime.fromisoformat(meta["start"]).timestamp() - launched
    end = datetime.datetime.fromisoformat(meta["end"]).timestamp() - launched
    return start, end - start, wall - end


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="64,128,256")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iters", type=int, default=200, help="jacobi iterations")
    a = ap.parse_args()
    app = ["examples/jacobi.py", "--n", "1024", "--iters", str(a.iters)]
    rows = []
    tmp = Path(tempfile.mkdtemp(prefix="trace-scaling-"))
    try:
        for n in (int(x) for x in a.ranks.split(",")):
            base = [MPIEXEC, "-n", str(n), sys.executable]
            times: dict[str, list[float]] = {"untraced": [], "trace": [], "record": []}
            split = []
            for k in range(a.rounds):
                times["untraced"].append(timed(base + app)[0])
                t, launched = timed(base + ["-m", "instrument", "trace", "--force", "-o",
                                            str(tmp / "t")] + app)
                times["trace"].append(t)
                split.append(phases(tmp / "t", t, launched))
                times["record"].append(timed(base + ["-m", "instrument", "record", "--force",
                                                     "--ranks", "0,1", "-o", str(tmp / "r")]
                                             + app)[0])
                print(f"N={n} round {k + 1}: " + ", ".join(
                    f"{w} {v[-1]:.1f} s" for w, v in times.items())
                    + " (trace: start-up {:.1f}, run {:.1f}, merge and exit {:.1f})".format(
                        *split[-1]), flush=True)
            u, t, r = (min(times[w]) for w in ("untraced", "trace", "record"))
            up, run, merge = split[times["trace"].index(t)]
            rows.append(f"| {n} | {u:.1f} | {t:.1f} | {t / u:.2f} | {up:.1f} / {run:.1f} / "
                        f"{merge:.1f} | {r:.1f} | {r / u:.2f} |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\n| N | untraced s | trace s | ratio | trace: start-up / run / merge s | record s | "
          "ratio |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
