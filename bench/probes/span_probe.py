"""The traced run's computation against the untraced run's, span by span.

    python bench/probes/span_probe.py [--rounds 5] [--min-span 1.0] [--apps jacobi,...]
    python bench/probes/span_probe.py --recipes bench/apps/recipes.yaml [--apps heat-kmeans,...]
                               [--pin-malloc]

An untraced run has no spans to compare, so it carries a probe below
Python: a PMPI shim (bench/probes/span_probe.c; wrappers generated from the MPI
library's header like pmpishim/build.py's, for the calls the tracer
records) loaded through mpi4py's profiling hook, which notes which
function each call was and when it began and ended, by the wall clock
and the process's CPU clock, in a static table: no allocation, 4 clock
reads per call.  The application runs as the tools run it
(launch.run_app, MPI initialised at its own import).  Each round runs
it untraced (with the probe), traced, and untraced again, 2 ranks each
(the examples of bench/tracer_overhead.py, or the recipes' applications
at 2 ranks).  The traced events and the probed calls are aligned by name
(:func:`aligned_spans`); the span before each shared call is compared:
traced, the event's ``comp`` and ``cpu``; untraced, the gap since the C
call before it.  Spans matched in every round and lasting ``--min-span``
ms untraced (median over the rounds) count.  Reported per application:
spans compared, the median and 90th percentile of |traced / untraced -
1| over spans, by wall clock and by CPU time (which a rank descheduled
by a busy neighbour does not accrue; page faults count in both), the
same median for the second untraced run against the first (the noise
floor: where it is above 3 %, this machine cannot resolve 3 % on that
application), and the ratio of the wall sums.  The alignment walks the
calls whose names both runs make about as often, resynchronising where
the two runs part (linear where they differ only here and there); a run
of polls the tracer folded pairs its first call only.
``--pin-malloc`` pins glibc's heap in every run, for an application
whose own page faults vary from run to run (heat-kmeans).
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

ROOT = Path(__file__).resolve().parents[2]
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

    from pmpishim import build as shim_build
    lib = OUT / f"lib{LIB}.so"
    here = ROOT / "bench" / "probes"
    if lib.exists() and lib.stat().st_mtime > (here / "span_probe.c").stat().st_mtime:
        return OUT
    mpicc = shim_build._mpicc()
    made = shim_build.wrappers(
        mpicc, lambda name: shim_build.COUNTED.match(name) or re.match(MANAGED, name),
        lambda i, name, call: (f"    rr_enter();\n    int r = {call};\n    rr_leave({i});\n"
                               "    return r;\n"))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "names.txt").write_text("".join(name + "\n" for name, _ in made))
    src = OUT / "probe.c"
    src.write_text('#include "span_probe.c"\n\n' + "\n".join(c for _, c in made))
    tmp = shim_build._compile(mpicc, str(lib), ["-I", str(here), str(src)], "the probe")
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


def env(pin_malloc: bool = False) -> dict:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from launch import PINNED_MALLOC
    return dict(os.environ, MPIR_CVAR_ENABLE_HEAVY_YIELD="0", OMP_NUM_THREADS="1",
                OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1", MPLBACKEND="Agg",
                PYTHONPATH=str(ROOT), **(PINNED_MALLOC if pin_malloc else {}))


def recipes(path: str) -> dict:
    """name -> application arguments of bench/apps' recipes at 2 ranks."""
    sys.path.insert(0, str(ROOT / "bench" / "apps"))
    from run import app_args, load_recipes
    return {name: app_args(r) for name, r in load_recipes(path).items() if r["ranks"] == 2}


def run(cmd: list[str], pin_malloc: bool = False) -> None:
    import subprocess
    p = subprocess.run(cmd, cwd=ROOT, env=env(pin_malloc), capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{p.stderr[-3000:]}")


def untraced_calls(d: Path, rank: int) -> tuple[list[str], np.ndarray]:
    """The probed run's calls: lower-case names (MPI_Isend: "isend") and
    rows of (begin, end, CPU at begin, CPU at end)."""
    import numpy as np
    names = (OUT / "names.txt").read_text().split()
    calls = np.fromfile(d / f"rank{rank}.bin", dtype=np.float64).reshape(-1, 5)
    # MPI-4's large-count variants (MPI_Send_c) are the same call to the tracer
    return ([names[int(i)].lower().removesuffix("_c") for i in calls[:, 4]],
            calls[:, :4])


def traced_events(d: Path, rank: int):
    """The traced run's events of ``rank`` in order: op names and rows of
    (comp, cpu)."""
    import pandas as pd

    from contracts.raw_trace import FLAG_OBJECT
    ev = pd.read_parquet(d / "events.parquet",
                         columns=["rank", "seq", "op", "flags", "comp", "cpu"])
    ev = ev[ev["rank"] == rank].sort_values("seq")
    # mpi4py reduces objects with point-to-point calls and broadcasts of its
    # own, no C call of the name: renamed, such a call anchors nothing (its
    # other collectives of objects start with the C call of their name:
    # allgather with an MPI_Allgather of the sizes, then MPI_Allgatherv)
    obj = ((ev["flags"] & FLAG_OBJECT) != 0) & (
        ev["op"].isin(["allreduce", "reduce", "scan", "exscan"])
        | ev["op"].str.startswith("neighbor_"))
    return ev["op"].where(~obj, ev["op"] + " of objects").tolist(), ev[["comp", "cpu"]].to_numpy()


def aligned_spans(traced, untraced) -> dict:
    """Trace event index -> (traced (wall, CPU), untraced (wall, CPU)) of
    the span before it, for every call the two runs share.  The call
    sequences are aligned (:func:`_matched`) by the names both call about
    as often, polls as runs: a Python call may make C calls of other
    names (mpi4py's allreduce of Python objects: receives and
    broadcasts), and those are left out as anchors; the untraced span is
    the gap between the shared call and whatever C call ended before it."""
    from collections import Counter

    from mpimodel.kinds import POLLS
    (t_ops, t_rows), (u_ops, u_rows) = traced, untraced
    # a name both runs call about as often (polls aside: the tracer folds
    # those that find nothing); one called far more often below Python is
    # not the same call (the broadcasts inside mpi4py's allreduce of objects)
    t_n, u_n = Counter(t_ops), Counter(u_ops)
    shared = {n for n in t_n.keys() & u_n.keys()
              if n in POLLS or 0.8 <= t_n[n] / u_n[n] <= 1.25}
    t_runs, u_runs = _runs(t_ops, shared, POLLS), _runs(u_ops, shared, POLLS)
    out = {}
    for i, j in _matched([r[0] for r in t_runs], [r[0] for r in u_runs]):
        (_, t_at), (_, u_at) = t_runs[i], u_runs[j]
        # a run of polls pairs call by call where both runs made as many;
        # else (polls the tracer folded) only its first
        for t, u in zip(t_at, u_at) if len(t_at) == len(u_at) else [(t_at[0], u_at[0])]:
            if u == 0:
                continue
            gap = (u_rows[u, 0] - u_rows[u - 1, 1], u_rows[u, 2] - u_rows[u - 1, 3])
            out[t] = (tuple(t_rows[t]), gap)
    return out


def _matched(a: list, b: list, k: int = 8):
    """Pairs (i, j) of equal names of ``a`` and ``b``, in order: walk both
    while they agree; where they part, go on at the nearest place (least
    skipped on both sides together) where the next ``k`` names agree, and
    align what was skipped in full where it is short.  Linear in the
    length where the runs differ only here and there, as a traced and an
    untraced run of one program do; a general alignment (difflib's) is
    quadratic on sequences that alternate a few names, as an RMA loop's
    lock, get_accumulate, unlock does 76,000 times."""
    import difflib
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i] != b[j]:
            step = _resync(a, b, i, j, k)
            gap = (len(a), len(b)) if step is None else step
            # what lies between, if short, aligned in full
            if (gap[0] - i) * (gap[1] - j) <= 1 << 20:
                for bi, bj, n in difflib.SequenceMatcher(
                        None, a[i:gap[0]], b[j:gap[1]], autojunk=False).get_matching_blocks():
                    yield from ((i + bi + m, j + bj + m) for m in range(n))
            if step is None:
                return
            i, j = step
        yield i, j
        i, j = i + 1, j + 1


def _resync(a: list, b: list, i: int, j: int, k: int):
    """The nearest (i', j') at or after (i, j) where ``k`` names agree (fewer
    at the end), searching windows that grow fourfold; None if none."""
    w = 64
    while True:
        n = min(k, len(a) - i, len(b) - j)
        first = {}                  # k names of b -> their first offset
        for dj in range(min(w, len(b) - j - n + 1)):
            first.setdefault(tuple(b[j + dj:j + dj + n]), dj)
        best = None
        for di in range(min(w, len(a) - i - n + 1)):
            if best is not None and di >= best[0] + best[1]:
                break
            dj = first.get(tuple(a[i + di:i + di + n]))
            if dj is not None and (best is None or di + dj < best[0] + best[1]):
                best = (di, dj)
        if best is not None:
            return i + best[0], j + best[1]
        if w >= len(a) - i and w >= len(b) - j:
            return None
        w *= 4


def _runs(ops: list, shared: set, polls) -> list:
    """The calls of names in ``shared``, each alone or, for ``polls``, as
    runs of one name: (name, their indices in ``ops``).  The other names
    (the traced ``recv`` of an object, the probe's ``mprobe`` and ``mrecv``
    that make it) anchor nothing; a polling loop's polls are one run on
    either side, however many the tracer folded."""
    runs = []
    for i, op in enumerate(ops):
        if op not in shared:
            continue
        if runs and runs[-1][0] == op and op in polls:
            runs[-1][1].append(i)
        else:
            runs.append((op, [i]))
    return runs


def compare(name: str, app: list[str], rounds: int, min_span: float, tmp: Path,
            pin_malloc: bool = False) -> str:
    """One row of the table: the traced run's spans against the untraced
    run's, and a second untraced run's against the first (the noise
    floor).  Spans are matched by :func:`aligned_spans`; a span counts if
    it was matched in every round and lasts ``min_span`` untraced (median
    over the rounds)."""
    import numpy as np
    pairs = {0: [], 1: []}                      # rank -> per round: {event: (traced, u, u2)}
    probe = [MPIEXEC, "-n", "2", sys.executable, __file__, "--probe", str(tmp / "u"), "--"]
    for _ in range(rounds):
        run(probe + app, pin_malloc)
        first = {r: untraced_calls(tmp / "u", r) for r in (0, 1)}
        run([MPIEXEC, "-n", "2", sys.executable, "-m", "instrument", "trace", "--force", "-o",
             str(tmp / "t")] + app, pin_malloc)
        traced = {r: traced_events(tmp / "t", r) for r in (0, 1)}
        run(probe + app, pin_malloc)
        again = {r: untraced_calls(tmp / "u", r) for r in (0, 1)}
        for r in (0, 1):
            a, b = aligned_spans(traced[r], first[r]), aligned_spans(traced[r], again[r])
            pairs[r].append({k: a[k] + (b[k][1],) for k in a.keys() & b.keys()})
    dev, floor, sums, shared = [], [], [0.0, 0.0], 0
    for per_round in pairs.values():
        keys = sorted(set.intersection(*(set(p) for p in per_round)))
        shared += len(keys)
        if not keys:
            continue
        # per event: traced wall, CPU; untraced wall, CPU; again wall, CPU
        m = np.median([[sum(p[k], ()) for k in keys] for p in per_round], axis=0)
        m = m[m[:, 2] >= min_span]
        dev.append(np.abs(m[:, 0:2] / m[:, 2:4] - 1) * 100)
        floor.append(np.abs(m[:, 4:6] / m[:, 2:4] - 1) * 100)
        sums[0] += m[:, 0].sum()
        sums[1] += m[:, 2].sum()
    dev, floor = (np.concatenate(x) if x else np.empty((0, 2)) for x in (dev, floor))
    if not len(dev):
        return f"| {name} | 0 | - | - | - | - | - | - | {shared} |"
    return (f"| {name} | {len(dev)} | {np.median(dev[:, 0]):.1f} % | "
            f"{np.percentile(dev[:, 0], 90):.1f} % | {np.median(dev[:, 1]):.1f} % | "
            f"{np.median(floor[:, 0]):.1f} % | {np.median(floor[:, 1]):.1f} % | "
            f"{sums[0] / sums[1]:.3f} | {shared} |")


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
    ap.add_argument("--recipes", help="take the applications from this bench/apps recipes file "
                                       "(those at 2 ranks) instead of the examples")
    ap.add_argument("--apps", help="comma-separated names (default: all)")
    ap.add_argument("--pin-malloc", action="store_true",
                    help="pin glibc's heap in every run (temporaries from the heap, never "
                         "trimmed): the application's own page faults then vary no more "
                         "from run to run")
    a = ap.parse_args()
    apps = recipes(a.recipes) if a.recipes else EXAMPLES
    unknown = [n for n in a.apps.split(",") if n not in apps] if a.apps else []
    if unknown:
        ap.error(f"not {'a 2-rank application of ' + a.recipes if a.recipes else 'an example'}: "
                 f"{', '.join(unknown)} (there are: {', '.join(apps)})")
    build()
    tmp = Path(tempfile.mkdtemp(prefix="span-probe-"))
    (tmp / "u").mkdir()
    rows = []
    try:
        for name in a.apps.split(",") if a.apps else apps:
            rows.append(compare(name, apps[name], a.rounds, a.min_span / 1e3, tmp,
                                a.pin_malloc))
            print(rows[-1], flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n| example | spans >= {a.min_span:g} ms | traced/untraced - 1, wall: median | "
          f"90th percentile | CPU: median | untraced again/untraced - 1, wall: median | "
          f"CPU: median | sum traced / untraced (wall) | spans matched in every round |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
