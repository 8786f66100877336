"""Partial replay against whole replay: what it saves and what it changes.

    python bench/partial_replay.py [--apps jacobi,cg,...] [--rounds 3] [--iterations auto]
                                   [--out DIR] [--markdown] [--keep-page-reporting]

Per application, at N=2 on this machine: trace, cluster, plan the partial
replay (python -m replay.loops), record the representatives twice (whole
and cut at the plan's call), then in each round replay them from both logs
(as the workflow does: 2 copies bound to the cores, so the variability
model has its copies), the order alternating from round to round, expand
and simulate each on config/platforms/this-machine.yaml.  Reported: the
loop found, the events replayed, the log size and replay time of whole
over partial (summed over the representatives; the replay time is the
median over rounds), the predictions (median over rounds) and partial
against whole, beside the noise floor: the spread of the whole replays'
predictions from round to round ((max - min) / median).  And the method's
own error, which that noise hides: each round's whole replay cut where
its partial replay stopped (its first spans as the partial replay's,
:func:`cut_like`) and predicted, against the same whole replay (the
median over rounds of their ratio, and its range).

Goal (docs/METHODS.md, "Partial replay"): on a 1,000-iteration run, log
size and replay time cut at least 10x, the prediction within 2 % of whole
replay (or within the whole replays' own spread, where that is larger).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench" / "apps"))
from run import page_reporting_off  # noqa: E402

BIN = Path(sys.executable).parent
MPIEXEC = str(BIN / "mpiexec") if (BIN / "mpiexec").exists() else "mpiexec"
PLATFORM = ROOT / "config" / "platforms" / "this-machine.yaml"
# 1,000 iterations each, sizes chosen for a whole replay of 20-40 s, so
# that the replay's start-up (about 1.5 s: the interpreter, NumPy, MPI)
# and the set-up do not bound the time a partial replay saves
APPS = {
    "jacobi": ["examples/jacobi.py", "--n", "3072", "--iters", "1000", "--check", "10"],
    "cg": ["examples/cg.py", "--n", "8000000", "--iters", "1000"],
    "uneven": ["examples/uneven.py", "--iters", "1000", "--work", "800000", "--classes", "2"],
    # third-party: mpi4py-fft's transforms (two drivers), pylops-mpi's CGLS,
    # mpi4py's RMA counter
    "fft-poisson": ["bench/apps/fft_poisson.py", "--n", "128", "--solves", "1000"],
    "fft-navier-stokes": ["bench/apps/fft_navier_stokes.py", "--n", "64", "--steps", "1000"],
    "pylops-cgls": ["bench/apps/pylops_cgls.py", "--rows", "6000", "--cols", "4000",
                    "--iters", "1000"],
    "nxtval-rma": ["bench/apps/nxtval_loop.py", "--draws", "1000"],
}


def env() -> dict:
    e = dict(os.environ)
    for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        e[v] = "1"
    e.setdefault("MPIR_CVAR_ENABLE_HEAVY_YIELD", "1")
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    return e


def sh(cmd: list) -> float:
    """Run ``cmd``; its wall seconds.  Stops the benchmark with its error."""
    t0 = time.perf_counter()
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=ROOT,
                       env=env())
    if p.returncode:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed:\n{p.stderr[-3000:]}")
    return time.perf_counter() - t0


def predict(d: Path, replay_dir: Path) -> float:
    """Expand the replays in ``replay_dir`` and simulate: the predicted time."""
    py = sys.executable
    comp, var = replay_dir / "compute.csv", replay_dir / "variability.csv"
    sh([py, "-m", "replay.expand", d / "trace", d / "reps.csv", replay_dir, "-o", comp,
        "--variability", var])
    out = replay_dir / "prediction.json"
    sh([py, "-m", "netsim", d / "trace", "--platform", PLATFORM, "--compute", comp,
        "--variability", var, "-o", out])
    return json.loads(out.read_text())["predicted_time"]


def cut_like(whole: Path, partial: Path, out: Path) -> None:
    """``whole``'s replay cut where ``partial``'s stopped, into ``out``:
    each rank<R>.csv of a representative replayed in part (the kept replay
    and every copy's) down to the rows its partial replay wrote, the
    partial replay's stop written beside it, and the variability measured
    again over the cut copies.  Expanded, it is what partial replay
    predicts from the very spans of the whole replay: the difference is the
    method's own (the later iterations against the mean of the replayed
    ones), free of the noise between one replay and another."""
    from contracts.replayed import partial_path, read_partial_replay
    from replay.run import measure_variability
    from replay.variability import copies_in, round_dirs
    shutil.rmtree(out, ignore_errors=True)
    # each representative's stop, read (and checked) as expand reads it
    stops = {}
    for kept in partial.glob("rank*.csv"):
        stop = read_partial_replay(str(kept))
        if stop:
            stops[stop["rank"]] = (partial_path(str(kept)), stop["rows"])
    for src in whole.rglob("rank*.*"):
        own = re.fullmatch(r"rank(\d+)\.(csv|out)", src.name)
        if not own:
            continue
        dst = out / src.relative_to(whole)
        dst.parent.mkdir(parents=True, exist_ok=True)
        rank = int(own.group(1))
        if own.group(2) == "csv" and rank in stops:
            side, rows = stops[rank]
            lines = src.read_text().splitlines(keepends=True)
            dst.write_text("".join(lines[:rows + 1]))       # the header and its rows
            shutil.copyfile(side, partial_path(str(dst)))
        else:
            shutil.copyfile(src, dst)
    rounds = round_dirs(str(out))
    for v in whole.glob("variability_rank*.csv"):
        rank = int(v.stem[len("variability_rank"):])
        cores = pd.read_csv(v)["core"].tolist()        # as the whole replay's copies ran
        measure_variability([rank], str(out), rounds, copies_in(rounds[0], rank), cores)


def room_for_whole_log(d: Path) -> None:
    """Warn before recording where the whole log might not fit: at most
    the bytes the representatives receive, against the free space under
    ``d``.  Only a warning: a repeated payload is stored once, so the log
    is often far smaller (fft-poisson: 1.1 GB of 34), but it can be that
    large (fft-navier-stokes's took 16 GB, filling the disk midway)."""
    from contracts.representatives import representative_ranks
    from contracts.trace import load_trace
    events = load_trace(str(d / "trace")).events
    need = int(events.loc[events["rank"].isin(representative_ranks(str(d / "reps.csv"))),
                          "rbytes"].sum())
    free = shutil.disk_usage(d).free
    if need > free:
        print(f"partial_replay: warning: {d.name}'s whole log may take up to "
              f"{need / 1e9:.1f} GB (the bytes its representatives receive); "
              f"{free / 1e9:.1f} GB free under {d} (--out on a larger file system)",
              file=sys.stderr, flush=True)


def measure(name: str, d: Path, rounds: int, k: int) -> dict:
    app, py = APPS[name], sys.executable
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    sh([MPIEXEC, "-n", "2", py, "-m", "instrument", "trace", "-o", d / "trace", *app])
    sh([py, "-m", "cluster", d / "trace", "-o", d / "reps.csv"])
    sh([py, "-m", "replay.loops", d / "trace", d / "reps.csv", "-o", d / "partial.csv",
        "--iterations", k])
    plan = pd.read_csv(d / "partial.csv")
    room_for_whole_log(d)
    logs = {"whole": d / "log_whole", "partial": d / "log_partial"}
    sh([MPIEXEC, "-n", "2", py, "-m", "instrument", "record", "--reps", d / "reps.csv",
        "-o", logs["whole"], *app])
    sh([MPIEXEC, "-n", "2", py, "-m", "instrument", "record", "--reps", d / "reps.csv",
        "--partial", d / "partial.csv", "-o", logs["partial"], *app])
    secs: dict = {"whole": [], "partial": []}
    preds: dict = {"whole": [], "partial": [], "cut": []}
    for r in range(rounds):
        order = ("whole", "partial") if r % 2 == 0 else ("partial", "whole")
        for kind in order:
            out = d / f"replay_{kind}{r}"
            secs[kind].append(sh([py, "-m", "replay", "--reps", d / "reps.csv", "--log",
                                  logs[kind], "-o", out, "--load", "2", *app]))
            preds[kind].append(predict(d, out))
        # the whole replay of this round cut where the partial one stopped
        cut_like(d / f"replay_whole{r}", d / f"replay_partial{r}", d / f"replay_cut{r}")
        preds["cut"].append(predict(d, d / f"replay_cut{r}"))
        print(f"partial_replay: {name} round {r + 1}/{rounds}: whole "
              f"{preds['whole'][-1]:.4g} s, partial {preds['partial'][-1]:.4g} s, "
              f"whole cut as partial {preds['cut'][-1]:.4g} s", file=sys.stderr, flush=True)

    cut_ratio = pd.Series(preds["cut"]).div(preds["whole"])

    def size(kind):
        return sum(f.stat().st_size for f in logs[kind].glob("rank*.log"))

    def med(v):
        return float(pd.Series(v).median())
    part = plan[plan["cut"] >= 0]
    whole_med, part_med = med(preds["whole"]), med(preds["partial"])
    return {
        "app": name, "representatives": len(plan),
        "loop": "; ".join(f"{int(r.period)} x {int(r.iterations)}" for r in part.itertuples())
                or "-",
        "replayed": f"{int((part['cut'] + 1).sum())} of {int(part['events'].sum())}"
                    if len(part) else "whole: " + "; ".join(sorted(set(plan["reason"]))),
        "log_cut": size("whole") / size("partial"),
        "replay_cut": med(secs["whole"]) / med(secs["partial"]),
        "whole_s": whole_med, "partial_s": part_med,
        "diff_pct": 100 * (part_med / whole_med - 1),
        # paired round by round: the cut's own error, without the replays' noise;
        # its range too, as a median of rounds of opposite sign looks small
        **{f"cut_{stat}_pct": 100 * (float(getattr(cut_ratio, stat)()) - 1)
           for stat in ("median", "min", "max")},
        "floor_pct": 100 * (max(preds["whole"]) - min(preds["whole"])) / whole_med,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--apps", default=",".join(APPS), help="comma-separated, of " + ", ".join(APPS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", default="auto", help="replay.loops --iterations")
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "partial_replay"))
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    ap.add_argument("--keep-page-reporting", action="store_true",
                    help="leave the kernel's free page reporting on (by default, as root, it "
                         "is stopped for the run and restored: bench/apps/run.py)")
    a = ap.parse_args(argv)
    rows = []
    with page_reporting_off(a.keep_page_reporting):
        for n in a.apps.split(","):
            try:
                rows.append(measure(n, Path(a.out) / n, a.rounds, a.iterations))
            except SystemExit as e:     # one that does not run: said, the rest go on
                print(f"partial_replay: {n}: skipped: {str(e)[-800:]}", file=sys.stderr)
    df = pd.DataFrame(rows)
    if a.markdown:
        print("| app | loop (calls x iterations) | events replayed | log cut | replay time cut "
              "| whole (s) | partial (s) | partial vs whole | whole's spread "
              "| whole cut as partial vs whole: median (rounds) |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in df.itertuples():
            print(f"| {r.app} | {r.loop} | {r.replayed} | {r.log_cut:.1f}x | "
                  f"{r.replay_cut:.1f}x | {r.whole_s:.4g} | {r.partial_s:.4g} | "
                  f"{r.diff_pct:+.1f} % | {r.floor_pct:.1f} % | {r.cut_median_pct:+.2f} % "
                  f"({r.cut_min_pct:+.1f} to {r.cut_max_pct:+.1f}) |")
    else:
        print(df.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
