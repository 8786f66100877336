"""``python -m extrapolate``: a trace at a target N from traces at small N."""
from __future__ import annotations

import argparse
import sys

from .build import extrapolate
from .fit import UNEVEN
from .layout import ExtrapolationError


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m extrapolate",
        description="Build the trace of an SPMD application at N ranks from its traces at "
                    "several smaller N (three or more: the fits are then checked on the "
                    "data).  Position classes of the process grid, peers as offsets, "
                    "message sizes fitted exactly, computation by the scaling models' "
                    "automatic choice with an interval; what cannot be extrapolated is "
                    "refused with the trace, rank and event that disagree.")
    p.add_argument("traces", nargs="+", help="trace directories of the same application at "
                   "different N (python -m instrument trace)")
    p.add_argument("--ranks", "-n", type=int, required=True, help="the target N")
    p.add_argument("-o", "--output", required=True, help="trace directory to write")
    p.add_argument("--force", action="store_true", help="replace an existing output")
    p.add_argument("--level", type=float, default=0.9,
                   help="level of the computation's interval (default 0.9)")
    p.add_argument("--uneven", choices=UNEVEN, default="refuse",
                   help="a message size that does not split evenly at the target's grid (a "
                        "remainder, whose place is the application's convention): refuse "
                        "(default), floor or round the fitted size")
    p.add_argument("--compute", nargs="+", metavar="COMPUTE",
                   help="one computation table per trace, in the traces' order (each small "
                        "run's representatives replayed and expanded: python -m "
                        "replay.expand): extrapolate these times instead of the traces' CPU "
                        "seconds (a host whose cores the small runs shared, or the target's "
                        "own computation): each run's speed pooled over its "
                        "representatives, times each class's traced CPU seconds")
    p.add_argument("--variability", metavar="CSV",
                   help="with --compute: the largest small run's variability table "
                        "(replay.expand --variability, beside its computation table); each "
                        "position class then carries the variability of its representative's "
                        "copies on the target (netsim --class-variability samples it), and "
                        "the spans' means over the copies are extrapolated")
    a = p.parse_args(argv)
    if a.ranks < 1 or not 0 < a.level < 1:
        p.error("--ranks must be >= 1 and --level within (0, 1)")
    if a.variability and not a.compute:
        p.error("--variability needs --compute (the tables it was measured with)")
    try:
        meta = extrapolate(a.traces, a.ranks, a.output, force=a.force, level=a.level,
                           uneven=a.uneven, compute=a.compute, variability=a.variability)
    except ExtrapolationError as e:
        print(f"extrapolate: error: {e}", file=sys.stderr)
        return 2
    x = meta["extrapolated"]
    print(f"{a.output}: {a.ranks} ranks on a {'x'.join(map(str, x['grid']))} grid, "
          f"{meta['events']} events, from N = {', '.join(str(f['size']) for f in x['from'])} "
          f"({x['scaling']} scaling)")
    if a.compute:
        print("computation: the tables given (--compute), not the traces' CPU seconds"
              + (f"; variability: {a.variability}" if a.variability else ""))
    print(f"{'class':<14} {'calls':>6} {'cpu s':>10} {int(100 * a.level)} % interval"
          f"{'':>12} speeds      run noise  span noise")
    for c in x["classes"]:
        f = c.get("cpu_factors") or [1.0]
        print(f"{c['class']:<14} {c['calls']:>6} {c['cpu_total']:>10.4g} "
              f"{c['cpu_low']:>10.4g} .. {c['cpu_high']:<10.4g} {min(f):.2f}-{max(f):.2f}x"
              f"{100 * c.get('cpu_sigma_run', 0.0):>9.1f} %"
              f"{100 * c.get('cpu_sigma_span', 0.0):>10.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
