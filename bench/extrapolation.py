"""Trace extrapolation against real traces at the larger N, and at scale.

    python bench/extrapolation.py [--apps jacobi,cg,...] [--test 64,128] [--scale 100000]
    python bench/extrapolation.py --markdown bench/out/extrapolation.json

For each SPMD application: real traces at the small N (``train``) and at
the test N, all on this machine (more ranks than cores is fine: the
trace keeps CPU time); ``python -m extrapolate`` from the small traces to
each test N; then, extrapolated against real (extrapolate/compare.py):

* calls: every rank's calls identical (op, communicator, peer, tag,
  bytes, requests), or the first difference;
* cpu: median and largest error of a rank's total CPU seconds, beside the
  real trace's own spread between ranks of one position class;
* prediction: netsim's predicted time from the extrapolated trace
  against the one from the real trace, on each shipped platform that
  holds N ranks (the trace's CPU times as the computation), plain and
  with the classes' variability sampled (``--class-variability``);
* replayed: the same against the method's own computation at N (the real
  trace's representatives recorded and replayed alone, 3 rounds, then
  expanded), from an extrapolation of the small runs' replayed
  computation (``python -m extrapolate --compute``): both sides measured
  on a dedicated core, where the traces' CPU seconds were measured with
  up to N ranks sharing the host's 2 cores; and against the method at N
  with every rank at its position class's mean replayed time, span by
  span (the rank-to-rank noise of single replays, which the slowest rank
  of every synchronisation turns into time, taken out, as the class
  means of an extrapolation have none);
* the replayed truth's floor: the same measures between the real trace's
  computation expanded from each representative's least disturbed replay
  round (the truth) and from its runner-up: how far the truth itself
  moves when its representatives are replayed again.

``--scale N``: jacobi (10 iterations) extrapolated from 16, 32 and 64
ranks to N and simulated, with the wall time and peak memory of each step.
Goals: calls identical; cpu within 10 %; predictions within 5 %; N =
100,000 built and simulated within 10 minutes and 16 GB.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

# one thread per rank, as MPI jobs that fill a node's cores run: a BLAS
# that starts a thread per core spins for its turn when ranks share the
# cores, and the process's CPU seconds count the spinning (cg traced at 8
# ranks on 2 cores: 0.9 s a rank, replayed alone 0.17 s)
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BIN = Path(sys.executable).parent
MPIEXEC = str(BIN / "mpiexec") if (BIN / "mpiexec").exists() else "mpiexec"
EX = ROOT / "examples"

# name: (program and arguments, small N, test N default)
APPS: dict[str, tuple] = {
    # 4x4, 8x4, 8x8: a grid that is not square tells the axes apart
    "jacobi": ([EX / "jacobi.py", "--n", "1920", "--iters", "100"], [16, 32, 64], [100, 144]),
    "cg": ([EX / "cg.py", "--n", "1474560", "--iters", "60"], [8, 16, 32], [64, 128]),
    "uneven": ([EX / "uneven.py", "--iters", "8", "--work", "60000", "--classes", "1"],
               [8, 16, 32], [64, 128]),
    "fft2d": ([EX / "fft2d.py", "--n", "1920", "--steps", "3"], [8, 16, 32], [64, 128]),
    "rma_halo": ([EX / "rma_halo.py", "--n", "1474560", "--iters", "60"], [8, 16, 32], [64, 128]),
    # third-party SPMD codes, their MPI below Python (numba-mpi's ctypes
    # bindings; Devito's generated C on a Cartesian communicator it makes
    # in Python): traced through the PMPI shim
    "numba-halo": ([ROOT / "bench" / "apps" / "below_python" / "numba_halo.py"],
                   [8, 16, 32], [64, 128]),
    "numba-pi": ([ROOT / "bench" / "apps" / "below_python" / "numba_pi.py"],
                 [8, 16, 32], [64, 128]),
    "devito-diffusion": (["-m", "examples.cfd.example_diffusion", "-m", "devito", "-s", "0.002",
                          "-t", "100"], [9, 12, 15, 16], [20, 36],
                         {"DEVITO_MPI": "1", "DEVITO_LOGGING": "WARNING"}),
}
# the scale run: jacobi with few iterations (the goal is about N, not about
# the number of calls per rank)
SCALE_APP = ([EX / "jacobi.py", "--n", "1920", "--iters", "10"], [16, 32, 64])
PLATFORMS = sorted((ROOT / "config" / "platforms").glob("*.yaml"))


def sh(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=ROOT,
                          **kw)


def traced(out: Path, n: int, app: list, extra_env: dict | None = None) -> Path:
    d = out / f"n{n}"
    if not (d / "events.parquet").exists():
        env = dict(os.environ, MPIR_CVAR_ENABLE_HEAVY_YIELD="1", **(extra_env or {}))
        p = sh([MPIEXEC, "-n", n, sys.executable, "-m", "instrument", "trace", "-o", d,
                "--force"] + app, env=env)
        if p.returncode:
            raise RuntimeError(f"tracing {app[0].name} at {n}: {p.stderr[-800:]}")
    return d


def predicted(trace: Path, platform: Path, out: Path, compute: Path | None = None,
              extra: tuple = ()) -> float | None:
    p = sh([sys.executable, "-m", "netsim", trace, "--platform", platform, "-o", out]
           + (["--compute", compute] if compute else []) + list(extra))
    if p.returncode:
        return None                     # the platform does not hold N ranks
    return json.loads(out.read_text())["predicted_time"]


def class_means(real, compute: Path, path: Path) -> Path:
    """``compute`` (a computation table of the real trace) with every rank
    at its position class's mean, span by span: the noise between ranks,
    which the slowest rank of every synchronisation turns into time, taken
    out, as the extrapolation gives every member its class's times."""
    import numpy as np
    import pandas as pd

    from contracts.compute import read_compute, write_compute
    from extrapolate.layout import layout_of
    ev = real.events[["rank", "seq"]].copy()
    ev["comp"] = read_compute(str(compute), ev)
    names = np.array(layout_of(real).position_classes(np.arange(real.size)))
    ev["cls"] = names[ev["rank"].to_numpy()]
    ev["comp"] = ev.groupby(["cls", "seq"])["comp"].transform("mean")
    write_compute(pd.DataFrame(ev[["rank", "seq", "comp"]]), str(path))
    return path


def replayed(real: Path, n: int, app: list, out: Path, extra_env: dict | None = None) -> Path:
    """The method's own computation at N: the real trace clustered, its
    representatives recorded and each replayed alone on a core of this
    host (3 rounds), expanded to every rank.  Unlike the real trace's CPU
    times, measured with N ranks sharing 2 cores, these are a dedicated
    core's: what a prediction from a full-scale trace would use."""
    compute = out / f"replayed{n}.csv"
    if compute.exists():
        return compute
    reps, log, rep_dir = out / f"reps{n}.csv", out / f"msglog{n}", out / f"replay{n}"
    env = dict(os.environ, MPIR_CVAR_ENABLE_HEAVY_YIELD="1", **(extra_env or {}))
    steps = {"cluster": [sys.executable, "-m", "cluster", real, "-o", reps],
             "record": [MPIEXEC, "-n", n, sys.executable, "-m", "instrument", "record",
                        "--reps", reps, "-o", log, "--force"] + app,
             "replay": [sys.executable, "-m", "replay", "--reps", reps, "--size", n, "--log",
                        log, "-o", rep_dir, "--repeats", 3, "--force"] + app,
             "expand": [sys.executable, "-m", "replay.expand", real, reps, rep_dir, "-o",
                        compute]}
    for step, cmd in steps.items():
        p = sh(cmd, env=env)
        if p.returncode:
            raise RuntimeError(f"{step} at {n}: {p.stderr[-800:]}")
    return compute


def round_floor(real: Path, n: int, out: Path, truth: dict) -> dict:
    """The replayed truth's own noise at N.  The truth keeps, per
    representative, the least disturbed of its replay rounds (the least
    total computation); here the same trace expanded from the next least
    disturbed round instead, against it: the median over ranks of
    |a - b| / b of a rank's total, and the predictions' relative
    difference per platform.  An extrapolation cannot be told apart from
    the truth closer than the truth moves to its runner-up round.
    ``truth``: platform -> (its platform file, the truth's prediction)."""
    import numpy as np
    import pandas as pd

    from contracts.compute import read_compute
    replays = out / f"replay{n}"
    second = out / f"replay{n}_second"
    second.mkdir(exist_ok=True)
    for listing in sorted(replays.glob("repeats_rank*.csv")):
        rounds = pd.read_csv(listing).sort_values("comp")
        if len(rounds) < 2:
            return {}
        r, k = int(rounds["rank"].iloc[1]), int(rounds["repeat"].iloc[1])
        for suffix in (".csv", ".out"):
            src = replays / f"repeat{k}" / f"rank{r}{suffix}"
            if src.exists():
                (second / src.name).write_bytes(src.read_bytes())
    compute = out / f"replayed{n}_second.csv"
    p = sh([sys.executable, "-m", "replay.expand", real, out / f"reps{n}.csv", second,
            "-o", compute])
    if p.returncode:
        raise RuntimeError(f"expanding the runner-up replays at {n}: {p.stderr[-800:]}")
    a = read_compute(str(out / f"replayed{n}.csv")).groupby("rank")["comp"].sum()
    b = read_compute(str(compute)).groupby("rank")["comp"].sum().reindex(a.index)
    pred = {}
    for name, (plat, ta) in truth.items():
        tb = predicted(real, plat, out / f"psecond{n}_{name}.json", compute)
        if tb is not None:
            pred[name] = (tb - ta) / ta
    return {"cpu_floor_replayed": float(np.median(np.abs(b - a) / a)),
            "prediction_floor_replayed": pred}


def against_replayed(x, compute: Path) -> float:
    """Median over ranks of |extrapolated CPU - replayed| / replayed, of
    each rank's total computation."""
    import numpy as np

    from contracts.compute import read_compute
    rep = read_compute(str(compute)).groupby("rank")["comp"].sum()
    ext = x.events.groupby("rank")["cpu"].sum().reindex(rep.index)
    return float(np.median(np.abs(ext.to_numpy() - rep.to_numpy()) / rep.to_numpy()))


def scale_platform(n: int, path: Path) -> Path:
    """ib-cluster.yaml with enough nodes for n ranks."""
    import yaml
    p = yaml.safe_load((ROOT / "config" / "platforms" / "ib-cluster.yaml").read_text())
    p["nodes"] = -(-n // p["cores_per_node"])
    p["name"] = f"ib-cluster-{p['nodes']}-nodes"
    path.write_text(yaml.safe_dump(p))
    return path


def validate(name: str, work: Path, tests: list[int]) -> list[dict]:
    """Each test N: the real trace's calls, its CPU seconds and the
    prediction from it against the extrapolation from the small traces'
    CPU seconds; and the method's computation at N (replayed alone)
    against the extrapolation of the small runs' replayed computation."""
    from contracts.trace import load_trace
    from extrapolate.compare import compare
    app, small, _, *extra = APPS[name]
    env = extra[0] if extra else None
    out = work / name
    small_dirs = [traced(out, n, app, env) for n in small]
    rows = []
    for n in tests:
        real = traced(out, n, app, env)
        x, xr = out / f"x{n}", out / f"xr{n}"
        p = sh([sys.executable, "-m", "extrapolate", *small_dirs, "--ranks", n, "-o", x,
                "--force"])
        row = {"app": name, "from": "/".join(map(str, small)), "N": n}
        if p.returncode:
            row["refused"] = p.stderr.strip().splitlines()[-1][:200]
            rows.append(row)
            print(f"{name} N={n}: refused: {row['refused']}", flush=True)
            continue
        small_rep = [replayed(d, k, app, out, env) for d, k in zip(small_dirs, small)]
        p = sh([sys.executable, "-m", "extrapolate", *small_dirs, "--ranks", n, "-o", xr,
                "--force", "--compute", *small_rep])
        if p.returncode:
            raise RuntimeError(f"extrapolating the replayed computation: {p.stderr[-800:]}")
        rt = load_trace(str(real))
        row.update(compare(load_trace(str(x)), rt))
        rep = replayed(real, n, app, out, env)
        row["cpu_error_replayed"] = against_replayed(load_trace(str(xr)), rep)
        means = class_means(rt, rep, out / f"replayed_class_means{n}.csv")
        errs, errs_sampled, errs_rep, errs_means, truth = {}, {}, {}, {}, {}
        for plat in PLATFORMS:
            a = predicted(x, plat, out / f"px{n}_{plat.stem}.json")
            v = predicted(x, plat, out / f"pv{n}_{plat.stem}.json",
                          extra=("--class-variability",))
            b = predicted(real, plat, out / f"pr{n}_{plat.stem}.json")
            ar = predicted(xr, plat, out / f"pxr{n}_{plat.stem}.json")
            br = predicted(real, plat, out / f"prep{n}_{plat.stem}.json", rep)
            if a is not None and b is not None:
                errs[plat.stem] = (a - b) / b
            if v is not None and b is not None:
                errs_sampled[plat.stem] = (v - b) / b
            bm = predicted(real, plat, out / f"pmean{n}_{plat.stem}.json", means)
            if br is not None:
                truth[plat.stem] = (plat, br)
            if ar is not None and br is not None:
                errs_rep[plat.stem] = (ar - br) / br
            if ar is not None and bm is not None:
                errs_means[plat.stem] = (ar - bm) / bm
        row["prediction_error"] = errs
        row["prediction_error_sampled"] = errs_sampled
        row["prediction_error_replayed"] = errs_rep
        row["prediction_error_replayed_class_means"] = errs_means
        row.update(round_floor(real, n, out, truth))
        rows.append(row)

        def pct(d):
            return ", ".join(f"{k} {100 * v:+.1f} %" for k, v in d.items())
        print(f"{name} N={n}: calls {'same' if row['same_calls'] else row['first_difference']}; "
              f"trace CPU: cpu error median {100 * row['cpu_error_median']:.1f} %, max "
              f"{100 * row['cpu_error_max']:.1f} % (real spread {100 * row['real_noise']:.1f} "
              f"%), prediction {pct(errs)}, the classes' variability sampled "
              f"{pct(errs_sampled)}; replayed: cpu error median "
              f"{100 * row['cpu_error_replayed']:.1f} %, prediction {pct(errs_rep)}, against "
              f"its class means {pct(errs_means)}; the replayed truth's runner-up "
              f"rounds against it: cpu {100 * row.get('cpu_floor_replayed', float('nan')):.1f} %, "
              f"prediction {pct(row.get('prediction_floor_replayed', {}))}", flush=True)
    return rows


def scale(work: Path, n: int) -> dict:
    """Extrapolate SCALE_APP to ``n`` ranks and simulate it, timed."""
    app, small = SCALE_APP
    name = "jacobi"
    out = work / "scale"
    small_dirs = [traced(out, k, app) for k in small]
    x = out / f"x{n}"
    t0 = time.time()
    # jacobi floors n / extent (1920 over 400 x 250 does not split evenly)
    p = sh(["/usr/bin/time", "-f", "%M", sys.executable, "-m", "extrapolate", *small_dirs,
            "--ranks", n, "-o", x, "--force", "--uneven", "floor"])
    if p.returncode:
        raise RuntimeError(p.stderr[-800:])
    build_s, build_kb = time.time() - t0, int(p.stderr.strip().splitlines()[-1])
    t0 = time.time()
    plat = scale_platform(n, out / f"platform{n}.yaml")
    p = sh(["/usr/bin/time", "-f", "%M", sys.executable, "-m", "netsim", x, "--platform",
            plat, "-o", out / f"p{n}.json"])
    if p.returncode:
        raise RuntimeError(p.stderr[-800:])
    sim_s, sim_kb = time.time() - t0, int(p.stderr.strip().splitlines()[-1])
    pred = json.loads((out / f"p{n}.json").read_text())
    meta = json.loads((x / "meta.json").read_text())
    r = {"app": name, "N": n, "events": meta["events"], "build_s": build_s,
         "build_GB": build_kb / 2**20, "simulate_s": sim_s, "simulate_GB": sim_kb / 2**20,
         "predicted_s": pred["predicted_time"], "band_s": pred["band"],
         "cpu_interval": [(c["class"], c["cpu_low"], c["cpu_total"], c["cpu_high"])
                          for c in meta["extrapolated"]["classes"]]}
    print(f"{name} at N={n}: {r['events']} events; built in {build_s:.0f} s "
          f"({r['build_GB']:.1f} GB), simulated in {sim_s:.0f} s ({r['simulate_GB']:.1f} GB); "
          f"predicted {r['predicted_s']:.4g} s (band {r['band_s'][0]:.3g} to "
          f"{r['band_s'][1]:.3g} s) on ib-cluster with {n} cores", flush=True)
    return r


def markdown(paths: list[str]) -> None:
    """The validation rows of result files as the table of bench/RESULTS.md
    (predictions on ib-cluster; the other platforms are printed as they run)."""
    def pct(d, key="ib-cluster"):
        return f"{100 * d[key]:+.1f} %" if key in d else "-"
    def floor(r, key):
        v = r.get(key)
        v = v.get("ib-cluster") if isinstance(v, dict) else v
        return "" if v is None else f" (floor {100 * v:.1f})"
    print("| app (from) | N | calls | cpu error, trace CPU (real spread) | prediction from "
          "trace CPU: plain / variability sampled | cpu error, replayed (floor) | prediction, "
          "replayed (floor) |")
    print("|---|---|---|---|---|---|---|")
    for path in paths:
        for r in json.loads(Path(path).read_text())["validation"]:
            head = f"| {r['app']} ({r.get('from', '')}) | {r.get('N', '-')} "
            if "refused" in r or "failed" in r:
                why = r.get("refused") or r.get("failed")
                print(head + f"| {'refused' if 'refused' in r else 'failed'}: {why} "
                      "| - | - | - | - |")
                continue
            calls = "same" if r["same_calls"] else f"differ: {r['first_difference']}"
            print(head + f"| {calls} | {100 * r['cpu_error_median']:.1f} % "
                  f"({100 * r['real_noise']:.1f}) | {pct(r['prediction_error'])} / "
                  f"{pct(r['prediction_error_sampled'])} | "
                  f"{100 * r['cpu_error_replayed']:.1f} %{floor(r, 'cpu_floor_replayed')} | "
                  f"{pct(r['prediction_error_replayed'])}"
                  f"{floor(r, 'prediction_floor_replayed')} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--apps", default=",".join(APPS))
    ap.add_argument("--test", help="test N, comma-separated (default: per application)")
    ap.add_argument("--scale", type=int, default=0,
                    help="also extrapolate jacobi (10 iterations) to N and simulate it")
    ap.add_argument("--work", default=str(ROOT / "bench" / "out" / "extrapolation"))
    ap.add_argument("-o", "--output", default=str(ROOT / "bench" / "out" / "extrapolation.json"))
    ap.add_argument("--markdown", nargs="+", metavar="JSON",
                    help="print the validation table of these result files and stop")
    a = ap.parse_args()
    if a.markdown:
        markdown(a.markdown)
        return 0
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    names = a.apps.split(",")
    rows = []
    for name in names:
        tests = [int(x) for x in a.test.split(",")] if a.test else APPS[name][2]
        try:
            rows += validate(name, work, tests)
        except RuntimeError as e:
            print(f"{name}: {e}", flush=True)
            rows.append({"app": name, "failed": str(e)[-300:]})
        # after every application: a long run stopped midway keeps what it measured
        Path(a.output).write_text(json.dumps({"validation": rows}, indent=1, default=str))
    result = {"validation": rows}
    if a.scale:
        result["scale"] = scale(work, a.scale)
    Path(a.output).write_text(json.dumps(result, indent=1, default=str))
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
    print(f"wrote {a.output} (largest child process: {peak:.1f} GB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
