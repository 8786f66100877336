"""python -m emulate: an emulated cluster on this machine, as a target.

    python -m emulate up [--name NAME] (--platform P.yaml | --nodes K --rate R)
                         [--cores-per-node C] [--queue S] [--core-share F [--core-period US]]
    python -m emulate down [--name NAME]
    python -m emulate status [--name NAME]
    python -m emulate mpiexec [--name NAME] -n N [-ppn P] COMMAND [ARGS...]
    python -m emulate run (--platform P.yaml | --nodes K --rate R) [...] -- COMMAND [ARGS...]

``up`` creates K nodes (network namespaces) joined through a switch by
links of R bits per second each way (``1gbit``, ``100mbit``, ``1e9``) and
prints the path of its launcher, an ``mpiexec`` that places ranks on those
nodes (give it to the workflow as ``target: {mpiexec: PATH}``, or to
``validate --mpiexec``); ``down`` removes it all.  ``--platform`` takes the
nodes, cores per node and the outermost level's byte time (rate = 8 /
byte_time) from a platform file.  ``run`` brings a cluster up inside a
private network and mount namespace, runs COMMAND with ``$EMULATE_MPIEXEC``
set to the launcher, and brings it down: whatever happens, nothing of it
outlives the command.  All but ``mpiexec`` need root.

``--core-share F`` gives the cluster virtual cores: every core of every
node a CPU-quota group of its own (cgroup v1 ``cpu``, quota F of each
period), pinned to one of this machine's CPUs, so that each rank computes
1/F times slower than on a free core whatever its neighbours do: N slow
cores on a few real ones, on which a real run at N can be timed.  The
launcher starts every rank on its own core; ``STATE/NAME/core C COMMAND``
(``$EMULATE_CORE`` in ``run``) runs a command on core C (node k's cores
are k x C ... k x C + C - 1): give it to replay as ``--bind-command`` to
replay on one node of the cluster.  Only one cluster at a time may have
virtual cores; ``down`` removes them, also those of a run that was killed.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

from .cluster import Cluster, EmulateError, describe_cores, down, load, up
from .isolate import enter, isolated
from .launch import command, split_mpiexec_args

UNITS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}


def parse_rate(text: str) -> float:
    """Bits per second from ``1e9``, ``1gbit``, ``100mbit``, ``10g``."""
    m = re.fullmatch(r"\s*([0-9.]+(?:e[+-]?[0-9]+)?)\s*([kmgt]?)(?:bit)?(?:/s)?\s*",
                     text.lower())
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r}: a rate such as 1gbit, 100mbit or 1e9")
    rate = float(m.group(1)) * UNITS[m.group(2)]
    if rate <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be > 0")
    return rate


def from_platform(path: str) -> dict:
    """Nodes, cores per node and link rate of a platform file."""
    from netsim.platform import PlatformError, load_platform
    try:
        p = load_platform(path)
    except PlatformError as e:
        raise EmulateError(str(e)) from None
    level = p.levels[-1]
    return {"nodes": p.nodes, "cores_per_node": p.cores_per_node,
            "rate": 8.0 / level.byte_time if level.byte_time > 0 else None}


def _cluster(a) -> Cluster:
    spec = {"nodes": a.nodes, "cores_per_node": a.cores_per_node, "rate": a.rate,
            "core_share": a.core_share}
    if a.platform:
        found = from_platform(a.platform)
        spec.update({k: v for k, v in found.items() if spec[k] is None})
    if spec["nodes"] is None or spec["rate"] is None:
        raise EmulateError("give --nodes and --rate, or a --platform that has them")
    return Cluster(a.name, spec["nodes"], spec["cores_per_node"] or 1, spec["rate"], a.queue,
                   spec["core_share"], a.core_period)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m emulate", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    sub = ap.add_subparsers(dest="cmd", required=True)
    shape = argparse.ArgumentParser(add_help=False)
    shape.add_argument("--platform", help="take nodes, cores per node and the link rate "
                                          "(the outermost level) from this platform file")
    shape.add_argument("--nodes", type=int, help="nodes (network namespaces)")
    shape.add_argument("--cores-per-node", type=int, help="ranks per node (default 1)")
    shape.add_argument("--rate", type=parse_rate,
                       help="each node's link, bits per second each way: 1gbit, 100mbit, 1e9")
    shape.add_argument("--queue", type=float, default=0.05,
                       help="seconds of data a link's queue holds (default 0.05)")
    shape.add_argument("--core-share", type=float, metavar="F",
                       help="virtual cores: every core of the cluster runs at F of one of "
                            "this machine's CPUs (a CPU-quota group each, pinned), 1/F times "
                            "slower than a free core; nodes x cores x F must stay within 90 %% "
                            "of the CPUs (default: the ranks share this machine's cores)")
    shape.add_argument("--core-period", type=int, metavar="US",
                       help="the virtual cores' quota period in microseconds (default 10000, "
                            "or 1000/F where that is longer: a quota is at least 1 ms)")
    named = argparse.ArgumentParser(add_help=False)
    named.add_argument("--name", default="emu",
                       help="the cluster's name, 1-8 letters or digits (default emu)")
    sub.add_parser("up", parents=[named, shape], help="create a cluster")
    sub.add_parser("down", parents=[named], help="remove a cluster and all it created")
    sub.add_parser("status", parents=[named], help="describe a cluster")
    sub.add_parser("mpiexec", parents=[named],
                   help="-n N COMMAND [ARGS...]: run on a cluster's nodes (its launcher)")
    r = sub.add_parser("run", parents=[named, shape],
                       help="up, COMMAND (with $EMULATE_MPIEXEC), down; isolated")
    r.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    r.add_argument("rest", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    return ap


def run(a, argv: list[str]) -> int:
    """``run``: re-run isolated (:mod:`emulate.isolate`), then inside bring
    the cluster up, run the command with ``$EMULATE_MPIEXEC``, bring it down."""
    rest = a.rest[1:] if a.rest[:1] == ["--"] else a.rest
    if not rest:
        raise EmulateError("give the command to run after --")
    if not a.inside:
        return isolated([sys.executable, "-m", "emulate"] + argv[:1] + ["--inside"] + argv[1:])
    enter()
    c = up(_cluster(a), owner=str(os.getpid()))
    extra = {"EMULATE_MPIEXEC": c.mpiexec}
    if c.core_share is not None:
        extra["EMULATE_CORE"] = c.core
    try:
        return subprocess.run(rest, env=dict(os.environ, **extra)).returncode
    finally:
        down(c.name)


def launch(argv: list[str]) -> int:
    """``[--name NAME] -n N COMMAND...``: become hydra's mpiexec placing the
    ranks on the cluster's nodes (an exec: signals and timeouts reach it)."""
    name = "emu"
    if argv[:1] == ["--name"] and len(argv) > 1:
        name, argv = argv[1], argv[2:]
    elif argv[:1] and argv[0].startswith("--name="):
        name, argv = argv[0].split("=", 1)[1], argv[1:]
    if argv[:1] in (["-h"], ["--help"]):
        print("usage: python -m emulate mpiexec [--name NAME] -n N [-ppn P] COMMAND [ARGS...]\n\n"
              "Run COMMAND as N ranks on the cluster's nodes, block-wise, P per node\n"
              "(default: all of a node's cores), each on its own virtual core where\n"
              "the cluster has them.")
        return 0
    ranks, per_node, rest = split_mpiexec_args(argv)
    cmd = command(load(name), ranks, rest, per_node=per_node)
    os.execvp(cmd[0], cmd)
    return 1


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["mpiexec"]:
            return launch(argv[1:])
        a = _parser().parse_args(argv)
        if a.cmd == "up":
            print(up(_cluster(a)).mpiexec)
        elif a.cmd == "down":
            down(a.name)
        elif a.cmd == "status":
            c = load(a.name)
            print(f"cluster {c.name}: {c.nodes} nodes x {c.cores_per_node} cores"
                  f"{describe_cores(c)}, {c.rate / 1e9:g} Gbit/s links, queue {c.queue:g} s; "
                  f"launcher {c.mpiexec}")
        elif a.cmd == "run":
            return run(a, argv)
    except EmulateError as e:
        print(f"emulate: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
