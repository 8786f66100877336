"""The replay bundle's round trip on the examples and the corpus: every
application that replays here also replays from its bundle, in a fresh
directory with a fresh venv and a bare environment.

    python bench/bundle_roundtrip.py [--apps jacobi,cg,...] [--out DIR] [--markdown]

Per application, at N=2: trace, cluster, record the representatives,
replay them here (as the workflow does by default: 2 copies bound to the
cores), pack the log with its wheels, unpack the bundle into an empty
directory and run its run.sh there under `env -i` (its own venv, installed
offline from the carried wheels), unpack the results, then expand and
simulate both replays on config/platforms/this-machine.yaml.  Reported:
the bundle's size and requirements, the time run.sh took (venv and
install included), whether the bundle's replay made the same calls, its
CPU seconds and prediction over the mean of two local replays, one before
and one after it (the same node: both within the replay's noise, which
the local replays' spread shows).

Goal: every application that replays locally replays from its bundle.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tarfile
import time
from pathlib import Path

import pandas as pd
from partial_replay import MPIEXEC, ROOT, predict, sh

# sizes with a second or more of computation per representative, well
# above the replay's per-call cost
APPS = {
    "jacobi": ["examples/jacobi.py", "--n", "1024", "--iters", "300"],
    "cg": ["examples/cg.py", "--n", "400000", "--iters", "200"],
    "fft2d": ["examples/fft2d.py", "--n", "1024", "--steps", "20"],
    "master_worker": ["examples/master_worker.py", "--tasks", "40", "--size", "300"],
    "parareal": ["examples/parareal.py"],
    "uneven": ["examples/uneven.py", "--iters", "8", "--work", "1000000", "--classes", "2"],
    "rma_halo": ["examples/rma_halo.py", "--n", "200000", "--iters", "100"],   # 0.3 GB of log
    # third-party: mpi4py-fft, mpipool (dill, threads), pySDC, mpi4py's RMA demo
    "fft-poisson": ["bench/apps/fft_poisson.py", "--n", "48", "--solves", "40"],
    "mpipool-tasks": ["bench/apps/mpipool_tasks.py", "--tasks", "60"],
    "pysdc-parallel-nodes": ["bench/apps/pysdc_playground.py"],
    "nxtval-rma": ["bench/apps/nxtval_loop.py", "--draws", "2000"],
}


def bare(cmd: list, cwd: Path) -> float:
    """Run ``cmd`` under `env -i` (what a fresh login has); its seconds."""
    import subprocess
    t0 = time.perf_counter()
    # one BLAS thread, as the local replay has (partial_replay.env), and the
    # host's interpreter: another build of Python runs the application at
    # another speed (Debian's python3 ran these replays 5-11 % faster than
    # this venv's), which a porting study measures, not this benchmark
    p = subprocess.run(["env", "-i", "PATH=/usr/local/bin:/usr/bin:/bin", f"HOME={cwd}",
                        f"PYTHON={getattr(sys, '_base_executable', sys.executable)}",
                        "LANG=C.UTF-8", "OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1",
                        "MKL_NUM_THREADS=1", *map(str, cmd)], cwd=cwd, capture_output=True,
                       text=True)
    if p.returncode:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed:\n{p.stderr[-3000:]}")
    return time.perf_counter() - t0


def measure(name: str, d: Path) -> dict:
    app, py = APPS[name], sys.executable
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    sh([MPIEXEC, "-n", "2", py, "-m", "instrument", "trace", "-o", d / "trace", *app])
    sh([py, "-m", "cluster", d / "trace", "-o", d / "reps.csv"])
    sh([MPIEXEC, "-n", "2", py, "-m", "instrument", "record", "--reps", d / "reps.csv",
        "-o", d / "msglog", *app])
    local = [d / "local1", d / "local2"]
    sh([py, "-m", "replay", "--reps", d / "reps.csv", "--log", d / "msglog", "-o",
        local[0], "--load", "2", *app])
    sh([py, "-m", "replay", "pack", "--log", d / "msglog", "-o", d / "bundle.tar.gz",
        "--load", "2", "--wheels"])
    target = d / "target"
    target.mkdir()
    with tarfile.open(d / "bundle.tar.gz") as t:
        t.extractall(target, filter="data")
    secs = bare(["bash", "bundle/run.sh"], target)
    sh([py, "-m", "replay", "unpack", target / "results.tar.gz", "--bundle",
        d / "bundle.tar.gz", "-o", d / "from_bundle"])
    # local replays before and after the bundle's: their spread is the noise
    sh([py, "-m", "replay", "--reps", d / "reps.csv", "--log", d / "msglog", "-o",
        local[1], "--load", "2", *app])
    from contracts.replayed import read_replayed
    same, cpu = True, [0.0, 0.0, 0.0]
    ranks = pd.read_csv(d / "reps.csv")
    ranks = sorted(set(ranks.loc[ranks["rank"] == ranks["representative"], "rank"]))
    for r in ranks:
        a = read_replayed(str(d / "from_bundle" / f"rank{r}.csv"))
        b, c = (read_replayed(str(x / f"rank{r}.csv")) for x in local)
        same &= list(a["op"]) == list(b["op"]) == list(c["op"])
        cpu[0] += a["cpu"].sum()
        cpu[1] += b["cpu"].sum()
        cpu[2] += c["cpu"].sum()
    man = json.loads((target / "bundle" / "manifest.json").read_text())
    return {"app": name, "representatives": len(ranks),
            "bundle_MB": (d / "bundle.tar.gz").stat().st_size / 1e6,
            "requirements": len(man["requirements"]), "run_sh_s": secs,
            "same_calls": same, "cpu_ratio": 2 * cpu[0] / (cpu[1] + cpu[2]),
            "cpu_local_spread": abs(cpu[2] / cpu[1] - 1),
            "prediction_ratio": 2 * predict(d, d / "from_bundle")
            / (predict(d, local[0]) + predict(d, local[1]))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--apps", default=",".join(APPS), help="comma-separated, of " + ", ".join(APPS))
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "bundle_roundtrip"))
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    a = ap.parse_args(argv)
    rows = []
    for n in a.apps.split(","):
        try:
            rows.append(measure(n, Path(a.out) / n))
        except SystemExit as e:
            print(f"bundle_roundtrip: {n}: {str(e)[:2000]}", file=sys.stderr, flush=True)
            rows.append({"app": n, "same_calls": "FAILED"})
            continue
        print(f"bundle_roundtrip: {n}: {rows[-1]}", file=sys.stderr, flush=True)
    df = pd.DataFrame(rows)
    print(df.to_markdown(index=False, floatfmt=".3g") if a.markdown else df.to_string())
    return 0 if all(r.get("same_calls") is True for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
