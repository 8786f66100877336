"""Do a rank's replay copies spread more than the run's own ranks, on virtual cores?

    python bench/probes/copy_spread_probe.py [--ranks 32] [--rank 3]
        [--app "examples/fft2d.py --n 4096 --steps 3"] [--out DIR]

At N = 32 (0.05 CPU) fft2d's replay copies differ up to twofold in the
CPU seconds of the same span, where the traced ranks (on the host)
spread 4-11 %; drawn for 32 ranks at each Alltoall, that spread made the
prediction 73 % high.  Holding the copies in step did not narrow it.
This probe puts the two side by side on one cluster of N virtual cores:
the application traced *on the cluster* (its N ranks, each on its
virtual core, in lockstep through their Alltoalls) and rank ``--rank``
replayed as N copies held in step on the same cores; per span, each
process's CPU seconds over the span's median: their standard deviation
and range.  Each with numpy's huge-page advice on (its default) and off
(NUMPY_MADVISE_HUGEPAGE=0): on a kernel whose transparent huge pages are
`madvise`, a large array's first touch may compact memory, charged to
the process as CPU time, a cost drawn anew at every allocation.

Needs root and the cgroup v1 cpu controller (as virtual cores do).
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path[:0] = [str(ROOT), str(HERE.parent), str(HERE.parent / "apps")]
from run import MPIEXEC, PY, page_reporting_off, sh  # noqa: E402
from virtual_cores import HOST_MPI, share_for, virtual_cluster  # noqa: E402

from emulate.isolate import MARK, enter, isolated  # noqa: E402

VARIANTS = {"huge pages advised": {}, "no huge-page advice": {"NUMPY_MADVISE_HUGEPAGE": "0"}}


def spread(cpu: np.ndarray) -> dict:
    """``cpu``: processes x spans; per span over the processes, each over
    the span's median, for the spans of at least 10 % of the longest."""
    med = np.median(cpu, axis=0)
    keep = med >= 0.1 * med.max()
    ratio = cpu[:, keep] / med[keep]
    return {"spans": int(keep.sum()), "sd %": 100 * float(np.mean(ratio.std(axis=0))),
            "min": float(ratio.min()), "max": float(ratio.max())}


def traced(d: Path, c, n: int, app: list[str], extra: dict) -> np.ndarray:
    """The run's ranks' CPU seconds per span, traced on the cluster."""
    sh([c.mpiexec, "-n", str(n), PY, "-m", "instrument", "trace", "-o", str(d / "trace"), *app],
       d / "trace.log", **extra)
    ev = pd.read_parquet(d / "trace" / "events.parquet", columns=["rank", "seq", "cpu"])
    return ev.pivot(index="rank", columns="seq", values="cpu").to_numpy()


def copies(d: Path, c, n: int, rank: int, log: Path, app: list[str], extra: dict) -> np.ndarray:
    """Rank ``rank``'s N copies' CPU seconds per span, in step on the cluster."""
    sh([PY, "-m", "replay", "--rank", str(rank), "--log", str(log), "-o", str(d / "replay"),
        "--load", str(n), "--copies", "in-step", "--bind-command", c.core, *app],
       d / "replay.log", **extra)
    paths = [d / "replay" / f"rank{rank}.csv",
             *sorted((d / "replay" / "copies").glob(f"copy*/rank{rank}.csv"))]
    return np.array([pd.read_csv(p)["cpu"].to_numpy() for p in paths])


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=32)
    ap.add_argument("--rank", type=int, default=3)
    ap.add_argument("--app", default="examples/fft2d.py --n 4096 --steps 3")
    ap.add_argument("--out", default="/tmp/copy_spread_probe")
    a = ap.parse_args(argv)
    if os.environ.get(MARK) != "1":
        return isolated([PY, str(Path(__file__).resolve())] + argv)
    enter()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    app = shlex.split(a.app)
    n = a.ranks
    # the messages rank --rank receives, recorded once on the host
    sh([MPIEXEC, "-n", str(n), PY, "-m", "instrument", "record", "--ranks", str(a.rank),
        "-o", str(out / "msglog"), *app], out / "record.log", **HOST_MPI)
    rows = []
    with page_reporting_off(False), \
            virtual_cluster("vcs", n, 2, 10e9, share_for(n), log=lambda s: None) as c:
        for variant, extra in VARIANTS.items():
            d = out / variant.replace(" ", "-")
            d.mkdir(exist_ok=True)
            for what, cpu in (("run's ranks", traced(d, c, n, app, extra)),
                              (f"rank {a.rank}'s copies",
                               copies(d, c, n, a.rank, out / "msglog", app, extra))):
                rows.append({"variant": variant, "processes": what, **spread(cpu)})
                print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    print(table.to_markdown(index=False, floatfmt=".2f"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
