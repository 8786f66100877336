"""Validation above N=2 on this machine: an emulated cluster of virtual cores.

    python bench/virtual_cores.py check [--out DIR] [--markdown]
    python bench/virtual_cores.py extrapolate --recipes bench/apps/virtual_extrapolate.yaml
                                        --ranks 64 [--small "16 32"] [--rounds 3]
    python bench/virtual_cores.py table [--ranks "8 16"] [--apps jacobi,cg]
                                        [--recipes FILE] [--rounds 5]
                                        [--cores-per-node 2] [--rate 10gbit]
                                        [--budget S] [--replay-copies all|node]
                                        [--copies in-step|free] [--replay-again]
                                        [--out DIR] [--markdown]

Both run isolated (a private network and mount namespace, python -m
emulate's own) and need root and the cgroup v1 cpu controller.

``check``, the emulator as an instrument before it is used as truth:

- dilation: a CPU-bound kernel (bench/probes/vcore_kernel.py) on 1, 2,
  4, 8, 16 and 32 concurrent virtual cores of one share, and alone on
  cores of other shares, against the same kernel alone on a free core,
  interleaved: seconds x F / free seconds, which is 1 for a perfect
  emulation (goal: within 2 %);
- quantisation: two ranks looping over {work, Barrier} and {work, 8-byte
  ping-pong} on virtual cores against the same on real cores over the
  same emulated links: the time per iteration beyond 1/F times the real
  one, i.e. what the quota's periods add per synchronisation, for shares
  and periods side by side.

``table``, the whole method against a real run at N on virtual cores: for
each N, a cluster of N / C nodes of C cores (``--cores-per-node``) at a
share F = 0.8 x CPUs / N of a CPU each (N = 16 on 2 CPUs: 0.1), links of
``--rate``.  Per application (bench/apps/examples.yaml's, or
``--recipes``): trace, cluster and record on the host (plain mpiexec,
oversubscribed: only the communication and the page faults per span are
taken from there; with the cluster's MPI transport, HOST_MPI); then
``--rounds`` rounds of a replay of the representatives (N copies, one
on each virtual core, replay --bind-command; ``--replay-copies node``:
C copies on node 0's cores only), and a real run on the cluster (python -m validate's
clock: MPI initialisation to the end); one network measurement
(``calibrate measure`` at C + 1 ranks: a peer on the node and one across)
fitted to C cores x N / C nodes, each level then shifted (calibrate fit --peers) to its median
pair among every pair's small-message ping-pongs
(``--network-peers all``, the default; saved as peers1.csv): on virtual
cores a pair's latency is set by the phases of its two cores' quota
periods, 0.02 to 5 ms one way at F = 0.1 and not even steady within a
cluster (peer 2 took 5.0 ms in one measurement, 0.02 ms in the next, three
minutes later), so one pair can price a whole level at a value few
pairs see.  Each round's replays are expanded and
simulated with the variability model and without it, exactly as
bench/apps/run.py does for this machine, and the same table is printed
(error, 95 % interval, the untraced runs' own noise floor, the band),
and under it each application's quantisation share: how much round 1's
prediction (without variability) grows when every level's latency takes
half a quota period more, the most a step that waits for another core
can lose on virtual cores beyond what the fitted latency says
(bench/probes/vcore_pairs_probe.py: a chain's step takes a whole
period where a ping-pong says half).  Applications whose share exceeds
``QUANTISED`` are bound by the instrument's quantisation, not by what
the method predicts: the goal's figures are given without them too.
Why a copy on every core: on a real cluster a node computes alike
whatever the other nodes do, so one node's replay stands for all; here
every emulated node runs on the same two CPUs, whose caches and memory
all N ranks share.  Replayed on node 0's two cores alone, uneven's
slowest class computed 5.5-6.2 s at N = 16 where the real run's took
7.5 s and more (its trace, all ranks on the host at once: 7.3-7.8 s).
``extrapolate``, trace extrapolation against a real run beyond the traced
N: for each N of ``--ranks`` (64), a cluster of N virtual cores; per
application (bench/apps/virtual_extrapolate.yaml) traces at the small N
(``--small`` or the recipe's ``small``: 16 and 32), each recorded and its
representatives replayed on the cluster's cores (the target's
computation at the small N; one replay at the first small N unkept
before), ``python -m extrapolate --compute`` to N
with the largest small N's copies' variability (``--variability``),
one network measurement per cluster (messages up to 64 KiB) fitted,
each level at its median pair as above (rank 0's ping-pongs with every
pair to 8 bytes), netsim with the classes'
variability and without, against ``--rounds`` real runs at N: OUT/X<N>/.
Every command stops the kernel's free page reporting while it runs (and
restores it; ``--keep-page-reporting`` leaves it) and writes the free
memory once: on a virtual machine that hands free memory back to its
hypervisor, a run touching it again pays a hypervisor fault per page as
its own CPU time, dilated 1/F.
``--copies`` (replay's): each representative's copies held in step at
the run's waiting calls (in-step, the default) or free running;
``--replay-again`` replays every saved round again (the first replays
kept as replay-before) and predicts against the same runs.
``--budget S`` starts no application after S seconds; ``--predict-only``
predicts again from what an earlier table saved under ``--out`` (after a
change to the model or the fit; with ``--no-fault-charge``, the same
replays expanded without the page faults' charge).  Writes
OUT/N<N>/<app>/... and OUT/N<N>/results.csv; OUT/TABLES.md collects the
markdown.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE / "apps")]
from run import (  # noqa: E402
    EXPAND_OPTIONS,
    MPIEXEC,
    PY,
    REPLAY_OPTIONS,
    app_args,
    app_environment,
    env,
    error_interval,
    expand_round,
    host_stages,
    load_recipes,
    markdown,
    measure_network,
    noise_floor,
    page_reporting_off,
    predict_app,
    refusal,
    replay_round,
    sh,
)

from emulate import Cluster, down, up  # noqa: E402
from emulate.__main__ import parse_rate  # noqa: E402
from emulate.cores import MAX_LOAD, period_us, unavailable  # noqa: E402
from emulate.isolate import MARK, enter, isolated  # noqa: E402
from emulate.launch import TRANSPORT  # noqa: E402
from netsim.collectives import FOR_OP  # noqa: E402
from validate import measure  # noqa: E402

KERNEL = HERE / "probes" / "vcore_kernel.py"
# The host's trace and record run the cluster's MPI transport (libfabric's
# TCP provider, no shared memory) over loopback: what the MPI allocates in
# its calls shapes the application's heap, and with it the page faults the
# replay charges (replay.expand.fault_charge); uneven's real runs fault
# 20,000 pages every other iteration over TCP, none over shared memory
HOST_MPI = {**TRANSPORT, "FI_TCP_IFACE": "lo"}
CPUS = len(os.sched_getaffinity(0))
TIMEOUT = 1800


def share_for(n: int) -> float:
    """The share of a CPU each of ``n`` virtual cores gets: 80 % of the
    machine's CPUs spread over them (room for hydra and the kernel)."""
    return round(0.8 * CPUS / n, 4)


def kernel(mpiexec: str, ranks: int, *args: str, cpu: bool = False) -> list:
    """Every rank's seconds of one vcore_kernel.py run (``cpu``: pairs of
    wall and CPU seconds)."""
    p = subprocess.run([mpiexec, "-n", str(ranks), PY, str(KERNEL), *args], capture_output=True,
                       text=True, timeout=TIMEOUT, env={**env(), "MPIR_CVAR_ENABLE_HEAVY_YIELD":
                                                       "0"})
    if p.returncode:
        raise RuntimeError(f"vcore_kernel.py {' '.join(args)} at {ranks}: {p.stderr[-1500:]}")
    rows = json.loads([line for line in p.stdout.splitlines() if line.startswith("[")][-1])
    rows = sorted(rows, key=lambda r: r["rank"])
    return [(r["seconds"], r["cpu"]) for r in rows] if cpu else [r["seconds"] for r in rows]


def free(*args: str) -> float:
    """The kernel's CPU seconds alone on a free core of this machine (its
    wall seconds there, less what a neighbour took)."""
    return kernel(MPIEXEC, 1, *args, cpu=True)[0][1]


def dilation(rounds: int, loops: int) -> list[dict]:
    """Rows of the dilation check: share, concurrent cores, and three
    ratios (median and range over ranks and rounds): ``quota``, wall
    seconds x F / CPU seconds on the virtual core (the quota's own
    exactness); ``speed``, those CPU seconds / the free core's (what
    running in bursts costs the work: caches, the CPU's clock); and
    ``total``, seconds x F / the free core's seconds, their product."""
    rows = []
    plan = [(0.05, [1, 2, 4, 8, 16, 32])] + [(f, [1]) for f in (0.1, 0.2, 0.4)]
    for share, counts in plan:
        c = up(Cluster("vck", max(counts), 1, 1e10, core_share=share), log=lambda s: None,
               owner=str(os.getpid()))
        try:
            for m in counts:
                quota, speed, total = [], [], []
                for _ in range(rounds):
                    ref = free("kernel", "--loops", str(loops))
                    for t, u in kernel(c.mpiexec, m, "kernel", "--loops", str(loops),
                                       cpu=True):
                        quota.append(t * share / u)
                        speed.append(u / ref)
                        total.append(t * share / ref)
                row = {"share": share, "cores": m, "samples": len(total)}
                for key, v in (("quota", quota), ("speed", speed), ("total", total)):
                    row.update({key: statistics.median(v), f"{key}_lo": min(v),
                                f"{key}_hi": max(v)})
                rows.append(row)
                print(f"dilation: F={share:g} x {m} cores: " + ", ".join(
                    f"{key} {row[key]:.4f} ({row[key + '_lo']:.4f}-{row[key + '_hi']:.4f})"
                    for key in ("quota", "speed", "total")), flush=True)
        finally:
            down(c.name, log=lambda s: None)
    return rows


def quantisation(loops: int, iters: int, rounds: int = 3) -> list[dict]:
    """Rows of the quantisation check: share, period, op, and the time per
    iteration that virtual cores add beyond dilation.  Two ranks on two
    nodes loop over {work, synchronisation} (Barrier, or an 8-byte
    ping-pong) on real cores (an emulated cluster without a share: the
    same TCP links) and on virtual cores of share F, interleaved; a
    perfect emulation takes 1/F times the real cores' time per
    iteration, and what it takes beyond that, in the virtual cores' own
    time, is what the quota's periods add per synchronisation.  ``uneven``:
    a Barrier where one rank worked a third as long and waits (spinning
    in MPI, on its own quota) for the other."""
    rows = []
    real = up(Cluster("vcr", 2, 1, 1e10), log=lambda s: None, owner=str(os.getpid()))
    try:
        for share, period in ((0.1, None), (0.2, None), (0.2, 5000), (0.4, None),
                              (0.4, 2500)):
            c = up(Cluster("vcq", 2, 1, 1e10, core_share=share, core_period=period),
                   log=lambda s: None, owner=str(os.getpid()))
            try:
                for op in ("barrier", "pingpong", "uneven"):
                    args = ("sync", "--loops", str(loops), "--iters", str(iters), "--op", op)
                    ref, each = [], []
                    for _ in range(rounds):
                        ref.append(max(kernel(real.mpiexec, 2, *args)))
                        each.append(max(kernel(c.mpiexec, 2, *args)))
                    t_real, t_virtual = statistics.median(ref), statistics.median(each)
                    added = t_virtual - t_real / share
                    rows.append({"share": share, "period_ms": (c.core_period or 0) / 1000,
                                 "op": op, "real_ms": 1e3 * t_real,
                                 "virtual_ms": 1e3 * t_virtual, "added_ms": 1e3 * added,
                                 "added_share": added / (t_real / share)})
                    r = rows[-1]
                    print(f"quantisation: F={share:g}, period {r['period_ms']:g} ms, {op}: "
                          f"{r['real_ms']:.3f} ms per iteration on real cores, "
                          f"{r['virtual_ms']:.2f} ms on virtual ones, {r['added_ms']:+.3f} "
                          f"ms beyond 1/F ({100 * r['added_share']:+.1f} %)", flush=True)
            finally:
                down(c.name, log=lambda s: None)
    finally:
        down(real.name, log=lambda s: None)
    return rows


def check_markdown(dil: list[dict], quant: list[dict]) -> str:
    def cell(r, key):
        return f"{r[key]:.3f} ({r[key + '_lo']:.3f}-{r[key + '_hi']:.3f})"
    out = []
    if dil:                                     # none with --no-dilation
        out = ["| share F | concurrent virtual cores | wall x F / CPU (the quota) | CPU / free "
               "CPU (the work's speed) | wall x F / free (dilation) |", "|---|---|---|---|---|"]
        out += [f"| {r['share']:g} | {r['cores']} | {cell(r, 'quota')} | {cell(r, 'speed')} | "
                f"{cell(r, 'total')} |" for r in dil] + [""]
    out += ["| share F | period ms | sync | ms per iteration, real cores | on virtual "
            "cores | added beyond 1/F, ms | of the iteration |", "|---|---|---|---|---|---|---|"]
    out += [f"| {r['share']:g} | {r['period_ms']:g} | {r['op']} | {r['real_ms']:.3f} | "
            f"{r['virtual_ms']:.2f} | {r['added_ms']:+.3f} | {100 * r['added_share']:+.1f} % |"
            for r in quant]
    return "\n".join(out)


def network_of(recipe: dict, d: Path, c: Cluster, spacing: float) -> Path:
    """``calibrate measure`` on cluster ``c`` into d/pingpong1.csv: messages
    to 256 KiB unless the recipe sends larger ones (``max_bytes``; netsim
    warns where they go beyond the measured curves), each timed after
    ``spacing`` seconds of work (0: back to back)."""
    most = int(recipe.get("max_bytes", 1 << 18))
    options = ("--repeats", "3", "--max-bytes", str(most)) + \
        (("--spacing", f"{spacing:g}") if spacing else ())
    return measure_network(d / "pingpong1.csv", c.mpiexec, options, timeout=TIMEOUT,
                           ranks=min(int(recipe["ranks"]), c.cores_per_node + 1))


def peers_of(d: Path, c: Cluster, most: int = 128) -> Path:
    """Every pair's small-message ping-pongs on the cluster (``calibrate
    measure --only-pingpongs`` on all ranks, messages to ``most`` bytes)
    into d/peers1.csv: on virtual cores each pair's latency is set by the
    cores' quota phases (bench/probes/vcore_pairs_probe.py), and the one
    pair per level of network_of may be atypical."""
    return measure_network(d / "peers1.csv", c.mpiexec, ("--repeats", "3", "--max-bytes",
                                                        str(most), "--only-pingpongs"),
                           timeout=TIMEOUT, ranks=c.nodes * c.cores_per_node)


def network_again(name: str, recipe: dict, d: Path, c: Cluster, spacing: float) -> dict:
    """The network measured again for the runs saved in ``d`` (the first
    measurement kept as before-pingpong1.csv, and its cluster's pairs,
    peers1.csv, set aside as before-peers1.csv: they priced the old
    measurement's levels), then predicted again: what a
    change to the measurement changes, without tracing, replaying and
    running again.  On a cluster brought up anew, whose pairs' latencies
    may differ from those the runs met (each set by the cores' quota
    phases: bench/probes/vcore_latency.sh)."""
    if not (d / "runs.json").exists():
        raise RuntimeError(f"{d}: no saved runs to predict again")
    print(f"{name}: the network again on {c.nodes} x {c.cores_per_node} virtual cores "
          f"(spacing {spacing:g} s)", flush=True)
    for first in ("pingpong1.csv", "peers1.csv"):
        if (d / first).exists() and not (d / f"before-{first}").exists():
            os.replace(d / first, d / f"before-{first}")
    network_of(recipe, d, c, spacing)
    return predict_saved(name, recipe, d, c.nodes, c.cores_per_node, c.core_share)


def replay_again(name: str, recipe: dict, d: Path, c: Cluster, copies: int) -> dict:
    """Every round's replay made again for the runs saved in ``d`` (the
    first replays kept as d/replay-before), then predicted again: what a
    change to the replay (``--copies free`` against in-step) changes
    against the same real runs and network measurement."""
    if not (d / "runs.json").exists():
        raise RuntimeError(f"{d}: no saved runs to predict again")
    rounds = len(json.loads((d / "runs.json").read_text()))
    print(f"{name}: the replays again on {c.nodes} x {c.cores_per_node} virtual cores "
          f"({' '.join(REPLAY_OPTIONS) or 'default options'})", flush=True)
    if not (d / "replay-before").exists():
        os.replace(d / "replay", d / "replay-before")
    shutil.rmtree(d / "replay", ignore_errors=True)
    app = app_args(recipe)
    n = int(recipe["ranks"])
    warm_up(app, n, c)
    for k in range(1, rounds + 1):
        replay_round(app, d, n, k, timeout=TIMEOUT, load=copies, bind=c.core)
    return predict_saved(name, recipe, d, c.nodes, c.cores_per_node, c.core_share,
                         (d / "peers1.csv").exists())


def validate_on_cluster(name: str, recipe: dict, d: Path, c: Cluster, rounds: int,
                        copies: int, spacing: float = 0.0, peers: bool = False) -> dict:
    """The whole method for one application against cluster ``c``; its row.
    ``copies``: concurrent replay copies per representative, on the
    cluster's virtual cores 0 ... copies - 1; ``spacing``: the network
    measurement's (network_of)."""
    n = int(recipe["ranks"])
    app = app_args(recipe)
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    print(f"{name} (N={n}, {c.nodes} x {c.cores_per_node} virtual cores of "
          f"{c.core_share:g}): {' '.join(recipe['app'])}", flush=True)
    host_stages(app, d, n, count_c_calls=True, timeout=TIMEOUT, mpi_env=HOST_MPI)
    warm_up(app, n, c)
    runs = []
    for k in range(1, rounds + 1):
        replay_round(app, d, n, k, timeout=TIMEOUT, load=copies, bind=c.core)
        if k == 1:
            network_of(recipe, d, c, spacing)
            if peers:
                peers_of(d, c)
        runs.append(measure(app, n, 1, c.mpiexec, env=env(), log=lambda s: None,
                            timeout=TIMEOUT)["measured"])
        (d / "runs.json").write_text(json.dumps(runs))
        print(f"    run {k}/{rounds}: {runs[-1]:.4f} s", flush=True)
    return predict_saved(name, recipe, d, c.nodes, c.cores_per_node, c.core_share, peers)


def warm_up(app: list, n: int, c: Cluster) -> None:
    """One real run on the cluster, not kept: the first run touches memory
    the host may not have touched for a while (page_reporting_off); cg's
    and jacobi's took 1.4-1.7x their next ones at N = 16."""
    s = measure(app, n, 1, c.mpiexec, env=env(), log=lambda s: None, timeout=TIMEOUT)
    print(f"    warm-up run: {s['measured']:.4f} s (not kept)", flush=True)


def replayed_total(round_dir: Path) -> float:
    """The mean over a replay round's copies of a representative's total
    computation (seconds; the first representative's copies)."""
    first = sorted(round_dir.glob("rank*.csv"))[0].name
    files = [round_dir / first, *sorted((round_dir / "copies").glob(f"copy*/{first}"))]
    return statistics.mean(float(pd.read_csv(f)["comp"].sum()) for f in files)


def warm_up_replay(app: list, d: Path, k: int, n: int, c: Cluster) -> None:
    """One replay round at the first small N, not kept (d/warm-up-replay):
    an application's first replay on the cluster is slower than the next,
    even with the free memory written (12-01: jacobi 16.4 against 11.9 s
    of computation a copy, cg 17.8 against 14.3, numba-halo 209.8 against
    205.8), and the fit over the small N read that as a steeper fall
    (numba-halo's replays, the same work at 16 and 32, had come out 277
    and 259 s a copy, 258 and 250, 238 and 215: the first always the
    slower)."""
    replay_round(app, d, k, 1, timeout=TIMEOUT, load=n, bind=c.core)
    os.replace(d / "replay" / "repeat1", d / "warm-up-replay")
    print(f"    warm-up replay at N={k}: {replayed_total(d / 'warm-up-replay'):.3f} s of "
          f"computation a copy (not kept)", flush=True)


# the platform's collectives besides the fit's (--alltoall)
COLLECTIVES: dict = {}
# fit with rank 0's pairs of peers1.csv alone (--network-peers rank0)
RANK0_PAIRS = False


def fit_network(d: Path, nodes: int, cpn: int, peers: bool) -> None:
    """d/platform.yaml fitted to d/pingpong1.csv, each level at its median
    pair where ``peers`` and d/peers1.csv is there (calibrate fit --peers:
    on virtual cores a pair's latency is set by its cores' quota phases),
    with the algorithms of ``COLLECTIVES``."""
    typical = ("--peers", str(d / "peers1.csv")) if peers and (d / "peers1.csv").exists() else ()
    if typical and RANK0_PAIRS:
        pairs = pd.read_csv(d / "peers1.csv")
        if "rank" in pairs.columns:
            pairs[pairs["rank"] == 0].drop(columns="rank").to_csv(d / "peers1-rank0.csv",
                                                                  index=False)
            typical = ("--peers", str(d / "peers1-rank0.csv"))
    sh([PY, "-m", "calibrate", "fit", str(d / "pingpong1.csv"), "--cores-per-node", str(cpn),
        "--nodes", str(nodes), "--name", "virtual-cores", *typical,
        "-o", str(d / "platform.yaml")], d / "fit.log")
    if COLLECTIVES:
        plat = yaml.safe_load((d / "platform.yaml").read_text())
        plat.setdefault("collectives", {}).update(COLLECTIVES)
        (d / "platform.yaml").write_text(yaml.safe_dump(plat, sort_keys=False))
    for line in (d / "fit.log").read_text().splitlines():
        if typical and line.startswith("calibrate: ") and "median of" in line:
            print(f"    typical pair: {line.removeprefix('calibrate: ')}", flush=True)


# a quantisation share above which an application's error on virtual cores
# is the instrument's more than the method's (quantisation_share)
QUANTISED = 0.05


def quantisation_share(d: Path, share: float) -> float:
    """How much round 1's prediction without variability (saved in ``d``)
    grows when every level's latency and one-way curve of d/platform.yaml
    take half a quota period more (cores of ``share``): the part of the
    predicted time that is steps waiting for another core, each of which
    can cost up to half a period more on virtual cores than the fitted
    latency says."""
    half = period_us(share) / 2e6
    plat = yaml.safe_load((d / "platform.yaml").read_text())
    for lv in plat["network"]["levels"]:
        lv["latency"] += half
        if "one_way" in lv:
            lv["one_way"] = [[n, t + half] for n, t in lv["one_way"]]
    slow = d / "platform-quantised.yaml"
    slow.write_text(yaml.safe_dump(plat, sort_keys=False))
    sh([PY, "-m", "netsim", str(d / "trace"), "--platform", str(slow), "--compute",
        str(d / "compute1.csv"), "-o", str(d / "prediction1-quantised.json")],
       d / "simulate1-quantised.log")
    moved = json.loads((d / "prediction1-quantised.json").read_text())["predicted_time"]
    return moved / json.loads((d / "prediction1-plain.json").read_text())["predicted_time"] - 1


def quantisation_lines(df: pd.DataFrame) -> str:
    """Each application's quantisation share, and the goal's figures over
    those at most QUANTISED (the table's other lines count them all)."""
    if "quantisation" not in df:
        return ""
    df = df.dropna(subset=["quantisation"])
    each = ", ".join(f"{r.app} {100 * r.quantisation:+.1f} %" for r in df.itertuples())
    fine = df[df["quantisation"] <= QUANTISED]
    e = fine["error"].abs().dropna()
    ep = fine["error_plain"].abs().dropna() if "error_plain" in fine else e.iloc[:0]
    out = (f"\nQuantisation share (round 1's prediction with every latency half a quota "
           f"period longer): {each}.  ")
    if len(e):
        out += (f"Within {100 * QUANTISED:.0f} %: {len(e)} applications, |error| mean "
                f"{100 * e.mean():.1f} %, max {100 * e.max():.1f} %"
                + (f" (without variability {100 * ep.mean():.1f} / {100 * ep.max():.1f} %)"
                   if len(ep) else "") + ".")
    else:
        out += f"None within {100 * QUANTISED:.0f} %."
    return out


def predict_saved(name: str, recipe: dict, d: Path, nodes: int, cpn: int, share: float,
                  peers: bool = False) -> dict:
    """An application's row from what validate_on_cluster saved in ``d``
    (its replays, network measurement and real runs): the platform fitted
    to the measurement, then the predictions against the runs.  The table
    ends every measurement with it, and ``--predict-only`` calls it alone
    after a change to the model or the fit, without measuring again."""
    runs = json.loads((d / "runs.json").read_text())
    fit_network(d, nodes, cpn, peers)
    row = predict_app(name, recipe, d, d / "platform.yaml", len(runs), runs)
    row.update(share=share, nodes=nodes, cores_per_node=cpn,
               quantisation=quantisation_share(d, share))
    print(f"    quantisation share {100 * row['quantisation']:+.1f} %", flush=True)
    (d / "row.json").write_text(json.dumps(row))
    return row


def extrapolated_on_cluster(name: str, recipe: dict, d: Path, c: Cluster, small: list[int],
                            rounds: int, network: Path, peers: bool = False) -> dict:
    """An application's trace extrapolated from the ``small`` N to the
    cluster's N, against real runs at N there; its row.  At each small N:
    trace, cluster and record on the host, replay the representatives on
    the cluster's virtual cores (a copy on every core, as the table does;
    at the first, one replay unkept before: warm_up_replay), expand; then
    python -m extrapolate --compute from those traces and tables, the
    cluster's ``network`` measurement fitted (each level at its median
    pair where ``peers``: the peers1.csv beside it), the prediction with
    the classes' variability, and ``rounds`` real runs at N."""
    n = c.nodes * c.cores_per_node
    app = app_args(recipe)
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    print(f"{name} (from N={'/'.join(map(str, small))} to {n}, {c.nodes} x "
          f"{c.cores_per_node} virtual cores of {c.core_share:g}): {' '.join(recipe['app'])}",
          flush=True)
    traces, computes = [], []
    for k in small:
        dk = d / f"N{k}"
        dk.mkdir()
        host_stages(app, dk, k, timeout=TIMEOUT, mpi_env=HOST_MPI)
        if k == small[0]:
            warm_up_replay(app, dk, k, n, c)
        replay_round(app, dk, k, 1, timeout=TIMEOUT, load=n, bind=c.core)
        print(f"    replay at N={k}: {replayed_total(dk / 'replay' / 'repeat1'):.3f} s of "
              f"computation a copy", flush=True)
        traces.append(str(dk / "trace"))
        computes.append(str(expand_round(dk, 1, variability=True)))
    # each class samples its representative's copies at the largest small N
    sh([PY, "-m", "extrapolate", *traces, "--ranks", str(n), "-o", str(d / "trace"), "--force",
        "--compute", *computes, "--variability", str(d / f"N{small[-1]}" / "variability1.csv")],
       d / "extrapolate.log")
    shutil.copy(network, d / "pingpong1.csv")
    if peers and (network.parent / "peers1.csv").exists():
        shutil.copy(network.parent / "peers1.csv", d / "peers1.csv")
    runs = []
    for k in range(1, rounds + 1):
        runs.append(measure(app, n, 1, c.mpiexec, env=env(), log=lambda s: None,
                            timeout=TIMEOUT)["measured"])
        (d / "runs.json").write_text(json.dumps(runs))
        print(f"    run {k}/{rounds}: {runs[-1]:.4f} s", flush=True)
    return predict_extrapolated(name, recipe, d, small, c.nodes, c.cores_per_node,
                                c.core_share, peers)


def predict_extrapolated(name: str, recipe: dict, d: Path, small: list[int], nodes: int,
                         cpn: int, share: float, peers: bool = False) -> dict:
    """The row of an extrapolation saved in ``d``: the fitted platform
    (each level at its median pair where ``peers``), netsim on the
    extrapolated trace with the classes' variability and without, against
    the real runs' median."""
    runs = json.loads((d / "runs.json").read_text())
    fit_network(d, nodes, cpn, peers)
    base = [PY, "-m", "netsim", str(d / "trace"), "--platform", str(d / "platform.yaml")]
    sh(base + ["--class-variability", "-o", str(d / "prediction.json")], d / "simulate.log")
    sh(base + ["-o", str(d / "prediction-plain.json")], d / "simulate-plain.log")
    p = json.loads((d / "prediction.json").read_text())
    plain = json.loads((d / "prediction-plain.json").read_text())["predicted_time"]
    measured = statistics.median(runs)
    lo, hi = error_interval([p["predicted_time"]], runs)
    row = {"app": name, "package": recipe["package"], "from": "/".join(map(str, small)),
           "N": nodes * cpn, "share": share, "predicted": p["predicted_time"],
           "band": p["band"], "plain": plain, "measured": measured, "measured_each": runs,
           "error": p["predicted_time"] / measured - 1, "error_low": lo, "error_high": hi,
           "error_plain": plain / measured - 1, "noise_floor": noise_floor(runs),
           "band_holds": p["band"][0] <= measured <= p["band"][1]}
    (d / "row.json").write_text(json.dumps(row))
    print(f"    predicted {row['predicted']:.3f} s (band {row['band'][0]:.3f}-"
          f"{row['band'][1]:.3f}), measured {measured:.3f} s, error "
          f"{100 * row['error']:+.1f} %", flush=True)
    return row


def extrapolation_markdown(rows: list[dict]) -> str:
    """The extrapolation rows as a markdown table."""
    head = ("| app | package | from N | to N | predicted s (band) | without variability | "
            "measured s: median (rounds) | error (95 % interval) | noise floor | band holds "
            "measured |\n|---|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        if "predicted" not in r:
            lines.append(f"| {r['app']} | {r['package']} | {r['from']} | {r['N']} | "
                         f"{r['outcome']} | | | | | |")
            continue
        each = ", ".join(f"{x:.3f}" for x in r["measured_each"])
        lines.append(
            f"| {r['app']} | {r['package']} | {r['from']} | {r['N']} | {r['predicted']:.3f} "
            f"({r['band'][0]:.3f}-{r['band'][1]:.3f}) | {100 * r['error_plain']:+.1f} % | "
            f"{r['measured']:.3f} ({each}) | {100 * r['error']:+.1f} % "
            f"({100 * r['error_low']:+.0f} to {100 * r['error_high']:+.0f}) | "
            f"+-{100 * r['noise_floor']:.1f} % | {'yes' if r['band_holds'] else 'no'} |")
    return "\n".join(lines)


@contextlib.contextmanager
def virtual_cluster(name: str, n: int, cpn: int = 2, rate: float = 1e9,
                    share: float | None = None, log=print):
    """An emulated cluster of ``n`` virtual cores, ``n // cpn`` nodes of
    ``cpn``, each core ``share`` of a CPU (default :func:`share_for`),
    links of ``rate`` bits/s; owned by this process (stale once it is
    gone) and taken down afterwards, also on error.  The table and the
    probes of bench/probes/ that run on virtual cores use it."""
    c = up(Cluster(name, n // cpn, cpn, rate, core_share=share or share_for(n)), log=log,
           owner=str(os.getpid()))
    try:
        yield c
    finally:
        down(c.name, log=lambda s: None)


def cluster_for(a, n: int, cpn: int, share: float):
    """The emulated cluster of N = ``n`` virtual cores (None with
    --predict-only, which measures nothing), taken down afterwards."""
    return (contextlib.nullcontext() if a.predict_only
            else virtual_cluster(f"vc{n}", n, cpn, a.rate, share))


def each_app(a, recipes: dict, names: list[str], n: int, start: float, one) -> list[dict]:
    """``one(name, recipe)`` for every named application at N = ``n`` (its
    recipe at n ranks, compared, on the fitted platform), while --budget
    lasts; an application that fails gets a row saying why."""
    rows = []
    for name in names:
        if a.budget and time.time() - start > a.budget:
            print(f"N={n} {name}: not started, the budget of {a.budget} s is spent", flush=True)
            continue
        recipe = dict(recipes[name], ranks=n, compare=True)
        recipe.pop("platform", None)
        try:
            with app_environment(recipe):
                rows.append(one(name, recipe))
        except (OSError, RuntimeError, subprocess.TimeoutExpired) as e:
            print(f"{name}: FAILED: {e}", file=sys.stderr, flush=True)
            rows.append({"app": name, "package": recipe["package"], "N": n,
                         "outcome": refusal(str(e))})
    return rows


def node_cores(a, n: int) -> int | None:
    """Virtual cores per node at N = ``n`` (--cores-per-node, at most n);
    None, said, where n is not a multiple of them."""
    cpn = min(a.cores_per_node, n)
    if n % cpn:
        print(f"N={n}: not a multiple of {cpn} cores per node; skipped", flush=True)
        return None
    return cpn


def extrapolation(a, recipes: dict, names: list[str], out: Path, start: float) -> str:
    """Every named application extrapolated to each N of ``--ranks`` from
    the ``--small`` N (or its recipe's ``small``), on a cluster of N
    virtual cores."""
    return "\n\n".join(filter(None, (extrapolated_at(a, recipes, names, n, out, start)
                                      for n in a.ranks)))


def extrapolated_at(a, recipes: dict, names: list[str], n: int, out: Path,
                    start: float) -> str:
    """The extrapolation to N = ``n``: OUT/X<n>/, and its markdown."""
    def small_of(recipe: dict) -> list[int]:
        return a.small or [int(k) for k in recipe.get("small", [])]

    cpn = node_cores(a, n)
    if cpn is None:
        return ""
    share = share_for(n)
    peers = a.network_peers in ("all", "rank0")
    d = out / f"X{n}"
    # one network measurement for every application: on cores of 0.025
    # CPU it takes minutes, and the apps' messages stay below 64 KiB; the
    # pairs' latencies to 8 bytes only (the intercepts), 14 minutes at 64
    network = d / "pingpong1.csv"
    with cluster_for(a, n, cpn, share) as c:
        if c is not None:
            measure_network(network, c.mpiexec, ("--repeats", "3", "--max-bytes", str(1 << 16)),
                            timeout=TIMEOUT, ranks=min(n, cpn + 1))
            if peers:
                peers_of(d, c, most=8)
        rows = each_app(a, recipes, names, n, start, lambda name, recipe: (
            predict_extrapolated(name, recipe, d / name, small_of(recipe), n // cpn, cpn, share,
                                 peers)
            if c is None else
            extrapolated_on_cluster(name, recipe, d / name, c, small_of(recipe), a.rounds,
                                    network, peers)))
    if not rows:
        return ""
    for r in rows:                              # a failed one's row too
        r.setdefault("from", "/".join(map(str, small_of(recipes[r["app"]]))))
    d.mkdir(parents=True, exist_ok=True)
    (d / "results.json").write_text(json.dumps(rows))
    md = (f"## Extrapolated to N={n}: {n // cpn} nodes x {cpn} virtual cores of {share:g} CPU, "
          f"{a.rate / 1e9:g} Gbit/s links\n\n" + extrapolation_markdown(rows))
    print(md, flush=True)
    return md


def table(a, recipes: dict, names: list[str], out: Path, start: float) -> str:
    """The whole method against real runs at each N of ``--ranks``, the
    largest (the scarcest) first."""
    return "\n\n".join(filter(None, (table_at(a, recipes, names, n, out, start)
                                      for n in sorted(a.ranks, reverse=True))))


def table_at(a, recipes: dict, names: list[str], n: int, out: Path, start: float) -> str:
    """The table at N = ``n``: OUT/N<n>/, and its markdown."""
    cpn = node_cores(a, n)
    if cpn is None:
        return ""
    share = share_for(n)
    copies = cpn if a.replay_copies == "node" else n
    peers = a.network_peers in ("all", "rank0")
    d = out / f"N{n}"
    with cluster_for(a, n, cpn, share) as c:
        rows = each_app(a, recipes, names, n, start, lambda name, recipe: (
            predict_saved(name, recipe, d / name, n // cpn, cpn, share, peers) if c is None else
            network_again(name, recipe, d / name, c, a.spacing) if a.network_again else
            replay_again(name, recipe, d / name, c, copies) if a.replay_again else
            validate_on_cluster(name, recipe, d / name, c, a.rounds, copies, a.spacing, peers)))
    if not rows:
        return ""
    df = pd.DataFrame(rows)
    d.mkdir(parents=True, exist_ok=True)
    df.to_csv(d / "results.csv", index=False)
    again = (" (predicted again from saved runs)" if a.predict_only else
             " (network measured again for saved runs)" if a.network_again else
             " (replayed again for saved runs)" if a.replay_again else "")
    md = (f"## N={n}: {n // cpn} nodes x {cpn} virtual cores of {share:g} CPU, "
          f"{a.rate / 1e9:g} Gbit/s links{again}\n\n" + markdown(df, recipes)
          + quantisation_lines(df))
    print(md, flush=True)
    return md


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("what", choices=("check", "table", "extrapolate"))
    ap.add_argument("--out", default=str(HERE / "virtual_cores" / "results"))
    ap.add_argument("--markdown", action="store_true", help="print the tables as markdown")
    ap.add_argument("--rounds", type=int, default=5, help="rounds per application (default 5)")
    ap.add_argument("--ranks", type=lambda s: [int(x) for x in s.replace(",", " ").split()],
                    default=[8, 16], help='N values, e.g. "8 16 32" (default "8 16")')
    ap.add_argument("--apps", help="comma-separated recipe names (default: all of --recipes)")
    ap.add_argument("--recipes", default=str(HERE / "apps" / "examples.yaml"))
    ap.add_argument("--cores-per-node", type=int, default=2,
                    help="virtual cores per emulated node (default 2): the replay's copies")
    ap.add_argument("--rate", type=parse_rate, default=parse_rate("10gbit"),
                    help="each node's link (default 10gbit: at 1gbit, 15 flows per rank got "
                         "13%% of the links' rate here, their token buckets released by the "
                         "kernel's timers)")
    ap.add_argument("--budget", type=float, help="start no application after this many seconds")
    ap.add_argument("--predict-only", action="store_true",
                    help="table: predict again from the runs saved under --out (no cluster)")
    ap.add_argument("--network-again", action="store_true",
                    help="table: measure the network again on the cluster for the runs "
                         "saved under --out, then predict again (after a change to the "
                         "measurement; the first one kept as before-pingpong1.csv).  A new "
                         "cluster: each pair's latency on virtual cores is set by the "
                         "cluster's quota phases, so it may differ from the runs' "
                         "(bench/probes/vcore_latency.sh)")
    ap.add_argument("--replay-again", action="store_true",
                    help="table: replay every round again on the cluster for the runs "
                         "saved under --out (the first replays kept as replay-before), "
                         "then predict again: a change to the replay (--copies) against "
                         "the same runs and network")
    ap.add_argument("--copies", choices=("in-step", "free"), default="in-step",
                    help="python -m replay --copies: the representative's copies held in "
                         "step at the run's waiting calls (the default) or free running")
    ap.add_argument("--spacing", type=float, default=0.0, metavar="SECONDS",
                    help="the network measurement's calibrate measure --spacing: each "
                         "ping-pong timed after this much work (default 0)")
    ap.add_argument("--network-peers", choices=("level", "all", "rank0"), default="all",
                    help="each network level's latency from its median pair (all, "
                         "the default: every pair's small-message ping-pongs, "
                         "measured after the first measurement and saved as peers1.csv; "
                         "--predict-only uses a saved one; rank0: rank 0's pairs of it "
                         "alone) or from the one pair the first "
                         "measurement has (level: rank 0 with rank 1 and with the first "
                         "rank of another node); on virtual cores each pair's latency is "
                         "set by the quota phases (bench/probes/vcore_pairs_probe.py)")
    ap.add_argument("--replay-copies", choices=("all", "node"), default="all",
                    help="replay each representative as a copy on every virtual core of "
                         "the cluster (all, the default: the emulated nodes share this "
                         "host's caches and memory, so the real run's ranks slow each "
                         "other down across nodes too) or on one node's cores (node: as "
                         "on a real cluster)")
    ap.add_argument("--small", type=lambda s: [int(x) for x in s.replace(",", " ").split()],
                    help="extrapolate: the small N traced (default: the recipe's small)")
    ap.add_argument("--loops", type=int, default=400_000,
                    help="check: the kernel's additions (default 400000: about 20 ms free)")
    ap.add_argument("--keep-page-reporting", action="store_true",
                    help="leave the kernel's free page reporting on (by default it is "
                         "stopped for the run and restored: see page_reporting_off)")
    ap.add_argument("--no-dilation", action="store_true",
                    help="check: the quantisation rows only")
    ap.add_argument("--alltoall", choices=("analytic", *FOR_OP["alltoall"]),
                    help="the fitted platform's all-to-all algorithm (collectives: "
                         "{alltoall: ALG}; default: the fit's); with --predict-only, the "
                         "same runs under another algorithm")
    ap.add_argument("--no-fault-charge", action="store_true",
                    help="expand without charging the page faults the traced run took "
                         "beyond the replay's (replay.expand --no-fault-charge): with "
                         "--predict-only, what the charge changes on the same replays")
    a = ap.parse_args(argv)
    if a.no_fault_charge:
        EXPAND_OPTIONS.append("--no-fault-charge")
    REPLAY_OPTIONS.extend(["--copies", a.copies])
    if a.alltoall:
        COLLECTIVES["alltoall"] = a.alltoall
    if a.network_peers == "rank0":
        global RANK0_PAIRS
        RANK0_PAIRS = True
    why = unavailable()
    if why:
        print(f"virtual_cores: {why}", file=sys.stderr)
        return 2
    if os.environ.get(MARK) != "1":
        return isolated([PY, str(Path(__file__).resolve())] + argv)
    enter()
    # stopped by a signal, still restore the host (page reporting) and take
    # the cluster down: the context managers unwind on SystemExit
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    with page_reporting_off(a.keep_page_reporting or a.predict_only):
        text = measured(a, ap, out)
    if a.markdown:
        print(text)
    return 0


def measured(a, ap, out: Path) -> str:
    """What ``a.what`` asks for, measured (or predicted again); its markdown."""
    start = time.time()
    if a.what == "check":
        dil = [] if a.no_dilation else dilation(3, a.loops * 5)
        quant = quantisation(a.loops // 10, 100)
        (out / "check.json").write_text(json.dumps({"dilation": dil, "quantisation": quant}))
        text = check_markdown(dil, quant)
    else:
        recipes = load_recipes(a.recipes)
        names = a.apps.split(",") if a.apps else list(recipes)
        unknown = [x for x in names if x not in recipes]
        if unknown:
            ap.error(f"unknown app(s) {unknown}; recipes: {', '.join(recipes)}")
        if a.what == "extrapolate" and not a.small and \
                any(not recipes[x].get("small") for x in names):
            ap.error("extrapolate: give --small, or a 'small' list in every recipe")
        too_many = [n for n in a.ranks if share_for(n) * n > MAX_LOAD * CPUS]
        if too_many:
            ap.error(f"N={too_many}: more virtual cores than this machine lends")
        text = (table if a.what == "table" else extrapolation)(a, recipes, names, out, start)
        (out / "TABLES.md").write_text(f"# Virtual cores, {time.strftime('%Y-%m-%d')}\n\n"
                                       + text + "\n")
    return text


if __name__ == "__main__":
    sys.exit(main())
