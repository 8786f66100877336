"""Where a loop of tiny collectives loses its prediction: per message size,
the application's own latency against the simulator's time per call, and
the replay's computation span of a loop that does nothing between calls.

    python bench/probes/small_call_probe.py [--out DIR] [--untraced 5] [--op alltoall]

The application is mpi4py's OSU Allgather demo (bench/apps/recipes.yaml,
``osu-allgather``; ``bash bench/apps/install.sh`` fetches it): 11,000
in-place Allgathers per size up to 8 KiB, 110 above, each size timed by
the application itself (``--op alltoall``: its OSU Alltoall demo, 1,200
Alltoalls per size up to 8 KiB, 110 above).  In the same minutes: the network measured and
fitted as bench/apps/run.py does (``calibrate measure``, fit into the
this-machine template), the untraced application run ``--untraced``
times (the median latency per size), and the whole method at N=2 (trace,
cluster, record, one replay round with 2 bound copies, expand); then the
simulator's end of every Allgather of rank 0 against the end of the call
before it, the median per size (``sim us``), beside the replayed
computation span before the call, the mean per size (``replay comp``).  Second table: the
calibration's own two-rank rows (an Allgather in place of 8 bytes in a
bare loop; its model cost: that less the loop) against the
application's 8-byte latency.  Third: the replayed span of a loop that
does nothing between 20,000 in-place Allgathers of 8 bytes, where the
real span is the loop's own ~0.03 us (the calibration's ``loop`` row),
beside the replay's own overhead estimate taken out of it.
"""
from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "apps"))
import run as runner  # noqa: E402  (bench/apps/run.py: the corpus runner's stages)

DEMO = ROOT / "bench" / "apps" / "src" / "mpi4py" / "demo"
NULL_LOOP = '''
import sys
import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
buf = np.zeros(16, "B")
for i in range(int(sys.argv[1])):
    comm.Allgather(MPI.IN_PLACE, [buf, 8, MPI.BYTE])
'''


def untraced_latencies(app: list[str], log: Path) -> dict[int, float]:
    """{size: us} as the OSU demo prints them, one untraced run."""
    out = runner.sh([runner.MPIEXEC, "-n", "2", runner.PY] + app, log,
                    MPIR_CVAR_ENABLE_HEAVY_YIELD="0")
    return {int(a): float(b) for a, b in re.findall(r"^\s*(\d+)\s+([\d.]+)\s*$", out, re.M)}


def simulated_per_call(d: Path, compute: Path, platform: Path, op: str) -> pd.DataFrame:
    """Per bytes per member: rank 0's simulated time from the end of the call
    before each collective ``op`` to the end of it (median), and the
    replayed span before it (mean: spans that could not give the replay's
    whole cost are owed by the next ones), in us."""
    from contracts.trace import load_trace
    from netsim.__main__ import _from_trace, _parser, _platform
    from netsim.predict import run
    a = _parser().parse_args([str(d / "trace"), "--platform", str(platform), "--compute",
                              str(compute), "-o", str(d / "unused.json")])
    plat = _platform(a)
    s = _from_trace(a, plat, None).schedule
    res = run(s, plat)
    ops = np.nonzero(s.rank == 0)[0]
    seq = s.seq_of[s.event[ops]] if s.seq_of is not None else s.event[ops]
    end = pd.Series(res.end[ops]).groupby(seq).max()
    ev = load_trace(str(d / "trace")).events
    r0 = ev[ev["rank"] == 0].reset_index(drop=True)
    r0["took"] = r0["seq"].map(end).diff()
    comp = pd.read_csv(compute)
    comp = comp[comp["rank"] == 0].set_index("seq")["comp"]
    ag = r0[r0["op"] == op].assign(comp=lambda x: x["seq"].map(comp))
    out = ag.groupby(ag["rbytes"] // 2).agg(sim_us=("took", "median"), comp_us=("comp", "mean"))
    return out * 1e6


def null_loop_span(d: Path, calls: int = 20000) -> tuple[float, str]:
    """The replayed span (us, mean) of a loop with nothing between its
    calls, and the replay's line about its own overhead."""
    app = d / "null_loop.py"
    app.write_text(NULL_LOOP)
    cmd = [str(app), str(calls)]
    runner.sh([runner.MPIEXEC, "-n", "2", runner.PY, "-m", "instrument", "record", "--reps",
               str(d / "reps.csv"), "-o", str(d / "null_msglog"), "--force"] + cmd,
              d / "null_record.log")
    err = runner.sh([runner.PY, "-m", "replay", "--rank", "0", "--log", str(d / "null_msglog"),
                     "-o", str(d / "null_replay"), "--force"] + cmd, d / "null_replay.log")
    said = next((ln for ln in err.splitlines() if "replay overhead" in ln), "")
    span = pd.read_csv(d / "null_replay" / "rank0.csv")["comp"].iloc[10:].mean() * 1e6
    return span, said


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="/tmp/small_call_probe", help="work directory")
    ap.add_argument("--untraced", type=int, default=5, help="untraced runs (default 5)")
    ap.add_argument("--op", choices=("allgather", "alltoall"), default="allgather",
                    help="the OSU demo of this collective (default allgather)")
    a = ap.parse_args(argv)
    app = [str(DEMO / f"osu_{a.op}.py")]
    d = Path(a.out)
    d.mkdir(parents=True, exist_ok=True)
    for old in ("trace", "msglog", "replay", "null_msglog", "null_replay"):
        shutil.rmtree(d / old, ignore_errors=True)        # a rerun's stages start afresh
    pp = runner.measure_network(d / "pingpong.csv")
    plat = runner.fit_platform([pp], d / "platform.yaml")
    runs = [untraced_latencies(app, d / f"untraced{k}.log") for k in range(a.untraced)]
    runner.host_stages(app, d, 2)
    runner.replay_round(app, d, 2, 1)
    sim = simulated_per_call(d, runner.expand_round(d, 1), plat, a.op)
    print("\nper size: the application's latency (untraced, median) and the simulated call")
    print(f"{'bytes':>8s} {'app us':>8s} {'sim us':>8s} {'replay comp us':>15s} {'error':>8s}")
    for size in sorted(runs[0]):
        app_us = statistics.median(r[size] for r in runs if size in r)
        if size in sim.index:
            s = sim.loc[size]
            print(f"{size:8d} {app_us:8.2f} {s.sim_us:8.2f} {s.comp_us:15.3f} "
                  f"{100 * (s.sim_us / app_us - 1):+7.1f} %")
    rows = pd.read_csv(pp)
    pair = rows[rows["peer"] == -1].set_index("what")["one_way"] * 1e6
    eight = statistics.median(r[8] for r in runs if 8 in r)
    what = "allgather_inplace" if a.op == "allgather" else a.op
    print(f"\ncalibration, 8 bytes: {what} {pair[what]:.2f} us per "
          f"call in its loop ({pair['loop']:.3f} us of it the loop's); the application's "
          f"8-byte latency {eight:.2f} us")
    span, said = null_loop_span(d)
    print(f"\nnull loop replayed: {span:.3f} us per span left after the replay's overhead "
          f"(real: the loop's own, ~{pair['loop']:.2f} us)\n  {said}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
