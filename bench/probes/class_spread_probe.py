"""How much of an extrapolated prediction is its classes' spread?

    python bench/probes/class_spread_probe.py TRACE PLATFORM [--keep DIR]

TRACE: a trace written by ``python -m extrapolate --compute`` (one of
bench/virtual_cores.py extrapolate's OUT/X<N>/<app>/trace), PLATFORM its
fitted platform (the same folder's platform.yaml).  Each position class's
computation at N is fitted on its own over the small N, from one
replayed representative each; where the classes do the same work (an
SPMD grid code), their spread at N is the replays' noise, and the
slowest class sets every synchronisation's pace.  The probe predicts the
trace as it is and again with every rank's computation scaled to the
ranks' mean total (span shares and the classes' variability kept), with
``netsim --class-variability`` both times.

Found (2026-12-01, 16/32 -> 64 on 32 x 2 virtual cores): jacobi's nine
classes came out 3.2-4.65 s for the same work, cg's three 3.0-4.1 s;
the mean for every rank moved jacobi's prediction 6.00 -> 5.52 s and
cg's 16.6 -> 16.0 s (against 4.82 and 13.8 s measured): 8 and 4 of their
24 and 20 points of error.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from contracts.merge import table_digest  # noqa: E402


def equalised(src: Path, dst: Path) -> None:
    """A copy of trace ``src`` in ``dst`` whose ranks all compute the
    ranks' mean total, each call keeping its share of its rank's total."""
    shutil.copytree(src, dst)
    e = pd.read_parquet(src / "events.parquet")
    for col in ("comp", "cpu"):
        total = e.groupby("rank")[col].transform("sum")
        e[col] = e[col] * (e.groupby("rank")[col].sum().mean() / total)
    e.to_parquet(dst / "events.parquet", index=False)
    meta = json.loads((dst / "meta.json").read_text())
    meta["digests"]["events.parquet"] = table_digest(str(dst / "events.parquet"))
    (dst / "meta.json").write_text(json.dumps(meta))


def predicted(trace: Path, platform: Path, out: Path) -> float:
    """netsim's prediction of ``trace`` with the classes' variability."""
    subprocess.run([sys.executable, "-m", "netsim", str(trace), "--platform", str(platform),
                    "--class-variability", "-o", str(out)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    return float(json.loads(out.read_text())["predicted_time"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", type=Path)
    ap.add_argument("platform", type=Path)
    ap.add_argument("--keep", type=Path, help="keep the equalised trace here")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        eq = a.keep or Path(tmp) / "equalised"
        equalised(a.trace, eq)
        classes = json.loads((a.trace / "meta.json").read_text())["extrapolated"]["classes"]
        totals = [c["comp_total"] for c in classes]
        print(f"{len(classes)} classes: computation at N {min(totals):.3f}-{max(totals):.3f} s")
        print(f"as extrapolated: {predicted(a.trace, a.platform, Path(tmp) / 'a.json'):.3f} s")
        print(f"every rank at the mean: {predicted(eq, a.platform, Path(tmp) / 'b.json'):.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
