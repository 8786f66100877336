"""What an allreduce of Python objects costs, measured and predicted, beside
the allreduce of the same buffer.

    python bench/object_allreduce_probe.py [--ranks 2] [--calls 200] [--repeats 3]
                                           [--platform config/platforms/this-machine.yaml]

mpi4py runs ``comm.allreduce(obj)`` as its own algorithm (a binomial tree
of point-to-point messages to rank 0, then a broadcast), pickling and
unpickling at every hop and reducing in Python; ``comm.Allreduce(buf)``
is MPI's.  Per form and size (one float; 131,072 floats, 1 MiB): the
untraced loop's time per call (least of ``--repeats`` runs), and
netsim's prediction per call for a trace of the same program (the
prediction of ``--calls`` calls less that of none: the rest of the run
cancels).  Runs with more ranks than cores are oversubscribed: compare
the measured times at most at the number of cores.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
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


def predicted(tmp: Path, ranks: int, platform: str, args: list[str]) -> float:
    out = tmp / "t"
    run([MPIEXEC, "-n", str(ranks), sys.executable, "-m", "instrument", "trace", "--force",
         "-o", str(out), str(tmp / "app.py")] + args)
    run([sys.executable, "-m", "netsim", str(out), "--platform", platform,
         "-o", str(tmp / "p.json")])
    return json.loads((tmp / "p.json").read_text())["predicted_time"]


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
    print("| form | bytes | measured us per call | predicted us per call |")
    print("|---|---|---|---|")
    for n in (1, 131072):
        for form in ("objects", "buffer"):
            args = [form, str(n)]
            loop = min(float(re.search(r"LOOP ([\d.]+)", run(
                [MPIEXEC, "-n", str(a.ranks), sys.executable, str(tmp / "app.py")]
                + args + [str(a.calls)])).group(1)) for _ in range(a.repeats))
            pred = (predicted(tmp, a.ranks, a.platform, args + [str(a.calls)])
                    - predicted(tmp, a.ranks, a.platform, args + ["0"]))
            print(f"| {form} | {8 * n} | {loop / a.calls * 1e6:.1f} | "
                  f"{pred / a.calls * 1e6:.1f} |", flush=True)


if __name__ == "__main__":
    main()
