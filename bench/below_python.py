"""Applications whose MPI is below Python: traced with --c-calls, and
predicted from their traces, against their real runs at N=2.

    python bench/below_python.py [--rounds 5] [--apps devito-acoustic,...] [--markdown]

Needs the packages of bench/apps/install.sh (devito, numba-mpi; petsc4py
with WITH_PETSC=1: an app whose package is missing is skipped).  Each
round runs the application untraced (validate.measure: MPI init to
finalize, busy-polling waits, as bench/apps/run.py does) and traced with
``instrument trace --c-calls``, alternately, so both sides sample the same
minutes.  Each trace is simulated on this machine's shipped platform
(config/platforms/this-machine.yaml) with its own computation times
(``netsim``'s default: the trace's CPU seconds): the trace-and-simulate
half of the method, which shows whether the calls below Python are all in
the trace and simulated right, apart from record and replay.  The whole
method on the same applications (recorded and replayed through the PMPI
shim's C log) is bench/apps/run.py with their recipes (devito-diffusion,
devito-acoustic, numba-halo, petsc-poisson2d).  Reported per app: events, how many were made
below Python, calls the shim could not trace (must be 0), the medians of
the predicted and measured seconds, the error with its 95 % bootstrap
interval, and whether the traced run printed what the untraced one did.
Goal: no invisible calls; |error| < 5 % mean, < 10 % max.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "apps"))

from run import env as apps_env  # noqa: E402  (bench/apps/run.py)
from run import error_interval  # noqa: E402

from contracts.raw_trace import FLAG_BELOW_PYTHON  # noqa: E402
from contracts.trace import load_trace  # noqa: E402
from validate import measure  # noqa: E402

PY = sys.executable
MPIEXEC = str(Path(PY).parent / "mpiexec")
# Devito lives in a folder of its own (bench/apps/install.sh says why)
DEVITO = {"DEVITO_MPI": "1", "DEVITO_LOGGING": "WARNING",
          "PYTHONPATH": str(ROOT / "bench" / "apps" / "src" / "devito-site")}
# name, package, what it does, python arguments, environment, a pattern of
# the output lines that must be the same traced and untraced
APPS = [
    ("devito-acoustic", "devito", "2-D acoustic wave, Devito's own seismic example; "
     "halo exchanges in generated C",
     ["-m", "examples.seismic.acoustic.acoustic_example", "-nd", "2", "-d", "300", "300",
      "--tn", "600"], DEVITO, None),
    ("devito-diffusion", "devito", "2-D diffusion, Devito's own CFD example (devito mode)",
     ["-m", "examples.cfd.example_diffusion", "-m", "devito", "-s", "0.002", "-t", "400"],
     DEVITO, None),
    ("numba-halo", "numba-mpi", "1-D heat equation, halo exchange and residual in "
     "numba-jitted code", ["bench/apps/below_python/numba_halo.py"], {}, r"total \S+"),
    ("petsc-poisson2d", "petsc4py", "CG on a 2-D Poisson problem, petsc4py's own demo; "
     "MPI initialised and used by PETSc in C",
     ["bench/apps/src/petsc4py/demo/poisson2d/poisson2d.py", "-n", "500", "-ksp_type", "cg",
      "-pc_type", "jacobi", "-ksp_rtol", "1e-10"], {}, None),
]


def env(extra: dict) -> dict:
    """The apps runner's environment (one BLAS thread per rank, the
    repository on the path), with an application's own variables."""
    base = apps_env()
    e = {**base, **extra}
    if "PYTHONPATH" in extra:                  # beside the repository's, not instead
        e["PYTHONPATH"] = extra["PYTHONPATH"] + os.pathsep + base["PYTHONPATH"]
    return e


def traced(args: list[str], extra: dict, out: Path) -> str:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [MPIEXEC, "-n", "2", PY, "-m", "instrument", "trace", "--c-calls", "-o", str(out)]
    p = subprocess.run(cmd + args, capture_output=True, text=True, cwd=ROOT, env=env(extra),
                       timeout=1800)
    if p.returncode:
        raise SystemExit(f"{' '.join(cmd + args)} failed:\n{p.stderr[-3000:]}")
    return p.stdout


def predicted(trace: Path) -> float:
    out = trace.parent / (trace.name + ".prediction.json")
    subprocess.run([PY, "-m", "netsim", str(trace), "--platform",
                    str(ROOT / "config" / "platforms" / "this-machine.yaml"), "-o", str(out)],
                   check=True, capture_output=True, cwd=ROOT, env=env({}))
    return json.loads(out.read_text())["predicted_time"]


def one_app(name, package, what, args, extra, pattern, rounds: int, work: Path) -> dict:
    print(f"{name}: {' '.join(args)}", flush=True)
    plain = subprocess.run([MPIEXEC, "-n", "2", PY] + args, capture_output=True, text=True,
                           cwd=ROOT, env=env(extra), timeout=1800).stdout
    preds, runs, same = [], [], True
    for k in range(1, rounds + 1):
        runs.append(measure(args, 2, 1, MPIEXEC, env=env(extra), log=lambda s: None,
                            timeout=1800)["measured"])
        out = traced(args, extra, work / name / f"trace{k}")
        if pattern:
            same &= sorted(re.findall(pattern, out)) == sorted(re.findall(pattern, plain))
        preds.append(predicted(work / name / f"trace{k}"))
        print(f"    round {k}: measured {runs[-1]:.4f} s, predicted {preds[-1]:.4f} s",
              flush=True)
    t = load_trace(str(work / name / f"trace{rounds}"))
    below = int(((t.events["flags"] & FLAG_BELOW_PYTHON) != 0).sum())
    p, m = statistics.median(preds), statistics.median(runs)
    lo, hi = error_interval(preds, runs)
    return {"app": name, "package": package, "what": what, "N": 2, "events": len(t.events),
            "below_python": below, "invisible": sum(t.meta.get("invisible_calls", {}).values()),
            "predicted": p, "measured": m, "error": p / m - 1, "low": lo, "high": hi,
            "same_output": "yes" if pattern and same else ("NO" if pattern else "-")}


def markdown(rows: list[dict]) -> str:
    lines = ["| app | package | what it does | N | events | below Python | invisible | "
             "predicted s | measured s | error (95 % interval) | same output |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['app']} | {r['package']} | {r['what']} | {r['N']} | {r['events']} "
                     f"| {r['below_python']} | {r['invisible']} | {r['predicted']:.3f} | "
                     f"{r['measured']:.3f} | {100 * r['error']:+.1f} % ({100 * r['low']:+.1f} to "
                     f"{100 * r['high']:+.1f}) | {r['same_output']} |")
    errs = [abs(r["error"]) for r in rows]
    if errs:
        lines.append(f"\n|error| mean {100 * statistics.mean(errs):.1f} %, max "
                     f"{100 * max(errs):.1f} %; invisible calls "
                     f"{sum(r['invisible'] for r in rows)}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--apps", help="comma-separated names (default: all)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "apps" / "results" / "below_python"))
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    chosen = set(a.apps.split(",")) if a.apps else None
    work = Path(a.out)
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for app in APPS:
        if chosen and app[0] not in chosen:
            continue
        module = app[1].replace("-", "_")
        site = app[4].get("PYTHONPATH")          # a folder of the app's own (Devito's)
        if importlib.util.find_spec(module) is None and not (site and
                                                             (Path(site) / module).is_dir()):
            print(f"{app[0]}: skipped ({app[1]} is not installed: bench/apps/install.sh)",
                  flush=True)
            continue
        rows.append(one_app(*app, a.rounds, work))
    (work / "rows.json").write_text(json.dumps(rows, indent=1))
    print(markdown(rows) if a.markdown else json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
