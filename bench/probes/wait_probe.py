"""How should a rank wait on a virtual core: spinning, or sleeping between polls?

    python bench/probes/wait_probe.py [--apps uneven,cg] [--rounds 3] [--ranks 16]
        [--slack-us 1000]

A rank blocked in MPICH spins by default.  On a real core that costs
nothing but the core; on a virtual core (a CPU-quota group) the spinning
spends the rank's quota, so the rank is throttled most of the time it
waits (a tick's burst, then the rest of the quota's periods idle: 4 ms
in 40 ms at F = 0.1), and a message that arrives meanwhile waits for its
next burst.  A real cluster's spinning rank answers at once.

Side by side on the emulated cluster of virtual cores, interleaved, each
application's span (validate's clock, the slowest rank's) with waiting
ranks that:
- spin (``MPIR_CVAR_ENABLE_HEAVY_YIELD=0``, what the runs do today);
- sleep between polls (``=1``: MPICH's nanosleep of 1 ns, i.e. the
  kernel's timer slack, 50 us by default);
- sleep between polls with a timer slack of ``--slack-us`` (prctl
  PR_SET_TIMERSLACK, inherited by every process the launcher starts).

Found (2026-11-29, N = 16, F = 0.1, 3 interleaved rounds, median and
range): uneven 7.59 s (7.08-7.67) spinning, 7.84 (7.80-8.23) sleeping
with 50 us slack, 7.86 (7.33-9.01) with 1 ms; cg 5.02 (4.96-5.08), 3.81
(3.78-4.84), 4.99 (4.44-5.06).  The way ranks wait does not explain
uneven's prediction 21 % below its real runs: its real runs stay as long
whichever way the lighter ranks wait.  (Also ruled out beside it: the
sched_yield calls of MPICH's waiting loop, 12,000 involuntary context
switches per rank, removed by an LD_PRELOAD that makes them no-ops: the
work's CPU seconds unchanged; MPI's libraries loaded or not: the same.)

Needs root and the cgroup v1 cpu controller (as virtual cores do).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path[:0] = [str(ROOT), str(HERE.parent), str(HERE.parent / "apps")]
from run import PY, app_args, env, load_recipes, page_reporting_off  # noqa: E402
from virtual_cores import virtual_cluster  # noqa: E402

from emulate import Cluster  # noqa: E402
from emulate.isolate import MARK, enter, isolated  # noqa: E402

PR_SET_TIMERSLACK = 29


def span(c: Cluster, app: list, n: int, yield_: str, slack_ns: int) -> float:
    """One untraced run's span (validate's clock), the waits as asked."""
    libc = ctypes.CDLL(None, use_errno=True)
    out = tempfile.mkdtemp(prefix="wait-probe-")
    e = dict(env(), MPIR_CVAR_ENABLE_HEAVY_YIELD=yield_)
    try:
        libc.prctl(PR_SET_TIMERSLACK, slack_ns, 0, 0, 0)   # inherited by the launcher's children
        subprocess.run([c.mpiexec, "-n", str(n), PY, "-m", "validate.clock", "--out", out]
                       + app, env=e, check=True, stdout=subprocess.DEVNULL, timeout=600)
        return max(json.loads((Path(out) / f"rank{r}.json").read_text())["span"]
                   for r in range(n))
    finally:
        libc.prctl(PR_SET_TIMERSLACK, 0, 0, 0, 0)           # back to the default
        shutil.rmtree(out, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--apps", default="uneven,cg")
    ap.add_argument("--recipes", default=str(HERE.parent / "apps" / "virtual.yaml"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--slack-us", type=int, default=1000)
    a = ap.parse_args()
    if os.environ.get(MARK) != "1":
        return isolated([PY, str(Path(__file__).resolve())] + sys.argv[1:])
    enter()
    recipes = load_recipes(a.recipes)
    modes = {"spin": ("0", 0), "sleep, 50 us slack": ("1", 0),
             f"sleep, {a.slack_us} us slack": ("1", a.slack_us * 1000)}
    with page_reporting_off(False), virtual_cluster("waitp", a.ranks) as c:
        rows = []
        for name in a.apps.split(","):
            app = app_args(dict(recipes[name], ranks=a.ranks))
            print(f"{name}: warm-up {span(c, app, a.ranks, '0', 0):.3f} s", flush=True)
            spans: dict[str, list[float]] = {m: [] for m in modes}
            for k in range(a.rounds):
                for m, (y, slack) in modes.items():
                    spans[m].append(span(c, app, a.ranks, y, slack))
                    print(f"  {name} round {k + 1} {m}: {spans[m][-1]:.3f} s", flush=True)
            rows += [(name, m, statistics.median(s), min(s), max(s))
                     for m, s in spans.items()]
        share = c.core_share
    print(f"\nN = {a.ranks}, F = {share:g}, {a.rounds} interleaved rounds, "
          f"{time.strftime('%Y-%m-%d')}\n")
    print("| app | waiting ranks | span s: median (range) |\n|---|---|---|")
    for name, m, med, lo, hi in rows:
        print(f"| {name} | {m} | {med:.3f} ({lo:.3f}-{hi:.3f}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
