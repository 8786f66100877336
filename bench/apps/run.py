"""Validate the whole method on third-party applications.

    python bench/apps/run.py [--apps fft-navier-stokes,heat-kmeans] [--repeats 9]
                             [--recipes FILE] [--ranks N]
                             [--out bench/apps/results] [--markdown]
                             [--combine mean] [--resimulate]

For every recipe of bench/apps/recipes.yaml (install them first with
bench/apps/install.sh): trace at N (with the calls made below Python,
through the PMPI shim), cluster, record the representatives; then rounds, one after the
other, of: a replay of the representatives (each as min(N, cores)
concurrent copies bound to cores: the contention of the real run, and
how the node's cores and runs vary), a
measurement of this machine's network (``calibrate measure``) and a
real run of the application (untraced, MPI init to the end, as ``python -m
validate``).  This shared machine drifts by tens of per cent within
minutes, so the rounds interleave the two sides: both sample the same
minutes.  Then fit the rounds' network measurements, each point's mean
(``--combine``), into config/platforms/this-machine.yaml's terms (OUT/APP/platform.yaml),
expand each round's replays (OUT/APP/compute<k>.csv) and simulate them
on it: one prediction per round, as one real run per round, each with
the variability measured over all rounds' copies (netsim --variability:
the median of seeded samples, with its 5-95 % band) and without it (every
rank at its representative's times), on the same replays.  A round's
prediction, like a real run, is one sample of every rank at once: the
ranks wait for the slowest, so taking each representative's fastest
replay across rounds (as the workflow does, OUT/APP/compute.csv)
predicted faster than any one round could run (pylops-cgls, whose two
ranks spend their time importing: 3.95 s against real runs of 5.15-6.03
s, while each round's slower rank took 3.95-6.07 s).  Compared: the
median prediction with the median real run (the table shows each side's
range over the rounds beside it).  ``--repeats`` rounds
(``--replay-repeats`` replays, default as many); ``--no-calibrate``
simulates on config/platforms/this-machine.yaml as it is, and a recipe's
``platform`` replaces it.  ``--bind`` binds the real runs' ranks to
cores (the replay's copies always are, where there are enough).
``--table`` prints the table of what is saved under OUT, running
nothing.  ``--resimulate`` does the fit, the expansion
and the simulations again on the rounds saved under OUT (the real runs'
seconds in OUT/APP/runs.json, the untraced output in
OUT/APP/untraced.out), without tracing or running anything: after a
change to the model, or a run that stopped after its rounds; saved real
runs are compared even where N exceeds this machine's cores (rounds
brought back from a larger machine).  Writes OUT/APP/row.json
per app and OUT/results.csv (every app with a row under OUT: runs of
subsets accumulate) and, with ``--markdown``, prints the table for
bench/RESULTS.md.

Columns: app, package, what it does (the recipe's ``what`` up to its
first colon), N, events (traced), representatives, fidelity (the largest
relative difference between a representative's replayed and traced total
computation), predicted and measured seconds (medians over the rounds),
error = (predicted - measured) / measured (in the markdown table with
its 95 % bootstrap interval over the rounds, :func:`error_interval`, and
"inside the floor" where it is within the noise floor: the untraced runs
against each other, :func:`noise_floor`; the summary reports the apps
whose floor is wider than the 5 % goal apart), the error without the
variability model (the same replays, every rank at its representative's
times), whether the median round's 5-95 % band holds
the measured median, invisible (MPI calls below
Python that the tracer did not see), same_output (the recipe's output
line identical traced, untraced and replayed, every representative's own
line where the pattern holds ``{rank}``: :func:`same_output`; "-" when the
output is a timing), outcome (predicted, or refused with the stage's
reason, :func:`refusal`: a row of its own).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))
from contracts.replayed import read_replayed  # noqa: E402
from contracts.representatives import read_representatives  # noqa: E402
from contracts.variability import write_variability  # noqa: E402
from replay.expand import gather_variability  # noqa: E402
from replay.run import copy_cores, keep_least_disturbed, measure_variability  # noqa: E402
from replay.variability import copies_in, round_dirs  # noqa: E402
from validate import measure  # noqa: E402  (the repository's)

PY = sys.executable
MPIEXEC = str(Path(PY).parent / "mpiexec")
PLATFORM = ROOT / "config" / "platforms" / "this-machine.yaml"
# mpiexec's options for the real runs (--bind: MPICH's -bind-to core, so
# that a rank keeps its core, as each replay copy keeps its own)
LAUNCHER: tuple = ()


def load_recipes(path=HERE / "recipes.yaml") -> dict:
    with open(path) as f:
        return yaml.safe_load(f)


def app_args(recipe: dict) -> list[str]:
    """The recipe's python arguments with src/ resolved to bench/apps/src/
    (``app: [-m, package.module, ...]`` runs a module)."""
    args = [str(a) for a in recipe["app"]]
    if args[0] in ("-m", "-c"):
        return args                         # a module (or a command): as python takes it
    first = args[0]
    if first.startswith("src/"):
        first = str(HERE / first)
    elif not os.path.isabs(first):
        first = str(ROOT / first)
    if not os.path.exists(first):
        raise SystemExit(f"{first}: missing; run bench/apps/install.sh first")
    return [first] + args[1:]


@contextlib.contextmanager
def app_environment(recipe: dict):
    """The recipe's ``env`` set for every stage and run of its app (a value
    starting with src/ names a folder under bench/apps/src/, as in ``app``)."""
    extra = {k: str(HERE / str(v)) if str(v).startswith("src/") else str(v)
             for k, v in (recipe.get("env") or {}).items()}
    saved = {k: os.environ.get(k) for k in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def env() -> dict:
    e = dict(os.environ)
    # no MPIR_CVAR_ENABLE_HEAVY_YIELD: the tracer lets waits yield only
    # where ranks outnumber cores, as a real run's spin otherwise
    e.update(MPLBACKEND="Agg", OMP_NUM_THREADS="1",
             OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    # the MPI's own tools (Devito compiles its kernels with the wheel's
    # mpicc), whether or not the caller activated the environment
    e["PATH"] = str(Path(PY).parent) + os.pathsep + e.get("PATH", "")
    return e


# a stage that takes longer has hung (the slowest here takes about 3 minutes)
STAGE_TIMEOUT = 1800


def sh(cmd: list[str], log: Path, timeout: float = STAGE_TIMEOUT, **extra_env: str) -> str:
    """Run a stage (env() plus ``extra_env``); its output goes to ``log``; a
    failure, or ``timeout`` seconds passing, stops with the log's tail (a
    stage that timed out is killed with every process it started)."""
    import signal
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         cwd=ROOT, env={**env(), **extra_env}, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        log.write_text(out)
        raise RuntimeError(f"{' '.join(map(str, cmd))} did not finish in {timeout:.0f} s "
                           f"(log {log}):" + "\n" + out[-3000:]) from None
    log.write_text(out)
    if p.returncode:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {p.returncode} "
                           f"(log {log}):" + "\n" + out[-3000:])
    print(f"    {log.stem:<12s} {time.perf_counter() - t0:6.1f} s", flush=True)
    return out


def fidelity(trace: Path, reps: pd.DataFrame, replay: Path) -> float:
    """Largest |replayed - traced| / traced total computation over representatives."""
    from contracts.trace import load_trace
    ev = load_trace(str(trace), columns=["rank", "comp"]).events
    worst = 0.0
    for r in sorted(set(reps["representative"])):
        traced = ev.loc[ev["rank"] == r, "comp"].sum()
        replayed = read_replayed(str(replay / f"rank{r}.csv"), r)["comp"].sum()
        worst = max(worst, abs(replayed - traced) / traced)
    return worst


def output_line(text: str, pattern: str | None) -> str | None:
    if not pattern:
        return None
    m = re.search(pattern, text)
    return m.group(0) if m else "<missing>"


def same_output(pattern: str, traced: str, untraced: str, replay: Path, reps: list[int]) -> str:
    """The same_output column: "yes" when the recipe's line is the same
    traced, untraced and replayed, else "NO: " and the lines that differ.

    A pattern with ``{rank}`` is checked for every representative R (the
    pattern with R in place of ``{rank}``, in R's own replay output); one
    without it names one rank's line, which a replay can only show if that
    rank is a representative: else the replay side is not compared, and
    the column says so."""
    per_rank = "{rank}" in pattern
    differ = []
    for r in reps if per_rank else [None]:
        pat = pattern.replace("{rank}", str(r)) if per_rank else pattern
        lines = {output_line(traced, pat), output_line(untraced, pat)}
        files = [replay / f"rank{r}.out"] if per_rank else sorted(replay.glob("rank*.out"))
        replayed = "".join(f.read_text() for f in files if f.exists())
        if re.search(pat, replayed) or per_rank:
            lines.add(output_line(replayed, pat))
        elif len(lines) == 1:
            return "yes (traced and untraced; no representative prints it)"
        if len(lines) > 1:
            differ.append(" | ".join(sorted(lines)))
    return "NO: " + " || ".join(differ) if differ else "yes"


def measure_network(one: Path, mpiexec: str = MPIEXEC, options: tuple = (),
                    timeout: float = STAGE_TIMEOUT, ranks: int = 2) -> Path:
    """One ``calibrate measure`` (with ``options``) at ``ranks`` ranks of the
    machine ``mpiexec`` starts on (busy-polling waits, as the real runs
    have) into ``one``, its output beside it (.log)."""
    one.parent.mkdir(parents=True, exist_ok=True)
    sh([mpiexec, "-n", str(ranks), PY, "-m", "calibrate", "measure", *options, "-o", str(one)],
       one.with_suffix(".log"), timeout=timeout, MPIR_CVAR_ENABLE_HEAVY_YIELD="0")
    return one


def host_stages(app: list[str], d: Path, n: int, count_c_calls: bool = False,
                timeout: float = STAGE_TIMEOUT, mpi_env: dict | None = None) -> None:
    """Trace (with the C-level call counter if asked), cluster and record the
    representatives on this machine: d/trace, d/reps.csv, d/msglog;
    ``mpi_env``: the MPI's settings for both runs (its transport)."""
    mpi_env = mpi_env or {}
    sh([MPIEXEC, "-n", str(n), PY, "-m", "instrument", "trace"]
       + (["--count-c-calls"] if count_c_calls else []) + ["-o", str(d / "trace")] + app,
       d / "trace.log", timeout=timeout, **mpi_env)
    sh([PY, "-m", "cluster", str(d / "trace"), "-o", str(d / "reps.csv")], d / "cluster.log")
    sh([MPIEXEC, "-n", str(n), PY, "-m", "instrument", "record", "--reps", str(d / "reps.csv"),
        "-o", str(d / "msglog")] + app, d / "record.log", timeout=timeout, **mpi_env)


# python -m replay's options for every round (a benchmark's command line sets them)
REPLAY_OPTIONS: list[str] = []


def replay_round(app: list[str], d: Path, n: int, k: int,
                 timeout: float = STAGE_TIMEOUT, load: int | None = None,
                 bind: str | None = None) -> None:
    """Round ``k``'s replay of the representatives (d/replay/repeat<k>): each
    as ``load`` (default min(N, cores)) concurrent copies bound to cores,
    the contention of the real run, whose times measure how the node's
    cores and runs vary; ``bind``: replay's --bind-command (an emulated
    node's virtual cores)."""
    load = load or min(n, os.cpu_count() or 1)
    sh([PY, "-m", "replay", "--reps", str(d / "reps.csv"), "--log", str(d / "msglog"),
        "--load", str(load), "-o", str(d / "replay" / f"repeat{k}")]
       + (["--bind-command", bind] if bind else []) + REPLAY_OPTIONS + app,
       d / f"replay{k}.log", timeout=timeout)


def round_variability(d: Path, reps: pd.DataFrame) -> Path | None:
    """d/variability.csv: the representatives' (``reps``, the clustering's
    table) variability over every round's copies (replay.run.
    measure_variability, then replay.expand's gathering); None where the
    rounds were replayed without copies."""
    ranks = sorted(set(reps["representative"]))
    rounds = round_dirs(str(d / "replay"))
    load = copies_in(rounds[0], ranks[0])
    if load < 2:
        return None
    with open(d / "variability.log", "w") as f, contextlib.redirect_stderr(f):
        measure_variability(ranks, str(d / "replay"), rounds, load, copy_cores(load))
        table = gather_variability(reps, str(d / "replay"),
                                   warn=lambda m: print(m, file=sys.stderr))
    path = d / "variability.csv"
    write_variability(table, str(path))
    return path


# replay.expand's options for every round (a benchmark's command line sets them)
EXPAND_OPTIONS: list[str] = []


def expand_round(d: Path, k: int, variability: bool = False) -> Path:
    """Round ``k``'s replays expanded to every rank: d/compute<k>.csv; with
    ``variability``, the representatives' copies' variability measured in
    that round beside it, d/variability<k>.csv."""
    compute = d / f"compute{k}.csv"
    var = ["--variability", str(d / f"variability{k}.csv")] if variability else []
    sh([PY, "-m", "replay.expand", str(d / "trace"), str(d / "reps.csv"),
        str(d / "replay" / f"repeat{k}"), "-o", str(compute)] + var + EXPAND_OPTIONS,
       d / f"expand{k}.log")
    return compute


def fit_platform(measured: list[Path], path: Path, template: Path = PLATFORM,
                 combine="mean", cores: int = 2) -> Path:
    """Fit ``calibrate measure`` files into ``path``: ``template``
    with the fitted call overhead, latency, byte times and curves, eager
    limit, local copy rate, packing rate and collective overheads, each
    point the mean over the files (``combine``: any statistic
    ``calibrate.fit`` takes).

    A shared machine's memory bandwidth and latency drift by tens of per
    cent; measurements taken beside the real runs are the honest target
    description, and their mean per point what the machine's states over
    those minutes cost on average: one measurement alone (5 s) catches
    whatever the machine did in those seconds (the 8-byte one-way time of
    the rounds of one table ranged over 1.9-4.7 us), and this machine's
    small-message latency switches between two levels (about 2.9 and
    4.5-5.5 us), where the median picks one and a run pays a mixture.  The
    template's per-message overheads are part of the fitted one-way time,
    so they come off the latency.  ``cores``: the node's cores (the
    template's 2 describe this development machine)."""
    from calibrate import fit, gbs, into_template
    fitted_plat = fit([str(m) for m in measured], cores_per_node=2, nodes=1, spans=None,
                      eager_limit=None, name="this-machine", combine=combine)
    fitted = fitted_plat["network"]["levels"][0]
    plat = into_template(fitted_plat, yaml.safe_load(template.read_text()))
    plat["cores_per_node"] = cores
    net = plat["network"]
    lv = net["levels"][0]
    path.write_text(yaml.safe_dump(plat, sort_keys=False, default_flow_style=None))
    print(f"    calibrated: {net['call_overhead'] * 1e6:.2f} us per call + one-way "
          f"{fitted['latency'] * 1e6:.2f} us per message, "
          f"{gbs(fitted['byte_time']):.2f} GB/s eager, "
          f"{gbs(lv.get('rendezvous_byte_time', fitted['byte_time'])):.2f} GB/s "
          f"rendezvous" + (f" ({lv['stream'][-1][0]} B streamed every "
                           f"{lv['stream'][-1][1] * 1e6:.0f} us)" if "stream" in lv else "") +
          f", {net['copy_overhead'] * 1e6:.2f} us + "
          f"{net['copy_byte_time'] * 1e9:.3f} ns/B local copy, "
          f"{net['pack_byte_time'] * 1e9:.3f} ns/B packing, " +
          "".join(f"{f} +{t * 1e6:.2f} us, " for f, t in net["collective_overhead"].items()) +
          f"one-sided +{net.get('rma_overhead', 0.0) * 1e6:.2f} us, -> {path}", flush=True)
    return path


def validate_app(name: str, recipe: dict, out: Path, repeats: int,
                 platform: Path | None = PLATFORM, replay_repeats: int = 1,
                 combine: str = "mean", measurements: int | None = None) -> dict:
    """The whole method on one application; returns its row of the table.

    ``platform`` None: measure this machine's network in every round (the
    first ``measurements`` rounds, if given), beside the replays and the
    real runs (OUT/APP/pingpong<k>.csv), and simulate on each point's
    ``combine`` over them (OUT/APP/platform.yaml)."""
    n = int(recipe["ranks"])
    app = app_args(recipe)
    d = out / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    print(f"{name} (N={n}): {' '.join(recipe['app'])}", flush=True)
    try:
        host_stages(app, d, n, count_c_calls=True)
    except RuntimeError:
        fails_untraced(app, n)
        raise
    compare = recipe.get("compare", True)
    platform = target_platform(recipe, platform)
    # rounds, each a replay of every representative, a measurement of the
    # network and a real run, one after the other: this machine drifts by
    # tens of per cent within minutes, and each side keeps its least
    # disturbed round, so both must sample the same minutes
    rounds = max(replay_repeats, repeats)
    runs = []
    for k in range(1, rounds + 1):
        if k <= replay_repeats:
            replay_round(app, d, n, k)
        if platform is None and k <= min(repeats, measurements or repeats):
            measure_network(d / f"pingpong{k}.csv")
        if compare and k <= repeats:
            runs.append(measure(app, n, 1, MPIEXEC, env=env(), log=lambda s: None,
                                timeout=STAGE_TIMEOUT, launcher_options=LAUNCHER)["measured"])
            (d / "runs.json").write_text(json.dumps(runs))      # for --resimulate
            print(f"    run {k}/{repeats}: {runs[-1]:.4f} s", flush=True)
    return predict_app(name, recipe, d, platform, replay_repeats, runs, combine)


def fails_untraced(app: list[str], n: int) -> None:
    """After a host stage failed: raise, saying so, if the application
    fails the same way without the tool (the same command, untraced), so
    that the table blames the application, not a stage."""
    try:
        # under mpi4py's runner an uncaught exception aborts every rank,
        # instead of leaving the others waiting for the one that died
        p = subprocess.run([MPIEXEC, "-n", str(n), PY, "-m", "mpi4py"] + app,
                           capture_output=True, text=True, cwd=ROOT, env=env(),
                           timeout=STAGE_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{UNTRACED} it ran past {STAGE_TIMEOUT} s") from None
    if p.returncode != 0:
        # its own last words, not MPI's note of the abort that followed
        lines = [x for x in (p.stderr + p.stdout).splitlines()
                 if x.strip() and not x.startswith("Abort(")]
        raise RuntimeError(f"{UNTRACED} exit {p.returncode}: "
                           + (lines[-1][:240] if lines else "no output"))


UNTRACED = "the application fails without the tool too (the same command, untraced):"


def target_platform(recipe: dict, platform: Path | None) -> Path | None:
    """The platform an app is simulated on: its recipe's ``platform`` if it
    names one, else ``platform`` (None: fit from the rounds' measurements)."""
    return ROOT / recipe["platform"] if "platform" in recipe else platform


def untraced_output(d: Path, n: int, app: list[str]) -> str:
    """The application's standard output untraced at ``n`` ranks, run once
    per OUT/APP and kept in ``untraced.out`` (a resimulation reuses it)."""
    saved = d / "untraced.out"
    if not saved.exists():
        saved.write_text(subprocess.run([MPIEXEC, "-n", str(n), PY] + app, capture_output=True,
                                        text=True, cwd=ROOT, env=env(),
                                        timeout=STAGE_TIMEOUT).stdout)
    return saved.read_text()


def predict_app(name: str, recipe: dict, d: Path, platform: Path | None, replay_repeats: int,
                runs: list[float], combine: str = "mean") -> dict:
    """From the rounds saved under ``d`` (trace and its output, replays,
    network measurements) and the real runs' seconds ``runs``: fit the
    platform unless one is given (each point's ``combine`` over the
    rounds), expand and simulate each round's replays, and write and
    return the app's row."""
    n = int(recipe["ranks"])
    app = app_args(recipe)
    reps = read_representatives(str(d / "reps.csv"))
    compare = recipe.get("compare", True)
    networks = sorted(d.glob("pingpong*.csv"), key=lambda f: int(f.stem[len("pingpong"):]))
    rounds = max(replay_repeats, len(runs), len(networks))
    # each representative's fastest replay, as the workflow keeps it (for the
    # fidelity column and OUT/APP/compute.csv)
    keep_least_disturbed(sorted(set(reps["representative"])), str(d / "replay"), replay_repeats)
    sh([PY, "-m", "replay.expand", str(d / "trace"), str(d / "reps.csv"), str(d / "replay"),
        "-o", str(d / "compute.csv")], d / "expand.log")
    # one prediction per round: that round's replays on the network measured
    # over all rounds (or the given platform), as a real run is one round's
    # sample of every rank at once
    if platform is None:
        platform = fit_platform(networks, d / "platform.yaml", combine=combine,
                                cores=max(n, os.cpu_count() or 1))
    # each round simulated with the variability measured over all rounds
    # (the model) and without it (every rank at its representative's
    # times), on the same replays
    var = round_variability(d, reps)
    preds, plain, bands = [], [], []
    for k in range(1, rounds + 1):
        compute = d / "compute.csv"
        if k <= replay_repeats:
            compute = expand_round(d, k)
        base = [PY, "-m", "netsim", str(d / "trace"), "--platform", str(platform), "--compute",
                str(compute)]
        sh(base + ["-o", str(d / f"prediction{k}-plain.json")], d / f"simulate{k}-plain.log")
        plain.append(json.loads((d / f"prediction{k}-plain.json").read_text())["predicted_time"])
        if var is not None:
            sh(base + ["--variability", str(var), "-o", str(d / f"prediction{k}.json")],
               d / f"simulate{k}.log")
            p = json.loads((d / f"prediction{k}.json").read_text())
            preds.append(p["predicted_time"])
            bands.append(p["band"])
        else:
            preds.append(plain[-1])
            bands.append([plain[-1], plain[-1]])
    # both sides' typical round: this machine's noise is one-sided (nothing
    # makes a run faster than the machine allows) but bursty, and a side's
    # single fastest round swung a table by tens of per cent (heat-kmeans:
    # one round's replays ran faster than any other round of either side)
    pred = statistics.median(preds)
    print("    predicted per round: " + ", ".join(f"{p:.4f}" for p in preds) + " s"
          + ("" if var is None else "; without variability: "
             + ", ".join(f"{p:.4f}" for p in plain) + " s"), flush=True)
    meta = json.loads((d / "trace" / "meta.json").read_text())
    row = {"app": name, "package": recipe["package"], "N": n, "events": meta["events"],
           "representatives": reps["representative"].nunique(),
           "fidelity": fidelity(d / "trace", reps, d / "replay"), "predicted": pred,
           "measured": float("nan"), "error": float("nan"),
           "invisible": sum(meta.get("invisible_calls", {}).values()),
           "predicted_each": preds, "measured_each": runs,
           # the model off on the same replays, and the median round's band
           "plain": statistics.median(plain), "plain_each": plain,
           "error_plain": float("nan"), "variability": var is not None,
           "band": [statistics.median(b[0] for b in bands),
                    statistics.median(b[1] for b in bands)]}
    pattern = recipe.get("output")
    row["same_output"] = "-"
    if compare and pattern:
        row["same_output"] = same_output(pattern, (d / "trace.log").read_text(),
                                         untraced_output(d, n, app), d / "replay",
                                         sorted(set(reps["representative"])))
    if compare:
        row["measured"] = statistics.median(runs)
        row["error"] = (pred - row["measured"]) / row["measured"]
        row["error_plain"] = (row["plain"] - row["measured"]) / row["measured"]
    (d / "row.json").write_text(json.dumps(row))
    print(f"    predicted {pred:.3f} s, measured {row['measured']:.3f} s, "
          f"error {100 * row['error']:+.1f} %, fidelity {100 * row['fidelity']:.1f} %",
          flush=True)
    return row


def error_interval(predicted: list[float], measured: list[float], level: float = 0.95,
                   draws: int = 10000, seed: int = 0) -> tuple[float, float]:
    """The ``level`` bootstrap interval of the error median(predicted) /
    median(measured) - 1: both sides' rounds resampled with replacement,
    each independently, ``draws`` times (percentile method).  How far the
    error could move had the same rounds come out in other minutes of this
    machine: wider than the goal, the table cannot say whether it is met."""
    import numpy as np
    rng = np.random.default_rng(seed)
    p, m = np.asarray(predicted, float), np.asarray(measured, float)
    bp = np.median(rng.choice(p, (draws, len(p))), axis=1)
    bm = np.median(rng.choice(m, (draws, len(m))), axis=1)
    lo, hi = np.percentile(bp / bm - 1, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


PAGE_REPORTING = Path("/sys/module/page_reporting/parameters/page_reporting_order")
NO_BLOCK = 11           # above the largest block the kernel frees (order 10): none reported


def touch_free_memory(margin: int = 2 << 30, most: int = 16 << 30,
                      chunk: int = 256 << 20) -> None:
    """Write the host's free memory once (all but ``margin`` bytes, at
    most ``most``: more than 64 ranks' runs take, and a minute at most on
    a larger host), then free it: memory the kernel had handed back to the
    hypervisor is backed again before anything is measured (a first touch
    costs 2.7 s a GiB here, a second 0.2 s), and freed pages are the
    first the kernel hands out again.  Only what is free now, so that no
    file cache is evicted."""
    import numpy as np
    free = next(int(line.split()[1]) * 1024 for line in open("/proc/meminfo")
                if line.startswith("MemFree:"))
    count = min(max(0, free - margin), most) // chunk
    t0, held = time.perf_counter(), []
    for _ in range(count):
        held.append(np.ones(chunk, np.uint8))
    del held
    print(f"touched {count * chunk / (1 << 30):.1f} GiB of free memory once "
          f"({time.perf_counter() - t0:.0f} s)", flush=True)


@contextlib.contextmanager
def page_reporting_off(keep: bool):
    """Free page reporting stopped for the benchmark and restored after.
    This host is a virtual machine whose kernel hands blocks of free
    memory back to its hypervisor; a process that touches such memory
    again pays a fault in the hypervisor per page, which the guest counts
    as the process's CPU time, dilated 1/F on a virtual core: runs and
    replays after a pause were 1.2-1.7x slower than right after another
    (bench/probes/host_speed_probe.py); at full speed the same costs a
    tenth of a memory-heavy run.  With reporting stopped, memory once
    touched stays the guest's, and the free memory is touched once right
    after the stop (touch_free_memory): else the first replay or run to
    come pays for it (the extrapolation's first replay at N = 16: one span
    of jacobi's rank 0 took 6.5 s of core time against 1.1 s in the next
    replays, the same 981 page faults).  ``keep``: leave it as it is.
    Needs root (else says so and goes on)."""
    old = PAGE_REPORTING.read_text().strip() if PAGE_REPORTING.exists() else None
    if keep or old is None:
        yield
        return
    try:
        PAGE_REPORTING.write_text(str(NO_BLOCK))
        print(f"free page reporting stopped ({PAGE_REPORTING}: {old} -> {NO_BLOCK}; "
              "restored at the end)", flush=True)
        touch_free_memory()
    except OSError as e:
        print(f"free page reporting left on ({PAGE_REPORTING}: {e.strerror})", flush=True)
        yield
        return
    try:
        yield
    finally:
        PAGE_REPORTING.write_text(old)


def noise_floor(measured: list[float], level: float = 0.95, draws: int = 10000,
                seed: int = 1) -> float:
    """This machine's own noise on an application: the half width of the
    ``level`` bootstrap interval of median(a) / median(b) - 1, a and b both
    resampled from the same untraced runs.  The error a perfect prediction
    would still show; nan with fewer than two runs."""
    import numpy as np
    m = np.asarray(measured, float)
    if len(m) < 2:
        return float("nan")
    rng = np.random.default_rng(seed)
    a = np.median(rng.choice(m, (draws, len(m))), axis=1)
    b = np.median(rng.choice(m, (draws, len(m))), axis=1)
    lo, hi = np.percentile(a / b - 1, [50 * (1 - level), 50 * (1 + level)])
    return float(max(-lo, hi))


GOAL = 0.05            # the mean |error| goal: a floor wider than this cannot show it met


def refusal(failure: str) -> str:
    """A failed stage's reason in one line: that the application fails
    without the tool too (:func:`fails_untraced`), else the first line of
    its output that says ``error:`` (what the stage that could not go on
    said), else the failure's first line."""
    if failure.startswith(UNTRACED):
        return failure.splitlines()[0][:300]
    for line in failure.splitlines():
        if "error: " in line:
            return "refused: " + line.split("error: ", 1)[1].strip()[:300]
    return "failed: " + failure.splitlines()[0][:300] if failure else "failed"


def short_what(recipe: dict) -> str:
    """A recipe's ``what`` up to its first colon, semicolon or parenthesis:
    what the application does, for the table."""
    return re.split(r"[:;(]", recipe.get("what", ""))[0].strip() or "-"


def markdown(df: pd.DataFrame, recipes: dict | None = None) -> str:
    """The table for bench/RESULTS.md, with the summary lines under it;
    ``recipes``: for the column saying what each application does."""
    recipes = recipes or {}
    what = {r: short_what(recipes.get(r, {})) for r in df["app"]}
    lines = ["| app | package | what it does | N | events | reps | replay fidelity | predicted "
             "s: median (rounds) | measured s: median (rounds) | error (95 % interval) | noise "
             "floor | without variability | band holds measured | invisible calls | same "
             "output | outcome |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    wide = []                           # apps whose floor is wider than the goal

    def spread(median, each):
        return f"{median:.3f} ({min(each):.3f}-{max(each):.3f})"
    ci = []                             # the compared apps' intervals
    held = []                           # the band holds the measured median
    refused = df[df["outcome"].notna()] if "outcome" in df else df.iloc[:0]
    df = df.drop(refused.index)
    for r in df.itertuples():
        meas = ("n/a (N > cores)" if r.measured != r.measured
                else spread(r.measured, r.measured_each))
        err, floor = "-", "-"
        if r.error == r.error:
            lo, hi = error_interval(r.predicted_each, r.measured_each)
            ci.append((lo, hi))
            err = f"{100 * r.error:+.1f} % ({100 * lo:+.0f} to {100 * hi:+.0f})"
            f = noise_floor(r.measured_each)
            if f == f:
                floor = f"+-{100 * f:.1f} %"
                if abs(r.error) <= f:
                    err += ", inside the floor"
                if f > GOAL:
                    wide.append(r.app)
        plain = getattr(r, "error_plain", float("nan"))
        plain = "-" if plain != plain or not getattr(r, "variability", False) \
            else f"{100 * plain:+.1f} %"
        band = getattr(r, "band", None)
        inside = "-"
        if isinstance(band, list) and r.measured == r.measured and getattr(r, "variability",
                                                                           False):
            held.append(band[0] <= r.measured <= band[1])
            inside = f"{'yes' if held[-1] else 'no'} ({band[0]:.3f}-{band[1]:.3f})"
        lines.append(f"| {r.app} | {r.package} | {what[r.app]} | {r.N} | {int(r.events)} | "
                     f"{int(r.representatives)} | "
                     f"{100 * r.fidelity:.1f} % | {spread(r.predicted, r.predicted_each)} | "
                     f"{meas} | {err} | {floor} | {plain} | {inside} | {int(r.invisible)} | "
                     f"{r.same_output} | predicted |")
    for r in refused.itertuples():
        lines.append(f"| {r.app} | {r.package} | {what[r.app]} | {r.N} | "
                     + " | ".join(["-"] * 11) + f" | {r.outcome} |")
    e = df["error"].abs().dropna() if "error" in df else pd.Series(dtype=float)
    if len(e):
        lines.append(f"\nCompared: {len(e)} applications; |error| mean {100 * e.mean():.1f} %, "
                     f"max {100 * e.max():.1f} % (goal: mean < 5 %, max < 10 %).")
        if wide:
            # reported apart, not tuned: their error cannot tell the goal met
            narrow = df.loc[~df["app"].isin(wide), "error"].abs().dropna()
            lines.append(f"Noise floor wider than {100 * GOAL:.0f} % (untraced runs against "
                         f"each other) on {len(wide)}: {', '.join(wide)}; without them: "
                         + (f"|error| mean {100 * narrow.mean():.1f} %, max "
                            f"{100 * narrow.max():.1f} % over {len(narrow)}."
                            if len(narrow) else "none left."))
        if "error_plain" in df and "variability" in df:
            ep = df.loc[df["variability"].fillna(False).astype(bool), "error_plain"].abs().dropna()
            if len(ep):
                lines.append(f"Without the variability model, on the same replays: |error| "
                             f"mean {100 * ep.mean():.1f} %, max {100 * ep.max():.1f} %; the "
                             f"5-95 % band holds the measured median in {sum(held)} of "
                             f"{len(held)}.")
        inside = sum(-0.1 < lo and hi < 0.1 for lo, hi in ci)
        lines.append(f"The 95 % intervals (bootstrap over the rounds) are "
                     f"{100 * sum(hi - lo for lo, hi in ci) / len(ci):.0f} points wide on "
                     f"average; {inside} of {len(ci)} lie within +-10 %.")
    return "\n".join(lines)


def resimulate(name: str, recipe: dict, out: Path, platform: Path | None,
               combine: str = "mean") -> dict:
    """:func:`predict_app` again on the rounds an earlier run left under
    OUT/APP (after a change to the model or the fit, or a run that stopped
    after its rounds), without tracing, replaying or running again."""
    d = out / name
    replays = sorted((d / "replay").glob("repeat[0-9]*"))
    if not replays:
        raise RuntimeError(f"{d}: no rounds to resimulate (replay/repeat<k>/ missing)")
    runs = json.loads((d / "runs.json").read_text()) if (d / "runs.json").exists() else []
    if recipe.get("compare", True) and not runs:
        raise RuntimeError(f"{d / 'runs.json'}: missing; the real runs' seconds are needed")
    print(f"{name}: resimulating {len(replays)} rounds from {d}", flush=True)
    return predict_app(name, recipe, d, target_platform(recipe, platform), len(replays), runs,
                       combine)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--apps", help="comma-separated recipe names (default: all)")
    ap.add_argument("--recipes", default=str(HERE / "recipes.yaml"),
                    help="the recipes file (default bench/apps/recipes.yaml; "
                         "bench/apps/examples.yaml: the repository's examples)")
    ap.add_argument("--ranks", type=int,
                    help="N for every app instead of its recipe's (compared with real runs "
                         "where N fits this machine's cores)")
    ap.add_argument("--repeats", type=int, default=9,
                    help="rounds per app, each a replay, a network measurement and a real "
                         "run (the median prediction and the median run are compared)")
    ap.add_argument("--replay-repeats", type=int,
                    help="replays per representative (default: --repeats, like for like "
                         "with the real runs)")
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--markdown", action="store_true", help="print the table as markdown")
    ap.add_argument("--no-calibrate", action="store_true",
                    help="simulate on config/platforms/this-machine.yaml as it is, instead of "
                         "re-measuring its latency and bandwidth first")
    ap.add_argument("--combine", choices=("mean", "median", "min"), default="mean",
                    help="each network point's statistic over the rounds (default mean: "
                         "what the machine's states cost on average)")
    ap.add_argument("--resimulate", action="store_true",
                    help="fit, expand and simulate again from the rounds saved under OUT "
                         "(no tracing, replaying or real runs): after a change to the model, "
                         "or a run that stopped after its rounds; saved real runs are "
                         "compared even where N exceeds this machine's cores)")
    ap.add_argument("--calibrate-once", action="store_true",
                    help="measure the network in the first round only (a dedicated node's "
                         "shared memory does not drift as this machine's does)")
    ap.add_argument("--table", action="store_true",
                    help="print the table of the results saved under OUT and stop (nothing "
                         "is run)")
    ap.add_argument("--keep-page-reporting", action="store_true",
                    help="leave the kernel's free page reporting on (by default, as root, it "
                         "is stopped while the rounds run and restored: page_reporting_off)")
    ap.add_argument("--bind", action="store_true",
                    help="bind each rank of the real runs to a core (MPICH's -bind-to core), "
                         "as the replays bind each copy")
    a = ap.parse_args(argv)
    global LAUNCHER
    LAUNCHER = ("-bind-to", "core") if a.bind else ()
    recipes = load_recipes(a.recipes)
    if a.ranks:
        for name, r in recipes.items():
            r["ranks"] = a.ranks
            # saved real runs compare wherever they were measured (a larger
            # machine's rounds resimulated here)
            saved = a.resimulate and (Path(a.out) / name / "runs.json").exists()
            r["compare"] = a.ranks <= (os.cpu_count() or 1) or saved
            if r["compare"]:
                r.pop("platform", None)     # this machine is the target
    names = a.apps.split(",") if a.apps else list(recipes)
    unknown = [x for x in names if x not in recipes]
    if unknown:
        ap.error(f"unknown app(s) {unknown}; recipes: {', '.join(recipes)}")
    out = Path(a.out)
    platform = PLATFORM if a.no_calibrate else None
    failed = []
    with page_reporting_off(a.keep_page_reporting or a.table or a.resimulate):
        for name in names if not a.table else []:
            try:
                with app_environment(recipes[name]):
                    if a.resimulate:
                        resimulate(name, recipes[name], out, platform, a.combine)
                    else:
                        validate_app(name, recipes[name], out, a.repeats, platform,
                                     a.replay_repeats or a.repeats, a.combine,
                                     1 if a.calibrate_once else None)
            except RuntimeError as e:
                print(f"{name}: FAILED: {e}", file=sys.stderr, flush=True)
                failed.append(name)
                if not a.resimulate:              # the table shows why, in the stage's words
                    recipe = recipes[name]
                    (out / name).mkdir(parents=True, exist_ok=True)
                    (out / name / "row.json").write_text(json.dumps(
                        {"app": name, "package": recipe["package"], "N": int(recipe["ranks"]),
                         "outcome": refusal(str(e))}))
    # the table: every app with a result under OUT, in recipe order (runs of
    # subsets accumulate)
    saved = [json.loads((out / n / "row.json").read_text()) for n in recipes
             if (out / n / "row.json").exists()]
    df = pd.DataFrame(saved)
    if len(df):
        df.to_csv(out / "results.csv", index=False)
        print(markdown(df, recipes) if a.markdown else df.to_string(index=False))
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
