"""Run the application for real and compare with a prediction.

    python -m validate --prediction P.json --size N [--repeats 3]
        [--mpiexec PATH] -o validate.json -- (app.py | -m module | -c cmd) [args]

Runs the application untraced ``repeats`` times with ``mpiexec -n N`` on the
machine the prediction's platform describes (a dedicated run: one rank per
core, MPI's default busy-polling waits), each rank under
``python -m validate.clock``, which measures what the prediction covers: from
MPI initialisation to the end of the application (the slowest rank).  Keeps
the minimum over runs (the least disturbed run, as docs/METHODS.md recommends for repeats)
and writes ``{platform, ranks, predicted, measured, runs, wall, error}`` with
error = (predicted - measured) / measured; ``wall`` are the whole commands'
times (process start-up and tear-down included), for reference.
"""
from __future__ import annotations

import argparse
import sys

from contracts.units import seconds
from contracts.validation import write_validation

from .run import measure


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv and not {"-h", "--help"} & set(argv):
        print("validate: error: give the application after --", file=sys.stderr)
        return 2
    cut = argv.index("--") if "--" in argv else len(argv)
    ap = argparse.ArgumentParser(
        prog="python -m validate",
        usage="python -m validate --prediction P.json [--size N] [--repeats K] "
              "[--mpiexec PATH] -o V.json -- (app.py | -m module | -c cmd) [args]",
        description="Run the application for real, untraced, and compare its time "
                    "with a prediction.")
    ap.add_argument("--prediction", required=True,
                    help="the prediction JSON (python -m netsim) to compare with")
    ap.add_argument("--size", "--ranks", dest="size", type=int,
                    help="N, the ranks of the run (default: the prediction's); --ranks is "
                         "an older name of this option")
    ap.add_argument("--repeats", type=int, default=3,
                    help="real runs; the least disturbed (fastest) counts (default 3)")
    ap.add_argument("--mpiexec", help="default: the mpiexec beside this python")
    ap.add_argument("-o", "--output", required=True, help="the comparison JSON to write")
    a = ap.parse_args(argv[:cut])
    target = argv[cut + 1:]
    if not target:
        ap.error("give the application after --: app.py, -m module or -c command")
    from contracts.prediction import PredictionError, read_prediction
    try:
        pred = read_prediction(a.prediction)
    except PredictionError as e:
        print(f"validate: error: {e}", file=sys.stderr)
        return 2
    ranks = a.size or len(pred["ranks"])
    try:
        m = measure(target, ranks, a.repeats, a.mpiexec)
    except (RuntimeError, OSError) as e:
        print(f"validate: error: {e}", file=sys.stderr)
        return 2
    out = {"platform": pred["platform"]["name"], "ranks": ranks,
           "predicted": pred["predicted_time"], **m, "command": target,
           "error": (pred["predicted_time"] - m["measured"]) / m["measured"]}
    write_validation(a.output, out)
    print(f"predicted {seconds(out['predicted'])}, measured {seconds(out['measured'])}, "
          f"error {100 * out['error']:+.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
