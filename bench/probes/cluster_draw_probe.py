"""Does a real run on virtual cores depend on which cluster was brought up?

    python bench/probes/cluster_draw_probe.py [--apps cg,jacobi] [--ranks 64]
        [--clusters 4] [--runs 2] [--recipes bench/apps/virtual_extrapolate.yaml]

Each virtual core's CPU quota runs in periods of its own phase, fixed
when its group is made (bench/probes/vcore_latency.sh: a pair's one-way
time is set by its two cores' phases, the same for every launch on one
cluster, different on the next).  A ping-pong's round trip is about one
period whatever the phases, so the network measurement sees half a
period one way; a chain of messages in one direction (cg's Sendrecvs
around its ranks) pays each hop's own phase difference, a fixed draw per
cluster that does not average out over the iterations.  This probe
brings up ``--clusters`` clusters of N virtual cores in turn (the
extrapolation's: 2 cores a node, 1 Gbit/s links) and times ``--runs``
real runs of each application on each (one run of each, on the first
cluster, not kept): the spread between clusters against the spread
within one.

Needs root and the cgroup v1 cpu controller (as virtual cores do).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path[:0] = [str(ROOT), str(HERE.parent), str(HERE.parent / "apps")]
from run import PY, app_args, app_environment, env, load_recipes, page_reporting_off  # noqa: E402
from virtual_cores import share_for, virtual_cluster  # noqa: E402

from emulate.isolate import MARK, enter, isolated  # noqa: E402
from validate import measure  # noqa: E402


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--apps", default="cg,jacobi")
    ap.add_argument("--recipes", default=str(HERE.parent / "apps" / "virtual_extrapolate.yaml"))
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--clusters", type=int, default=4)
    ap.add_argument("--runs", type=int, default=2)
    a = ap.parse_args(argv)
    if os.environ.get(MARK) != "1":
        return isolated([PY, str(Path(__file__).resolve())] + argv)
    enter()
    with page_reporting_off(False):
        return probe(a)


def probe(a) -> int:
    """The runs, cluster after cluster, and the spreads."""
    recipes = load_recipes(Path(a.recipes))
    names = a.apps.split(",")
    times: dict[str, list[list[float]]] = {n: [] for n in names}
    for k in range(a.clusters):
        with virtual_cluster("vcd", a.ranks, 2, 1e9, share_for(a.ranks),
                             log=lambda s: None) as c:
            for name in names:
                recipe = dict(recipes[name], ranks=a.ranks)
                with app_environment(recipe):
                    app = app_args(recipe)
                    runs = [measure(app, a.ranks, 1, c.mpiexec, env=env(), log=lambda s: None)
                            ["measured"] for _ in range(a.runs + (k == 0))]
                times[name].append(runs[1:] if k == 0 else runs)
                print(f"cluster {k + 1} {name}: " + ", ".join(f"{t:.3f}" for t in runs)
                      + (" s (the first not kept)" if k == 0 else " s"), flush=True)
    for name, per in times.items():
        medians = [statistics.median(r) for r in per]
        within = statistics.median(max(r) / min(r) - 1 for r in per)
        print(f"{name}: medians per cluster {', '.join(f'{m:.3f}' for m in medians)} s; "
              f"between clusters {100 * (max(medians) / min(medians) - 1):.1f} %, within one "
              f"(median) {100 * within:.1f} %", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
