"""Run the application for real and compare with a prediction.

    python -m netsim.validate --prediction P.json [--repeats 3] -o validate.json -- CMD...

Runs CMD (e.g. ``mpiexec -n N python app.py ...``) ``repeats`` times on the
machine the prediction's platform describes, keeps the minimum wall time
(the least disturbed run, as METHODS.md M2 recommends) and writes
``{platform, predicted, measured, runs, error}`` with error =
(predicted - measured) / measured.  Note that the measured time includes
process start-up and MPI initialisation, which the prediction (from MPI
init to finalize) does not.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        print("netsim.validate: error: give the command after --", file=sys.stderr)
        return 2
    cut = argv.index("--")
    ap = argparse.ArgumentParser(prog="python -m netsim.validate")
    ap.add_argument("--prediction", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args(argv[:cut])
    cmd = argv[cut + 1:]
    with open(a.prediction) as f:
        pred = json.load(f)
    runs = []
    for i in range(a.repeats):
        t0 = time.perf_counter()
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        t = time.perf_counter() - t0
        if p.returncode:
            print(f"netsim.validate: error: run {i + 1} of {' '.join(cmd)} exited "
                  f"{p.returncode}: {p.stderr[-2000:]}", file=sys.stderr)
            return 2
        runs.append(t)
        print(f"run {i + 1}/{a.repeats}: {t:.4f} s", flush=True)
    measured = min(runs)
    out = {"platform": pred["platform"]["name"], "predicted": pred["predicted_time"],
           "measured": measured, "runs": runs, "command": cmd,
           "error": (pred["predicted_time"] - measured) / measured}
    with open(a.output, "w") as f:
        json.dump(out, f, indent=1)
    print(f"predicted {out['predicted']:.4g} s, measured {measured:.4g} s, "
          f"error {100 * out['error']:+.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
