"""Run the application for real and compare with a prediction.

    python -m netsim.validate --prediction P.json --ranks N [--repeats 3]
        [--mpiexec PATH] -o validate.json -- (app.py | -m module | -c cmd) [args]

Runs the application untraced ``repeats`` times with ``mpiexec -n N`` on the
machine the prediction's platform describes (a dedicated run: one rank per
core, MPI's default busy-polling waits), each rank under
``python -m netsim.clock``, which measures what the prediction covers: from
MPI initialisation to the end of the application (the slowest rank).  Keeps
the minimum over runs (the least disturbed run, as METHODS.md M2 recommends)
and writes ``{platform, ranks, predicted, measured, runs, wall, error}`` with
error = (predicted - measured) / measured; ``wall`` are the whole commands'
times (process start-up and tear-down included), for reference.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def measure(target: list[str], ranks: int, repeats: int, mpiexec: str | None = None,
            env: dict | None = None, log=print) -> dict:
    """Run ``target`` (python arguments: app.py [args], -m mod ..., -c cmd ...)
    untraced at ``ranks`` ranks ``repeats`` times; returns
    ``{measured, runs, wall}`` (seconds; measured = min of runs)."""
    mpiexec = mpiexec or os.path.join(os.path.dirname(sys.executable), "mpiexec")
    # a dedicated run, one rank per core: MPI's default busy-polling waits,
    # not the yielding that oversubscribed tracing needs (with it the OSU and
    # FFT apps ran 2x slower here); calibrate measures the network that way too
    env = dict(os.environ if env is None else env)
    env["MPIR_CVAR_ENABLE_HEAVY_YIELD"] = "0"
    runs, wall = [], []
    for i in range(repeats):
        out = tempfile.mkdtemp(prefix="validate-")
        try:
            cmd = [mpiexec, "-n", str(ranks), sys.executable, "-m", "netsim.clock",
                   "--out", out] + list(target)
            t0 = time.perf_counter()
            p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True, env=env)
            wall.append(time.perf_counter() - t0)
            if p.returncode:
                raise RuntimeError(f"run {i + 1} of {' '.join(cmd)} exited {p.returncode}: "
                                   f"{p.stderr[-2000:]}")
            spans = []
            for r in range(ranks):
                with open(os.path.join(out, f"rank{r}.json")) as f:
                    spans.append(json.load(f)["span"])
        finally:
            shutil.rmtree(out, ignore_errors=True)
        runs.append(max(spans))
        log(f"run {i + 1}/{repeats}: {runs[-1]:.4f} s (whole command {wall[-1]:.4f} s)")
    return {"measured": min(runs), "runs": runs, "wall": wall}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        print("netsim.validate: error: give the application after --", file=sys.stderr)
        return 2
    cut = argv.index("--")
    ap = argparse.ArgumentParser(prog="python -m netsim.validate")
    ap.add_argument("--prediction", required=True)
    ap.add_argument("--ranks", type=int, help="N (default: the prediction's rank count)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--mpiexec", help="default: the mpiexec beside this python")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args(argv[:cut])
    target = argv[cut + 1:]
    if not target:
        ap.error("give the application after --: app.py, -m module or -c command")
    with open(a.prediction) as f:
        pred = json.load(f)
    ranks = a.ranks or len(pred["ranks"])
    try:
        m = measure(target, ranks, a.repeats, a.mpiexec)
    except (RuntimeError, OSError) as e:
        print(f"netsim.validate: error: {e}", file=sys.stderr)
        return 2
    out = {"platform": pred["platform"]["name"], "ranks": ranks,
           "predicted": pred["predicted_time"], **m, "command": target,
           "error": (pred["predicted_time"] - m["measured"]) / m["measured"]}
    with open(a.output, "w") as f:
        json.dump(out, f, indent=1)
    print(f"predicted {out['predicted']:.4g} s, measured {out['measured']:.4g} s, "
          f"error {100 * out['error']:+.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
