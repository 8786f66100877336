"""What each all-to-all of an application costs on virtual cores, call by call.

    python bench/probes/vcore_first_calls_probe.py      # root; about 5 minutes

fft2d and mpi4py-fft's Poisson solver (their N = 32 recipes of
bench/apps/virtual.yaml) traced *on* a cluster of 32 virtual cores (2 a
node, 0.05 CPU, 10 Gbit/s): per Alltoall(w) call, in order, the time from
the last rank's entry to the ranks' mean exit (one host: one clock).  A
call slower than the later ones by about a connection's opening per peer
is a transport connecting on first use, which the calibration's warm-up
(``first``) prices.

Found 2026-12-02: fft2d 2349, 2163, then 322-829 ms; fft-poisson -174
(a small first call), 1004, then -76 to 154 ms.  Each application's first
data exchange with its 31 peers pays about 0.9 s more than its later
ones; the fitted platforms of the same day charge 31 x 30 ms = 0.93 s
(fft2d's second call, also slow, is not priced).

Needs root and the cgroup v1 cpu controller (as virtual cores do).
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path[:0] = [str(ROOT), str(HERE.parent), str(HERE.parent / "apps")]
from run import PY, env  # noqa: E402
from virtual_cores import share_for, virtual_cluster  # noqa: E402

from emulate.isolate import MARK, enter, isolated  # noqa: E402

APPS = {"fft2d": ["examples/fft2d.py", "--n", "4096", "--steps", "3"],
        "fft-poisson": ["bench/apps/fft_poisson.py", "--n", "256", "--solves", "6"]}
RANKS = 32


def per_call(trace: Path) -> list[float]:
    """Seconds from the last rank's entry to the ranks' mean exit, per
    all-to-all call in order."""
    ev = pd.read_parquet(trace / "events.parquet")
    a = ev[ev["op"].isin(["alltoall", "alltoallw"])].copy()
    a["k"] = a.groupby("rank").cumcount()
    g = a.groupby("k")
    return list(g["t_end"].mean() - g["t_start"].max())


def main() -> int:
    if os.environ.get(MARK) != "1":
        return isolated([PY, str(Path(__file__).resolve())])
    enter()
    os.chdir(ROOT)
    work = Path(tempfile.mkdtemp(prefix="vcore-first-calls-"))
    with virtual_cluster("vfc", RANKS, 2, 1e10, share_for(RANKS), log=lambda s: None) as c:
        for name, app in APPS.items():
            subprocess.run([c.mpiexec, "-n", str(RANKS), PY, "-m", "instrument", "trace", "-o",
                            str(work / name), *app], env=env(), capture_output=True,
                           timeout=1800, check=True)
            ms = " ".join(f"{1e3 * t:.0f}" for t in per_call(work / name))
            print(f"{name}: ms from the last entry, per call: {ms}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
