"""Replay fidelity: replayed computation vs the traced run's, per segment and total.

    python bench/replay_fidelity.py [--sizes 2,4] [--repeats 1]

For every example at each N: trace the run, record every rank, replay every
rank with as many replays at once as the node has cores (the traced run's
contention for caches and memory bandwidth), and compare each rank's replayed ``comp``
(wall seconds between calls, measured alone on this node) with the traced
``cpu`` of the same events (CPU seconds between calls, immune to the
oversubscription of the traced run).  Segments are matched by ``seq``.
Reported per example and N: the worst rank's total error, and the
distribution (median, 90th percentile) of per-segment relative errors over
segments longer than 1 ms (shorter ones are dominated by timer and
interpreter noise).  Goal: total within 3 %.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
MPIEXEC = str(BIN / "mpiexec") if (BIN / "mpiexec").exists() else "mpiexec"
EXAMPLES = {
    "jacobi": ["examples/jacobi.py", "--n", "768", "--iters", "60"],
    "cg": ["examples/cg.py", "--n", "200000", "--iters", "40"],
    "master_worker": ["examples/master_worker.py", "--tasks", "40", "--size", "300"],
    "uneven": ["examples/uneven.py", "--iters", "10", "--work", "200000"],
}


def env():
    e = dict(os.environ)
    for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        e[v] = "1"
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    return e


def sh(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env())
    if p.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{p.stderr[-3000:]}")
    return p


def measure(name, n, tmp):
    app = EXAMPLES[name]
    t, log, rep = tmp / "t", tmp / "log", tmp / "rep"
    for d in (t, log, rep):
        shutil.rmtree(d, ignore_errors=True)
    py = sys.executable
    sh([MPIEXEC, "-n", str(n), py, "-m", "instrument", "trace", "-o", str(t)] + app)
    ranks = ",".join(map(str, range(n)))
    sh([MPIEXEC, "-n", str(n), py, "-m", "instrument", "record", "--ranks", ranks, "-o",
        str(log)] + app)
    # as many replays at once as the traced run had ranks per core: the same
    # contention for caches and memory bandwidth as in the traced run
    k = min(n, os.cpu_count() or 1)
    sh([py, "-m", "replay", "--ranks", ranks, "--concurrent", str(k), "--log", str(log),
        "-o", str(rep)] + app)
    from contracts.trace import load_trace
    ev = load_trace(str(t), columns=["rank", "seq", "op", "cpu"]).events
    totals, segs = [], []
    for r in range(n):
        h = ev[ev["rank"] == r]
        p = pd.read_csv(rep / f"rank{r}.csv")
        m = h.merge(p[["seq", "op", "comp"]], on="seq", suffixes=("", "_replay"))
        if len(p) != len(h) or (m["op"] != m["op_replay"]).any():
            # a non-deterministic run (master-worker): the recorded run made
            # other calls than the traced one; compare totals only
            ht = h.loc[h["op"] != "init", "cpu"].sum()
            rt = p.loc[p["op"] != "init", "comp"].sum()
            totals.append(abs(rt - ht) / ht)
            continue
        m = m[m["op"] != "init"]               # before MPI init: the interpreter
        ht, rt = m["cpu"].sum(), m["comp"].sum()
        totals.append(abs(rt - ht) / ht)
        big = m[m["cpu"] > 1e-3]
        segs.extend((abs(big["comp"] - big["cpu"]) / big["cpu"]).tolist())
    segs = np.array(segs) if segs else np.array([np.nan])
    return max(totals), float(np.median(segs)), float(np.percentile(segs, 90)), len(segs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2,4")
    ap.add_argument("--examples", default=",".join(EXAMPLES))
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    print(f"{'example':<15}{'N':>3}{'max total err':>15}{'seg median':>12}{'seg p90':>9}"
          f"{'segments':>10}")
    for name in a.examples.split(","):
        for n in map(int, a.sizes.split(",")):
            tot, med, p90, k = measure(name, n, tmp)
            print(f"{name:<15}{n:>3}{tot:>15.2%}{med:>12.2%}{p90:>9.2%}{k:>10}", flush=True)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
