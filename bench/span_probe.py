"""The traced run's computation against the untraced run's, span by span.

    python bench/span_probe.py [--rounds 5] [--min-span 1.0] [--gap 0.1] [--apps jacobi,...]
    python bench/span_probe.py --recipes bench/apps/recipes.yaml [--apps heat-kmeans,...]

An untraced run has no spans to compare, so it carries a probe below
Python: a PMPI shim (bench/span_probe.c; wrappers generated from the MPI
library's header like instrument/ccount.py's, for the calls the tracer
records) loaded through mpi4py's profiling hook, which notes when each
call began and ended, by the wall clock and the process's CPU clock, in
a static table: no allocation, 4 clock reads per call.  The application
runs as the tools run it (launch.run_app, MPI initialised at its own
import).  A computation span is the time between two calls: in the
traced run, an event's ``comp`` and ``cpu``.  Untraced (with the probe) and traced
runs alternate, ``--rounds`` times, 2 ranks each (the examples of
bench/tracer_overhead.py).  Per rank, the spans of at least
``--min-span`` ms untraced, in call order, are matched one to one
(a span: a gap of at least ``--gap`` ms between calls, as a Python call
may make several C calls close together; a rank's round whose count of spans
differs is set aside and counted);
each span's median over the rounds, traced against untraced.  Reported
per example: spans compared, the median and 90th percentile of
|traced / untraced - 1| over spans, by wall clock and by CPU time (which
a rank descheduled by a busy neighbour does not accrue; page faults
count in both), and the ratio of their wall sums.  The noise floor
beside it: a second untraced run in every round, alternated with the
others, against the first, the same way.  Where that floor is above
3 %, this machine cannot resolve 3 % on that example.
Goal: the traced computation within 3 % of the untraced, span by span.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
# the rest is imported where used: the probed run (probe_main) must start
# the application as a plain run does, with nothing else in its heap

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
MPIEXEC = str(BIN / "mpiexec") if (BIN / "mpiexec").exists() else "mpiexec"
OUT = ROOT / "bench" / "out" / "span_probe"
LIB = "span_probe"
EXAMPLES = {
    "jacobi": ["examples/jacobi.py", "--n", "1024", "--iters", "100"],
    "cg": ["examples/cg.py", "--n", "400000", "--iters", "150"],
    "master_worker": ["examples/master_worker.py", "--tasks", "60", "--size", "250"],
    "uneven": ["examples/uneven.py", "--iters", "20", "--work", "100000"],
}
# what the tracer records beside communication: communicator, topology and
# window management (a probe call must stand where a traced event does)
MANAGED = (r"^(Comm_(dup|idup|split|split_type|create|create_group|free|spawn|"
           r"accept|connect)\w*|Cart_(create|sub)|Graph_create|Dist_graph_create\w*|"
           r"Intercomm_\w+|Win_(create|allocate|free)\w*)(_c)?$")


def build() -> Path:
    """Generate and compile the probe for this MPI library (once)."""
    import re

    from instrument import ccount
    lib = OUT / f"lib{LIB}.so"
    if lib.exists() and lib.stat().st_mtime > (ROOT / "bench" / "span_probe.c").stat().st_mtime:
        return OUT
    mpicc = ccount._mpicc()
    made = ccount.wrappers(
        mpicc, lambda name: ccount.COUNTED.match(name) or re.match(MANAGED, name),
        lambda i, call: f"    rr_enter();\n    int r = {call};\n    rr_leave();\n    return r;\n")
    OUT.mkdir(parents=True, exist_ok=True)
    src = OUT / "probe.c"
    src.write_text('#include "span_probe.c"\n\n' + "\n".join(c for _, c in made))
    tmp = ccount._compile(mpicc, str(lib), ["-I", str(ROOT / "bench"), str(src)], "the probe")
    os.replace(tmp, lib)
    return OUT


def _load_probe() -> None:
    import mpi4py
    mpi4py.profile(LIB, path=[str(OUT)])


def probe_main(out: str, app: list[str]) -> None:
    """In each rank: load the probe before MPI (away from the application's
    heap), run the application as the tools do (launch.run_app: MPI
    initialised at its own import), write this rank's calls to
    ``out``/rank<r>.bin."""
    sys.path.insert(0, str(ROOT))
    from launch import in_own_arena, run_app, split_command
    in_own_arena(_load_probe)
    _, mode, target = split_command(app)
    status, code = run_app(target, mode)
    if code:
        raise SystemExit(f"span probe: {app[0]} {status}")
    import ctypes

    from mpi4py import MPI
    lib = ctypes.CDLL(str(OUT / f"lib{LIB}.so"), mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
    lib.span_probe_dump.restype = ctypes.c_long
    path = os.path.join(out, f"rank{MPI.COMM_WORLD.Get_rank()}.bin")
    lost = lib.span_probe_dump(path.encode())
    if lost:
        raise SystemExit(f"span probe: {path}: {lost} calls not kept" if lost > 0 else
                         f"span probe: cannot write {path}")


def env() -> dict:
    return dict(os.environ, MPIR_CVAR_ENABLE_HEAVY_YIELD="0", OMP_NUM_THREADS="1",
                OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1", MPLBACKEND="Agg",
                PYTHONPATH=str(ROOT))


def recipes(path: str) -> dict:
    """name -> application arguments of bench/apps' recipes at 2 ranks."""
    sys.path.insert(0, str(ROOT / "bench" / "apps"))
    from run import app_args, load_recipes
    return {name: app_args(r) for name, r in load_recipes(path).items() if r["ranks"] == 2}


def run(cmd: list[str]) -> None:
    import subprocess
    p = subprocess.run(cmd, cwd=ROOT, env=env(), capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{p.stderr[-3000:]}")


def untraced_spans(d: Path, rank: int) -> np.ndarray:
    """(wall, CPU) seconds of each span between two calls, one row each."""
    import numpy as np
    calls = np.fromfile(d / f"rank{rank}.bin", dtype=np.float64).reshape(-1, 4)
    return np.column_stack([calls[1:, 0] - calls[:-1, 1], calls[1:, 2] - calls[:-1, 3]])


def traced_spans(d: Path, rank: int) -> np.ndarray:
    """(comp, cpu) of each traced event after the first call."""
    import pandas as pd
    ev = pd.read_parquet(d / "events.parquet", columns=["rank", "seq", "op", "comp", "cpu"])
    ev = ev[(ev["rank"] == rank) & (ev["op"] != "finalize")].sort_values("seq")
    return ev[["comp", "cpu"]].to_numpy()[2:]  # after init, and the span before the first call


def _deviation(a: np.ndarray, b: np.ndarray, min_span: float) -> np.ndarray:
    """|a / b - 1| (wall, CPU columns) of the spans that last ``min_span`` untraced."""
    import numpy as np
    keep = b[:, 0] >= min_span
    return np.abs(a[keep] / b[keep] - 1) * 100


def compare(name: str, app: list[str], rounds: int, min_span: float, gap: float,
            tmp: Path) -> str:
    """One row of the table: the traced run's spans against the untraced
    run's, and a second untraced run's against the first (the noise floor)."""
    import numpy as np
    runs = {k: {0: [], 1: []} for k in ("untraced", "traced", "again")}  # rank -> rounds
    expected, dropped = {}, 0                   # rank -> its count of spans
    probe = [MPIEXEC, "-n", "2", sys.executable, __file__, "--probe", str(tmp / "u"), "--"]
    for _ in range(rounds):
        got = {}
        for kind in ("untraced", "traced", "again"):
            if kind == "traced":
                run([MPIEXEC, "-n", "2", sys.executable, "-m", "instrument", "trace", "--force",
                     "-o", str(tmp / "t")] + app)
                got[kind] = {r: traced_spans(tmp / "t", r) for r in (0, 1)}
            else:
                run(probe + app)
                got[kind] = {r: untraced_spans(tmp / "u", r) for r in (0, 1)}
        for kind, spans in got.items():
            # one Python call may make several C calls (a pickled sendrecv:
            # send, probe, receive), close together: spans are the gaps of
            # at least ``gap`` seconds
            got[kind] = {r: s[s[:, 0] >= gap] for r, s in spans.items()}
        for r in (0, 1):
            counts = {len(got[k][r]) for k in runs} | ({expected[r]} if r in expected else set())
            if len(counts) != 1:                # spans that cannot be matched one to one
                dropped += 1
                continue
            expected[r] = counts.pop()
            for k in runs:
                runs[k][r].append(got[k][r])
    dev, floor, sums = [], [], [0.0, 0.0]
    for r in (0, 1):
        if not runs["untraced"][r]:
            continue
        t, u, u2 = (np.median(runs[k][r], axis=0) for k in ("traced", "untraced", "again"))
        dev.append(_deviation(t, u, min_span))
        floor.append(_deviation(u2, u, min_span))
        keep = u[:, 0] >= min_span
        sums[0] += t[keep, 0].sum()
        sums[1] += u[keep, 0].sum()
    dev, floor = (np.concatenate(x) if x else np.empty((0, 2)) for x in (dev, floor))
    if not len(dev):                            # nothing matched, or no span that long
        return f"| {name} | 0 | - | - | - | - | - | - | {dropped} |"
    return (f"| {name} | {len(dev)} | {np.median(dev[:, 0]):.1f} % | "
            f"{np.percentile(dev[:, 0], 90):.1f} % | {np.median(dev[:, 1]):.1f} % | "
            f"{np.median(floor[:, 0]):.1f} % | {np.median(floor[:, 1]):.1f} % | "
            f"{sums[0] / sums[1]:.3f} | {dropped} |")


def main():
    if "--probe" in sys.argv:
        i = sys.argv.index("--probe")
        return probe_main(sys.argv[i + 1], sys.argv[sys.argv.index("--") + 1:])
    import argparse
    import shutil
    import tempfile
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--min-span", type=float, default=1.0, help="milliseconds")
    ap.add_argument("--gap", type=float, default=0.1,
                    help="milliseconds: shorter gaps between calls are no span")
    ap.add_argument("--recipes", help="take the applications from this bench/apps recipes file "
                                       "(those at 2 ranks) instead of the examples")
    ap.add_argument("--apps", help="comma-separated names (default: all)")
    a = ap.parse_args()
    apps = recipes(a.recipes) if a.recipes else EXAMPLES
    build()
    tmp = Path(tempfile.mkdtemp(prefix="span-probe-"))
    (tmp / "u").mkdir()
    rows = []
    try:
        for name in a.apps.split(",") if a.apps else apps:
            rows.append(compare(name, apps[name], a.rounds, a.min_span / 1e3, a.gap / 1e3,
                                tmp))
            print(rows[-1], flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n| example | spans >= {a.min_span:g} ms | traced/untraced - 1, wall: median | "
          f"90th percentile | CPU: median | untraced again/untraced - 1, wall: median | "
          f"CPU: median | sum traced / untraced (wall) | rank-rounds set aside |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
