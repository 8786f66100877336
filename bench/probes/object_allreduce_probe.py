"""What an allreduce of Python objects costs, measured and predicted, beside
the allreduce of the same buffer.

    python bench/probes/object_allreduce_probe.py [--ranks 2] [--calls 200] [--repeats 3]
                                           [--platform config/platforms/this-machine.yaml]

mpi4py runs ``comm.allreduce(obj)`` as its own algorithm (a binomial tree
of point-to-point messages to rank 0, then a broadcast), pickling and
unpickling at every hop and reducing in Python; ``comm.Allreduce(buf)``
is MPI's.  Per form and size (one float; 131,072 floats, 1 MiB): the
untraced loop's time per call (least of ``--repeats`` runs), and
netsim's prediction per call (the prediction of ``--calls`` calls less
that of none: the rest of the run cancels), from the trace's own
computation spans and, as the workflow predicts, from replayed ones
(cluster, record, replay each representative, expand), where the replay
redoes mpi4py's pickling and reducing (replay/objects.py).  Runs with
more ranks than cores are oversubscribed: compare the measured times at
most at the number of cores.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
MPIEXEC = str(BIN / "mpiexec") if (BIN / "mpiexec").exists() else "mpiexec"
APP = '''
import sys, time
import numpy as np
from mpi4py import MPI
w = MPI.COMM_WORLD
form, n, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
x, y = np.ones(n), np.empty(n)
w.Barrier()
t = time.perf_counter()
for i in range(k):
    w.allreduce(x) if form == "objects" else w.Allreduce(x, y)
t = time.perf_counter() - t
if w.rank == 0:
    print(f"LOOP {t:.6f}", flush=True)
'''


def env() -> dict:
    return dict(os.environ, MPIR_CVAR_ENABLE_HEAVY_YIELD="0", OMP_NUM_THREADS="1",
                PYTHONPATH=str(ROOT))


def run(cmd: list[str]) -> str:
    p = subprocess.run(cmd, cwd=ROOT, env=env(), capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{p.stderr[-3000:]}")
    return p.stdout


def predicted(tmp: Path, ranks: int, platform: str, args: list[str]) -> tuple[float, float]:
    """The prediction from the trace's spans, and from replayed ones."""
    py, mpi = sys.executable, [MPIEXEC, "-n", str(ranks), sys.executable]
    app = [str(tmp / "app.py")] + args
    t, reps, log, rep = tmp / "t", tmp / "reps.csv", tmp / "log", tmp / "replay"
    run(mpi + ["-m", "instrument", "trace", "--force", "-o", str(t)] + app)
    run([py, "-m", "netsim", str(t), "--platform", platform, "-o", str(tmp / "p.json")])
    run([py, "-m", "cluster", str(t), "-o", str(reps)])
    run(mpi + ["-m", "instrument", "record", "--reps", str(reps), "-o", str(log), "--force"]
        + app)
    for r in sorted(set(pd.read_csv(reps)["representative"])):
        run([py, "-m", "replay", "--rank", str(r), "--size", str(ranks), "--log", str(log),
             "-o", str(rep)] + app)
    run([py, "-m", "replay.expand", str(t), str(reps), str(rep), "-o", str(tmp / "c.csv")])
    run([py, "-m", "netsim", str(t), "--platform", platform, "--compute", str(tmp / "c.csv"),
         "-o", str(tmp / "q.json")])
    shutil.rmtree(rep)
    return tuple(json.loads((tmp / f).read_text())["predicted_time"]
                 for f in ("p.json", "q.json"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--platform", default=str(ROOT / "config" / "platforms" /
                                              "this-machine.yaml"))
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="object-allreduce-"))
    (tmp / "app.py").write_text(APP)
    print("| form | bytes | measured us per call | predicted from the trace | "
          "predicted from the replay |")
    print("|---|---|---|---|---|")
    for n in (1, 131072):
        for form in ("objects", "buffer"):
            args = [form, str(n)]
            loop = min(float(re.search(r"LOOP ([\d.]+)", run(
                [MPIEXEC, "-n", str(a.ranks), sys.executable, str(tmp / "app.py")]
                + args + [str(a.calls)])).group(1)) for _ in range(a.repeats))
            full = predicted(tmp, a.ranks, a.platform, args + [str(a.calls)])
            none = predicted(tmp, a.ranks, a.platform, args + ["0"])
            per = [(f - z) / a.calls * 1e6 for f, z in zip(full, none)]
            print(f"| {form} | {8 * n} | {loop / a.calls * 1e6:.1f} | {per[0]:.1f} | "
                  f"{per[1]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
