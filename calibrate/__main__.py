"""python -m calibrate (measure | fit): the target's network as a platform file.

    mpiexec -n P python -m calibrate measure -o pingpong.csv [--repeats R] [--max-bytes B]
        [--spacing SECONDS] [--only-pingpongs]
    python -m calibrate fit pingpong.csv [more.csv ...] --cores-per-node C [--nodes K]
        [--peers PEERS.csv] [--template PLATFORM.yaml] -o platform.yaml
"""
from __future__ import annotations

import argparse
import os
import sys

from .fit import fit, gbs, into_template
from .measure import SIZES, measure


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m calibrate",
        description="Measure the target's network and fit a platform file to it.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure", help="ping-pongs, streams, copies and two-rank "
                                       "collectives (run under mpiexec on the target)")
    m.add_argument("-o", "--output", required=True, help="measurements CSV to write")
    m.add_argument("--repeats", type=int, default=30,
                   help="blocks of back-to-back calls per point; the median block is kept "
                        "(default 30)")
    m.add_argument("--max-bytes", type=int, default=SIZES[-1],
                   help="largest message measured (default 4 MiB); on a slow network "
                        "a smaller one keeps the measurement short, and the fit carries "
                        "the largest size's byte time on beyond it")
    m.add_argument("--spacing", type=float, default=0.0, metavar="SECONDS",
                   help="time each ping-pong and exchange alone, after SECONDS of "
                        "computation on both ranks (CPU time), as applications meet the "
                        "network after their work (default 0: blocks of back-to-back "
                        "calls).  For a target whose ranks get their CPU in slices (CPU "
                        "quotas, shared or oversubscribed nodes), where a back-to-back "
                        "loop pays the slicing on every trip")
    m.add_argument("--only-pingpongs", action="store_true",
                   help="every pair's ping-pongs and nothing else (round-robin rounds, "
                        "the pairs of a round at once; a fifth column, rank, names the "
                        "timing rank): each pair's latency, for `calibrate fit --peers` "
                        "(with --max-bytes 128); the full measurement's collectives over "
                        "every rank take minutes on many slow ranks")
    f = sub.add_parser("fit", help="fit latency/byte time and curves per level, "
                                   "write a platform YAML")
    f.add_argument("raw", nargs="+",
                   help="measurements CSV(s) from `calibrate measure`; several are "
                        "combined point by point (--combine)")
    f.add_argument("--cores-per-node", type=int, required=True,
                   help="cores per node of the target (ranks placed block-wise)")
    f.add_argument("--nodes", type=int, default=1,
                   help="nodes of the target; more than 1 adds a level across nodes and "
                        "NIC contention (default 1)")
    f.add_argument("--spans", help="comma-separated spans of the inner levels (cores)")
    f.add_argument("--eager-limit", type=int,
                   help="bytes (default: the measured eager_limit row, else 65536)")
    f.add_argument("--alltoall-self-limit", type=int, default=32768,
                   help="largest alltoall block sent to itself as a message (MPICH's "
                        "MPIR_CVAR_ALLTOALL_MEDIUM_MSG_SIZE; 0: the own block is copied)")
    f.add_argument("--combine", choices=("min", "median", "mean"), default="min",
                   help="how several measurements combine, per point "
                        "(min: the quietest moment; median: the typical one; mean: the "
                        "average over the machine's states)")
    f.add_argument("--peers", metavar="PEERS.csv",
                   help="small-message ping-pongs of every pair of ranks (calibrate "
                        "measure --max-bytes 128 --only-pingpongs on all ranks): each "
                        "level's latency and curve moved to its median pair's, where pairs "
                        "of a level differ (virtual cores; farther or slower pairs)")
    f.add_argument("--template", metavar="PLATFORM.yaml",
                   help="write this platform with its innermost level's network replaced "
                        "by the fitted one (nodes, outer levels, collectives kept)")
    f.add_argument("--name", default="calibrated",
                   help="the platform's name (default calibrated; with --template, the "
                        "template's)")
    f.add_argument("-o", "--output", required=True, help="platform YAML to write")
    return ap


def _print_summary(d: dict) -> None:
    """The fitted figures in words, one line each."""
    net = d["network"]
    for lv in net["levels"]:
        rdv = lv.get("rendezvous_byte_time")
        big = lv["stream"][-1] if "stream" in lv else None
        print(f"{lv['name']}: latency {lv['latency'] * 1e6:.3f} us, "
              f"{gbs(lv['byte_time']):.2f} GB/s" +
              (f", {gbs(rdv):.2f} GB/s over the eager limit" if rdv is not None else "") +
              (f", streamed {big[0]} B every {big[1] * 1e6:.1f} us" if big else ""))
        if lv.get("warmup"):
            w = lv["warmup"]
            print(f"{lv['name']}: a new connection: {w.get('first', 0.0) * 1e6:.1f} us to "
                  f"open, {w['seconds'] * 1e6:.1f} us more over its first {w['bytes']} B")
    if net.get("call_overhead"):
        print(f"call overhead {net['call_overhead'] * 1e6:.3f} us per call")
    if net.get("copy_byte_time"):
        print(f"local copy {gbs(net['copy_byte_time']):.2f} GB/s"
              + (f" + {net['copy_overhead'] * 1e6:.3f} us per copy"
                 if net.get("copy_overhead") else ""))
    if net.get("pack_byte_time"):
        print(f"packing non-contiguous datatypes {net['pack_byte_time'] * 1e9:.3f} "
              "ns per byte sent and received")
    for fam, t in net.get("collective_overhead", {}).items():
        print(f"{fam}: {t * 1e6:.3f} us per call beyond its messages")
    if net.get("rma_overhead"):
        print(f"one-sided calls: {net['rma_overhead'] * 1e6:.3f} us each beyond the call")


def main(argv=None) -> int:
    a = _parser().parse_args(argv)
    if a.cmd == "measure":
        if a.max_bytes < 1:
            print("calibrate: error: --max-bytes must be at least 1", file=sys.stderr)
            return 2
        if a.spacing < 0:
            print("calibrate: error: --spacing must be 0 or more", file=sys.stderr)
            return 2
        measure(a.output, sizes=[n for n in SIZES if n <= a.max_bytes], repeats=a.repeats,
                spacing=a.spacing, only_pingpongs=a.only_pingpongs)
        return 0
    import yaml
    try:
        spans = [int(x) for x in a.spans.split(",")] if a.spans else None
        d = fit(a.raw, a.cores_per_node, a.nodes, spans, a.eager_limit, a.name,
                a.alltoall_self_limit, a.combine, a.peers)
        if a.template:
            with open(a.template) as fh:
                d = into_template(d, yaml.safe_load(fh))
    except (OSError, ValueError, KeyError, yaml.YAMLError) as e:
        print(f"calibrate: error: {e}", file=sys.stderr)
        return 2
    _print_summary(d)
    with open(a.output + ".tmp", "w") as fh:
        yaml.safe_dump(d, fh, sort_keys=False, default_flow_style=None)
    os.replace(a.output + ".tmp", a.output)
    print(f"wrote {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
