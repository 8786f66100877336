"""The bundle's commands: python -m replay pack | run-bundle | unpack."""
from __future__ import annotations

import argparse
import os
import sys

COMMANDS = ("pack", "run-bundle", "unpack")


def _pack(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m replay pack",
        description="Pack what a target node elsewhere needs to replay the representatives "
                    "into one archive: the message log, the application's files (its "
                    "script and the Python files beside it, the files its arguments name "
                    "under the recorded working directory, --include), the requirements "
                    "pinned at the versions installed here, this project's source and "
                    "run.sh.  On the target: tar xzf BUNDLE; bash bundle/run.sh; bring "
                    "back results.tar.gz and run python -m replay unpack (docs/METHODS.md, "
                    "'Replaying on a node elsewhere').")
    ap.add_argument("--log", required=True, help="message log directory (instrument record)")
    ap.add_argument("-o", "--output", required=True, help="the bundle archive (.tar.gz)")
    ap.add_argument("--repeats", type=int, default=1,
                    help="rounds per representative on the target (python -m replay "
                         "--repeats; run.sh can override)")
    ap.add_argument("--load", type=int, default=0,
                    help="copies of each representative at once on the target (python -m "
                         "replay --load: ranks per node of the full run; run.sh can override)")
    ap.add_argument("--include", action="append", default=[], metavar="PATH",
                    help="carry this file or directory too (relative to the recorded "
                         "working directory): data the application opens that its "
                         "arguments do not name; repeatable")
    ap.add_argument("--requirement", action="append", default=[], metavar="SPEC",
                    help="install this requirement on the target too (a pip specifier): "
                         "what the application imports indirectly; repeatable")
    ap.add_argument("--wheels", action="store_true",
                    help="carry the requirements' wheels for this host's platform, so that "
                         "a target of the same platform needs no package index")
    a = ap.parse_args(argv)
    if a.repeats < 1 or a.load < 0:
        ap.error("--repeats must be >= 1 and --load >= 0")
    from .pack import pack
    man = pack(a.log, a.output, repeats=a.repeats, load=a.load, include=tuple(a.include),
               extra=tuple(a.requirement), wheels=a.wheels)
    size = os.path.getsize(a.output)
    print(f"pack: {a.output}: {len(man['files'])} files, {size / 1e6:.1f} MB; rank(s) "
          f"{man['ranks']} of N={man['size']}; {len(man['requirements'])} requirement(s)",
          file=sys.stderr)
    return 0


def _run_bundle(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m replay run-bundle",
        description="On the target node (bundle/run.sh calls this in its own venv): check "
                    "the unpacked bundle's digests, the installed versions, byte order and "
                    "MPI library; build the PMPI shim where a representative called MPI "
                    "below Python; replay every representative; measure the node; write "
                    "the results archive.")
    ap.add_argument("bundle", help="the unpacked bundle directory")
    ap.add_argument("-o", "--output", required=True, help="the results archive (.tar.gz)")
    ap.add_argument("--repeats", type=int, help="rounds per representative (default: packed)")
    ap.add_argument("--load", type=int,
                    help="copies of each representative at once (default: packed)")
    ap.add_argument("--bind-command", metavar="CMD",
                    help="start copy C as `CMD C COMMAND...` (python -m replay --bind-command)")
    ap.add_argument("--watchdog", type=float, help="python -m replay --watchdog")
    ap.add_argument("--any-version", action="store_true",
                    help="replay although a requirement is installed at another version "
                         "than the recorded one")
    a = ap.parse_args(argv)
    if a.bind_command:
        from launch import bind_command
        a.bind_command = bind_command(ap, a.bind_command)
    from .run import run_bundle
    run_bundle(a.bundle, a.output, repeats=a.repeats, load=a.load, bind=a.bind_command,
               any_version=a.any_version, watchdog=a.watchdog)
    return 0


def _unpack(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m replay unpack",
        description="Check a results archive from run-bundle (digests, that it is of the "
                    "given bundle and of this version) and put its replays into OUT_DIR, "
                    "where python -m replay.expand reads them, with nodes.json (the host's and the "
                    "target's facts and speed probes).")
    ap.add_argument("results", help="the results archive from the target")
    ap.add_argument("-o", "--output", required=True, help="the replay directory")
    ap.add_argument("--bundle", help="the bundle archive it must be the results of")
    ap.add_argument("--rank", type=int, help="unpack this representative's replay only")
    ap.add_argument("--force", action="store_true", help="replace replays already there")
    a = ap.parse_args(argv)
    from .unpack import unpack
    unpack(a.results, a.output, bundle=a.bundle, rank=a.rank, force=a.force)
    return 0


def main(argv: list[str]) -> int:
    """Run ``argv[0]`` (one of COMMANDS) with the rest of ``argv``."""
    from . import BundleError
    run = {"pack": _pack, "run-bundle": _run_bundle, "unpack": _unpack}[argv[0]]
    try:
        return run(argv[1:])
    except BundleError as e:
        print(f"{argv[0]}: error: {e}", file=sys.stderr)
        return 2
