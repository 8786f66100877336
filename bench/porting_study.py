"""Porting-study validation: predict a target that is not the host.

    python bench/porting_study.py [--apps jacobi,cg] [--links 10gbit,1gbit,100mbit] [--ranks N]
                                  [--rounds 5] [--network-every-round]
                                  [--out bench/porting/results] [--markdown] [--resimulate]

The target is an emulated cluster (python -m emulate): N nodes, one rank
each, joined by links of a given rate, one cluster per link setting, all
up at once inside a private network namespace (needs root; everything it
makes disappears when the script ends).  As in a porting study, the
application is traced and recorded on the host (shared memory, the
host's own mpiexec), its representatives are replayed on the host's
cores (the target's nodes are this machine's cores), and the result is
simulated on two descriptions of each target:

- calibrated: ``calibrate measure`` run on the emulated cluster, fitted
  (what a user has once the machine is delivered);
- nominal: written by hand from the link's nominal figures, as a user
  would before delivery: byte time 8 / rate, a latency of NOMINAL_LATENCY
  (a typical kernel-TCP figure), everything else the defaults.

Then the application runs for real on each emulated cluster.  Rounds
interleave the two sides (a replay, then one real run per link), since
this machine drifts; compared are the median prediction and the median
real run, with the 95 % bootstrap interval of the error over the rounds.
The emulated links drift too (a 1 MiB exchange cost 11.3 and 12.8 ms in
two runs minutes apart): with ``--network-every-round`` every real run
has a measurement of its link beside it, and the calibrated platform is
their mean (OUT/<app>/calibrated-<link>.yaml) instead of the one
measurement taken before the rounds (about 2 minutes more per round).
Also reported, per application, whether the predictions rank the link
settings as the real runs do, and the predicted against the measured
speed-up between the slowest and fastest link.

Writes OUT/links/<link>/{pingpong.csv,calibrated.yaml,nominal.yaml},
OUT/<app>/... (trace, representatives, log, replays, predictions,
runs.json) and OUT/results.csv (one row per app, link and platform
source: predicted, measured, error, and each round's figures).
``--resimulate`` redoes the expansion and simulations from the rounds
saved under OUT, without running anything (after a change to the model).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import sys
from pathlib import Path

import pandas as pd
import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE / "apps")]
# bench/apps/run.py: the stages and statistics of the host's applications table
from run import (  # noqa: E402
    PY,
    env,
    error_interval,
    expand_round,
    fidelity,
    host_stages,
    measure_network,
    replay_round,
    sh,
)

from contracts.representatives import read_representatives  # noqa: E402
from emulate import Cluster, down, up  # noqa: E402
from emulate.__main__ import parse_rate  # noqa: E402
from emulate.isolate import MARK, enter, isolated  # noqa: E402
from replay.run import keep_least_disturbed  # noqa: E402
from validate import measure  # noqa: E402

RANKS = 2                    # default N: one rank per emulated node, a node per core here
NOMINAL_LATENCY = 20e-6      # what a user would write for kernel TCP over Ethernet
TIMEOUT = 900                # a stage taking longer has hung

# the examples and the third-party applications whose traffic a 0.1 Gbit/s
# link carries in seconds (the OSU demos send gigabytes: hours there)
APPS = {
    "jacobi": ["examples/jacobi.py", "--n", "2048", "--iters", "100"],
    "cg": ["examples/cg.py", "--n", "400000", "--iters", "600"],
    "fft2d": ["examples/fft2d.py", "--n", "512", "--steps", "6"],
    "master-worker": ["examples/master_worker.py", "--tasks", "200", "--size", "200"],
    "uneven": ["examples/uneven.py", "--iters", "300"],
    "rma-halo": ["examples/rma_halo.py", "--n", "1000000", "--iters", "60", "--halo", "8"],
    "futures-julia": ["bench/apps/src/mpi4py/demo/futures/run_julia.py"],
    "fft-navier-stokes": ["bench/apps/fft_navier_stokes.py", "--n", "64", "--steps", "12"],
    "pylops-cgls": ["bench/apps/src/pylops_mpi/examples/plot_cgls.py"],
    "pylops-halo": ["bench/apps/src/pylops_mpi/examples/plot_halo.py"],
}
# the module a third-party application needs (bench/apps/install.sh installs it)
NEEDS = {"fft-navier-stokes": "mpi4py_fft", "pylops-cgls": "pylops_mpi",
         "pylops-halo": "pylops_mpi"}


def link_name(rate: float) -> str:
    return f"{rate / 1e9:g}gbit"


def nominal_platform(rate: float, ranks: int) -> dict:
    """The target as a user describes it from its data sheet."""
    return {"name": f"nominal-{link_name(rate)}", "nodes": ranks, "cores_per_node": 1,
            "network": {"levels": [{"name": "ethernet", "latency": NOMINAL_LATENCY,
                                    "byte_time": 8.0 / rate}], "contention": True}}


def measure_link(c: Cluster, out: Path, rate: float, repeats: int = 10) -> Path:
    """``calibrate measure`` on cluster ``c`` (messages up to what the link
    carries in about 20 ms, at most 4 MiB) into ``out``."""
    largest = 1 << min(22, max(16, int(rate / 8 * 0.02).bit_length() - 1))
    return measure_network(out, c.mpiexec, ("--repeats", str(repeats), "--max-bytes",
                                            str(largest)), timeout=TIMEOUT)


def fit_link(measured: list[Path], out: Path, nodes: int, rate: float) -> Path:
    """The calibrated platform from ``calibrate measure`` files, each
    point's mean over them (what the link's states cost on average)."""
    sh([PY, "-m", "calibrate", "fit", *map(str, measured), "--combine", "mean",
        "--cores-per-node", "1", "--nodes", str(nodes), "--name",
        f"calibrated-{link_name(rate)}", "-o", str(out)], out.with_suffix(".log"))
    return out


def calibrate_link(c: Cluster, d: Path, rate: float) -> None:
    """One measurement of cluster ``c`` before the rounds: d/calibrated.yaml."""
    fit_link([measure_link(c, d / "pingpong.csv", rate)], d / "calibrated.yaml", c.nodes, rate)


def rounds(app: list[str], d: Path, clusters: dict, k: int, ranks: int,
           network: bool = False) -> None:
    """Round ``k``: the representatives replayed on the host's cores, as
    many at once as the emulated nodes share them, then one real run per
    link (``network``: each beside a measurement of that link,
    d/pingpong-<link>-<k>.csv: the emulated links drift with the machine's
    state)."""
    replay_round(app, d, ranks, k, timeout=TIMEOUT)
    runs = json.loads((d / "runs.json").read_text()) if (d / "runs.json").exists() else {}
    for link, c in clusters.items():
        if network:
            measure_link(c, d / f"pingpong-{link}-{k}.csv", c.rate, repeats=5)
        t = measure(app, ranks, 1, c.mpiexec, env=env(), log=lambda s: None,
                    timeout=TIMEOUT)["measured"]
        runs.setdefault(link, []).append(t)
        print(f"    round {k} {link}: {t:.4f} s", flush=True)
    (d / "runs.json").write_text(json.dumps(runs))


def predict(name: str, d: Path, links: Path) -> list[dict]:
    """Each round's replays expanded and simulated on every link's two
    platforms; one row per link and source."""
    reps = read_representatives(str(d / "reps.csv"))
    runs = json.loads((d / "runs.json").read_text())
    n_rounds = len(list((d / "replay").glob("repeat[0-9]*")))
    keep_least_disturbed(sorted(set(reps["representative"])), str(d / "replay"), n_rounds)
    for k in range(1, n_rounds + 1):
        expand_round(d, k)
    rows = []
    fid = fidelity(d / "trace", reps, d / "replay")
    for link, measured in runs.items():
        beside = sorted(d.glob(f"pingpong-{link}-[0-9]*.csv"))
        if beside:          # measured in the rounds: their mean, as the real runs saw it
            rate = json.loads((links / link / "rate.json").read_text())["rate"]
            fit_link(beside, d / f"calibrated-{link}.yaml", reps["rank"].nunique(), rate)
        for source in ("calibrated", "nominal"):
            platform = links / link / f"{source}.yaml"
            if source == "calibrated" and beside:
                platform = d / f"calibrated-{link}.yaml"
            preds = []
            for k in range(1, n_rounds + 1):
                out = d / f"prediction-{link}-{source}-{k}.json"
                sh([PY, "-m", "netsim", str(d / "trace"), "--platform", str(platform),
                    "--compute", str(d / f"compute{k}.csv"), "-o", str(out)],
                   d / f"simulate-{link}-{source}-{k}.log")
                preds.append(json.loads(out.read_text())["predicted_time"])
            p, m = statistics.median(preds), statistics.median(measured)
            lo, hi = error_interval(preds, measured)
            rows.append({"app": name, "link": link, "source": source, "predicted": p,
                         "measured": m, "error": p / m - 1, "lo": lo, "hi": hi,
                         "fidelity": fid, "predicted_each": preds,
                         "measured_each": measured})
            print(f"    {link} {source}: predicted {p:.4f} s, measured {m:.4f} s, "
                  f"error {100 * (p / m - 1):+.1f} % ({100 * lo:+.0f} to {100 * hi:+.0f})",
                  flush=True)
    return rows


EFFECT = 0.01               # smaller differences between links count as none


def apart(a: list[float], b: list[float], draws: int = 10000) -> int:
    """+1 if rounds ``a`` are slower than rounds ``b`` beyond this machine's
    noise, -1 if faster, 0 if the rounds cannot tell.  Round k of both
    sides ran in the same minutes (and a round's predictions share its
    replay), so the rounds are paired: apart when the 95 % bootstrap
    interval of the median of the per-round ratios a/b excludes 1 and
    the median differs from 1 by more than EFFECT."""
    import numpy as np
    r = np.asarray(a, float) / np.asarray(b, float)
    rng = np.random.default_rng(0)
    med = np.median(rng.choice(r, (draws, len(r))), axis=1)
    lo, hi = np.percentile(med, [2.5, 97.5])
    if abs(np.median(r) - 1) <= EFFECT:
        return 0
    return 1 if lo > 1 else -1 if hi < 1 else 0


def ranked(rounds: dict) -> str:
    """Links from slowest to fastest by their rounds' median, ``>`` where
    the next one is faster beyond the noise, ``~`` where not."""
    links = sorted(rounds, key=lambda k: -statistics.median(rounds[k]))
    out = links[0]
    for prev, link in zip(links, links[1:]):
        out += (" > " if apart(rounds[prev], rounds[link]) > 0 else " ~ ") + link
    return out


def same_order(measured: dict, predicted: dict) -> bool:
    """Every pair of links the real runs tell apart is ordered the same way
    by the predictions' medians."""
    med = {k: statistics.median(v) for k, v in predicted.items()}
    return all((med[a] > med[b]) == (side > 0) for a in measured for b in measured
               if a != b and (side := apart(measured[a], measured[b])))


def markdown(df: pd.DataFrame) -> str:
    """The porting-study table, its summary per platform source, and the
    what-if ranking of the link settings."""
    out = ["| app | link | platform | predicted s (rounds) | measured s (rounds) | "
           "error (95 % interval) |", "|---|---|---|---|---|---|"]
    for r in df.itertuples():
        out.append(f"| {r.app} | {r.link} | {r.source} | {r.predicted:.3f} "
                   f"({min(r.predicted_each):.3f}-{max(r.predicted_each):.3f}) | "
                   f"{r.measured:.3f} ({min(r.measured_each):.3f}-{max(r.measured_each):.3f}) "
                   f"| {100 * r.error:+.1f} % ({100 * r.lo:+.0f} to {100 * r.hi:+.0f}) |")
    out.append("")
    for source, g in df.groupby("source", sort=False):
        e = g["error"].abs()
        out.append(f"- {source}: {len(g)} comparisons, |error| mean {100 * e.mean():.1f} %, "
                   f"max {100 * e.max():.1f} %")
    out += ["", "What-if: the link settings ranked by time, slowest first (~: the rounds "
            "cannot tell them apart), whether each prediction orders every pair the real "
            "runs tell apart as they do, and the speed-up from the slowest link to the "
            "fastest.",
            "", "| app | measured order | calibrated order | nominal order | measured "
            "speed-up | calibrated | nominal |", "|---|---|---|---|---|---|---|"]
    for app, g in df.groupby("app", sort=False):
        cal = g[g["source"] == "calibrated"].set_index("link")
        measured = cal["measured_each"].to_dict()
        cells, ups = [ranked(measured)], [cal["measured"].max() / cal["measured"].min()]
        for source in ("calibrated", "nominal"):
            pred = g[g["source"] == source].set_index("link")
            each = pred["predicted_each"].to_dict()
            cells.append(ranked(each) + (" (same)" if same_order(measured, each)
                                         else " (differs)"))
            ups.append(pred["predicted"].max() / pred["predicted"].min())
        out.append(f"| {app} | {cells[0]} | {cells[1]} | {cells[2]} | "
                   f"{ups[0]:.2f}x | {ups[1]:.2f}x | {ups[2]:.2f}x |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--apps", help=f"comma-separated, of {', '.join(APPS)} (default all)")
    ap.add_argument("--links", default="10gbit,1gbit,100mbit",
                    help="link rates, one emulated cluster each (default 10gbit,1gbit,100mbit)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds per app (default 5)")
    ap.add_argument("--network-every-round", action="store_true",
                    help="measure every link in every round too (5 repeats, about 2 minutes "
                         "a round for the three default links) and predict on the mean of "
                         "those measurements: the emulated links drift with the machine")
    ap.add_argument("--ranks", type=int, default=RANKS,
                    help=f"N: emulated nodes of one rank each (default {RANKS}; at most the "
                         "machine's cores for a fair real run)")
    ap.add_argument("--out", default=str(HERE / "porting" / "results"))
    ap.add_argument("--markdown", action="store_true", help="print the tables as markdown")
    ap.add_argument("--resimulate", action="store_true",
                    help="simulate again from the rounds saved under OUT (runs nothing)")
    a = ap.parse_args(argv)
    names = a.apps.split(",") if a.apps else list(APPS)
    if set(names) - set(APPS):
        ap.error(f"unknown app(s) {sorted(set(names) - set(APPS))}; known: {', '.join(APPS)}")
    rates = [parse_rate(x) for x in a.links.split(",")]
    out = Path(a.out).resolve()
    if not a.resimulate and os.environ.get(MARK) != "1":
        # the clusters live in a private network namespace that ends with us
        return isolated([PY, str(Path(__file__).resolve())] + list(sys.argv[1:]
                                                                   if argv is None else argv))
    rows = []
    if a.resimulate:
        for name in names:
            if (out / name / "runs.json").exists():
                print(f"{name}: resimulating", flush=True)
                rows += predict(name, out / name, out / "links")
    else:
        enter()
        clusters = {}
        try:
            for i, rate in enumerate(rates):
                link = link_name(rate)
                c = up(Cluster(f"link{i}", a.ranks, 1, rate))
                clusters[link] = c
                d = out / "links" / link
                d.mkdir(parents=True, exist_ok=True)
                (d / "rate.json").write_text(json.dumps({"rate": rate}))
                (d / "nominal.yaml").write_text(yaml.safe_dump(
                    nominal_platform(rate, a.ranks), sort_keys=False))
                print(f"calibrating {link}", flush=True)
                calibrate_link(c, d, rate)
            for name in names:
                app = [str(ROOT / APPS[name][0])] + APPS[name][1:]
                if not os.path.exists(app[0]):
                    print(f"{name}: {app[0]} missing (bench/apps/install.sh); skipped")
                    continue
                if name in NEEDS and importlib.util.find_spec(NEEDS[name]) is None:
                    print(f"{name}: module {NEEDS[name]} not installed (bench/apps/install.sh); "
                          f"skipped")
                    continue
                d = out / name
                shutil.rmtree(d, ignore_errors=True)
                d.mkdir(parents=True)
                print(f"{name}: {' '.join(APPS[name])}", flush=True)
                host_stages(app, d, a.ranks, timeout=TIMEOUT)
                for k in range(1, a.rounds + 1):
                    rounds(app, d, clusters, k, a.ranks, a.network_every_round)
                rows += predict(name, d, out / "links")
        finally:
            for c in clusters.values():
                down(c.name, log=lambda s: None)
    df = pd.DataFrame(rows)
    if len(df):
        df.to_csv(out / "results.csv", index=False)
        print(markdown(df) if a.markdown else df.drop(
            columns=["predicted_each", "measured_each"]).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
