"""A class's computation over N fitted on its members as separate points
(the old way) against one point per N, the class's mean (the current
extrapolate/fit.py: total_model), on the traces bench/extrapolation.py
left in bench/out/extrapolation.

    python bench/probes/class_mean_fit_probe.py

Per application and test N: the median error of a rank's total
computation, extrapolated against the real trace's CPU seconds, and
extrapolated from the small runs' replayed computation (--compute)
against the real trace's replayed one, each way.  The members of one
trace share that run's deviation, so fitted as separate points they
outweigh the curvature's prior and bend the curve through one run's
noise (and, replayed, through one representative's).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from extrapolation import APPS, against_replayed  # noqa: E402

import extrapolate.build as build  # noqa: E402
from contracts.trace import load_trace  # noqa: E402
from extrapolate.compare import compare  # noqa: E402
from scaling.auto import Auto  # noqa: E402

WORK = ROOT / "bench" / "out" / "extrapolation"


def members_as_points(sizes, totals):
    """The old fit: every member of every small trace a row of its own."""
    df = pd.DataFrame({"procs": np.concatenate([np.full(len(t), n) for n, t in
                                                zip(sizes, totals)]).astype(float),
                       "time": np.concatenate(totals)})
    return Auto().fit(df[df["time"] > 0])


def main() -> int:
    fits = {"members": members_as_points, "class mean": build.total_model}
    out = "/tmp/class_mean_fit_probe"
    for name, (_, small, tests, *_) in APPS.items():
        d = WORK / name
        for n in tests:
            if not all((d / f"n{k}").exists() for k in small) or not (d / f"n{n}").exists():
                continue
            said = []
            for how, fit in fits.items():
                build.total_model = fit
                build.extrapolate([str(d / f"n{k}") for k in small], n, out, force=True)
                e = compare(load_trace(out), load_trace(str(d / f"n{n}")))["cpu_error_median"]
                said.append(f"{how}: trace CPU {100 * e:.1f} %")
                reps = [d / f"replayed{k}.csv" for k in small + [n]]
                if all(p.exists() for p in reps):
                    build.extrapolate([str(d / f"n{k}") for k in small], n, out, force=True,
                                      compute=[str(p) for p in reps[:-1]])
                    e = against_replayed(load_trace(out), reps[-1])
                    said[-1] += f", replayed {100 * e:.1f} %"
            print(f"{name} N={n}: " + "; ".join(said), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
