"""The clustering cut on a noisy host: does the default example keep its classes?

    python bench/cluster_classes.py [--sizes 8,16,32,64,128,256] [--traces DIR]

Traces examples/uneven.py (two work classes: odd ranks do twice the work)
at each N on this host (oversubscribed beyond 2 ranks: the noise grows
with N) and clusters each trace with the automatic cut and with fixed
cuts.  A trace already in ``--traces DIR/nN`` is reused.  Reported per N:
the measured noise, the automatic cut, and the clusters each cut finds;
right is 2, with the clusters exactly the classes rank % 2.
Goal: the automatic cut finds the two classes at every N.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BIN = Path(sys.executable).parent
MPIEXEC = str(BIN / "mpiexec") if (BIN / "mpiexec").exists() else "mpiexec"
APP = ["examples/uneven.py", "--iters", "8", "--work", "60000", "--classes", "2"]
FIXED = (0.05, 0.35)


def traced(n: int, d: Path) -> Path:
    out = d / f"n{n}"
    if not (out / "events.parquet").exists():
        env = dict(os.environ, MPIR_CVAR_ENABLE_HEAVY_YIELD="1", PYTHONPATH=str(ROOT))
        subprocess.run([MPIEXEC, "-n", str(n), sys.executable, "-m", "instrument", "trace",
                        "--force", "-o", str(out)] + APP, cwd=ROOT, env=env, check=True,
                       capture_output=True)
    return out


def found(reps) -> str:
    """Clusters found, and whether they are exactly the classes rank % 2."""
    k = reps["cluster"].nunique()
    exact = k == 2 and all(len(c) == 1 for c in
                           reps.groupby(reps["rank"] % 2)["cluster"].agg(set))
    return f"{k}{' (the classes)' if exact else ''}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8,16,32,64,128,256")
    ap.add_argument("--traces", help="keep (and reuse) the traces here")
    a = ap.parse_args(argv)
    from cluster.select import auto_threshold, select
    from cluster.vectors import read_rank_vectors
    d = Path(a.traces) if a.traces else Path(tempfile.mkdtemp(prefix="classes-"))
    print("| N | noise | auto cut | clusters (auto) | "
          + " | ".join(f"clusters ({c})" for c in FIXED) + " |")
    print("|---|---|---|---|" + "---|" * len(FIXED))
    for n in (int(x) for x in a.sizes.split(",")):
        rv = read_rank_vectors(str(traced(n, d)))
        auto = select(rv.table, rv.vectors, threshold="auto", noise=rv.noise)
        fixed = [found(select(rv.table, rv.vectors, threshold=c)) for c in FIXED]
        print(f"| {n} | {rv.noise:.3f} | {auto['cut'].max():.3f} (floor "
              f"{auto_threshold(rv.noise):.3f}) | {found(auto)} | " + " | ".join(fixed) + " |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
