"""Command line of the instrument package.

  mpiexec -n N python -m instrument trace -o DIR [--force] app.py [args...]
  mpiexec -n N python -m instrument trace -o DIR -m module [args...]
  mpiexec -n N python -m instrument trace --no-c-calls -o DIR app.py [args...]
  mpiexec -n N python -m instrument trace -o DIR ./a.out [args...]   (a compiled program)
  mpiexec -n N python -m instrument record --ranks R1,R2 -o LOG_DIR app.py [args...]
  python -m instrument show DIR
  python -m instrument merge DIR      (salvage a run that crashed or was killed)
"""
from __future__ import annotations

import os
import sys

from launch import in_own_arena, parse_ranks, split_command

VALUED = ("-o", "--output", "--ranks", "--reps", "--watchdog", "--partial")


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # the parser and the tool's modules stay out of the application's heap
    # (launch.in_own_arena); the application runs in this thread
    run = in_own_arena(_plan, argv)
    return run() if callable(run) else run


def _watchdog_option(p) -> None:
    p.add_argument("--watchdog", type=float, metavar="S",
                   help="stop a rank that makes no MPI call and uses no CPU for S seconds, "
                        "saying where it is stuck (default 300; 0: never): a deadlock, or a "
                        "read that never returns, would otherwise hang the job until its "
                        "time limit")


def _set_watchdog(parser, seconds) -> None:
    """--watchdog S, for this process's watchdog (launch/watchdog.py)."""
    if seconds is None:
        return
    if seconds < 0:
        parser.error("--watchdog must be >= 0")
    from launch.watchdog import ENV
    os.environ[ENV] = repr(seconds)


def _c_calls_options(p, what: str, verb: str, *aliases: str) -> None:
    """--c-calls (``what`` it does) and --no-c-calls on the parser ``p``."""
    p.add_argument("--c-calls", *aliases, dest="c_calls", action="store_const", const=True,
                   default=None, help=f"{what}.  The default wherever the MPI library's mpicc "
                                      f"is found; given, its absence is an error")
    p.add_argument("--no-c-calls", dest="c_calls", action="store_const", const=False,
                   help=f"{verb} the calls made through mpi4py only (no shim)")


def _load_shim(argv: list[str], asked: bool | None, who: str = "instrument trace") -> bool | None:
    """Load the PMPI shim that traces the MPI calls made below Python
    (pmpishim/), rerunning this process with its dlsym
    interposer preloaded first.  ``asked``: --c-calls (True), --no-c-calls
    (False) or neither (None: load it if it can be built).  Returns whether
    it is loaded, or None when it was asked for and cannot be."""
    if asked is False:
        return False
    from pmpishim.build import ShimError, load, preloaded_command
    try:
        again = preloaded_command(argv)
        if again:                           # LD_PRELOAD is read when a process starts
            cmd, env = again
            sys.stdout.flush()
            sys.stderr.flush()
            os.execve(cmd[0], cmd, env)
        load()                              # before MPI is initialised
        return True
    except ShimError as e:
        if asked:
            print(f"{who}: error: --c-calls: {e}", file=sys.stderr)
            return None
        if os.environ.get("PMI_RANK", "0") == "0":
            print(f"{who}: note: MPI calls made below Python are neither traced, logged "
                  f"nor counted: {e}", file=sys.stderr)
        return False


def _plan(argv: list[str]):
    """What ``main`` does: a function that traces or records (run in the
    main thread, where the application runs), or an exit code."""
    import argparse

    from .waits import choose_waits
    parser = argparse.ArgumentParser(
        prog="python -m instrument",
        description="Trace mpi4py applications (communication sequence and computation "
                    "vector of every rank) and inspect traces.")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("trace", help="run an application under the tracer (inside mpiexec)",
                       usage="mpiexec -n N python -m instrument trace -o DIR [--force] "
                             "[--keep-raw] [--c-calls | --no-c-calls] [--watchdog S] "
                             "(app.py | -m module | -c command | ./compiled-program) "
                             "[args ...]")
    p.add_argument("-o", "--output", required=True, help="trace directory to create")
    p.add_argument("--force", action="store_true",
                   help="replace an existing trace directory")
    p.add_argument("--keep-raw", action="store_true",
                   help="keep the per-rank raw files after merging")
    _watchdog_option(p)
    _c_calls_options(p, "trace the MPI calls made below Python too (C extensions, compiled "
                        "code, ctypes/cffi/numba) through a PMPI shim built with the MPI "
                        "library's mpicc: they join the trace as events flagged "
                        "below_python; calls the shim only counts are reported as invisible "
                        "(c_calls.csv in the trace)", "trace", "--count-c-calls")
    p = sub.add_parser("record", help="log what flows into chosen ranks (inside mpiexec)",
                       usage="mpiexec -n N python -m instrument record (--ranks R1,R2 | "
                             "--reps REPS.csv) -o LOG_DIR [--partial PARTIAL.csv] [--force] "
                             "[--c-calls | --no-c-calls] "
                             "[--watchdog S] (app.py | ./compiled-program | "
                             "-m module | -c command) [args ...]")
    p.add_argument("-o", "--output", required=True, help="message log directory to create")
    p.add_argument("--ranks", help="comma-separated world ranks to record")
    p.add_argument("--reps", help="representatives CSV from `python -m cluster`: record its "
                                  "representative ranks")
    p.add_argument("--partial", metavar="PARTIAL.csv",
                   help="the partial-replay plan (python -m replay.loops): log each "
                        "representative only up to the call where its replay will stop (a "
                        "warm-up iteration of its main loop and K more); the others whole")
    p.add_argument("--force", action="store_true", help="replace an existing log directory")
    _watchdog_option(p)
    _c_calls_options(p, "log what the recorded ranks' MPI calls made below Python (compiled "
                        "code, ctypes/cffi/numba) received too, through the PMPI shim, so "
                        "that replay answers them (LOG_DIR/rank<R>.clog)", "log")
    p = sub.add_parser("show", help="print a summary of a trace")
    p.add_argument("trace", help="trace directory")
    p.add_argument("--max-ranks", type=int, default=32,
                   help="list at most this many ranks (default 32)")
    p = sub.add_parser("merge", help="merge the raw files of a crashed or killed run")
    p.add_argument("trace", help="trace directory whose raw/ files to merge")
    p.add_argument("--keep-raw", action="store_true",
                   help="keep the per-rank raw files after merging (by default they are "
                        "removed once every rank is complete)")

    if argv and argv[0] == "trace":
        opts, mode, target = split_command(argv[1:], VALUED, "instrument")
        args = parser.parse_args(["trace"] + opts)
        # the application may change directory before the trace is written
        args.output = os.path.abspath(args.output)
        if mode is None:
            parser.error("trace: give the application: app.py, -m module or -c command")
        _set_watchdog(parser, args.watchdog)
        from pmpishim.native import is_native
        if mode == "path" and is_native(target[0]):
            # a compiled program: the PMPI shim traces it all (no Python)
            from .native import trace_native
            waits = choose_waits()
            return lambda: trace_native(args.output, target, force=args.force,
                                        keep_raw=True if args.keep_raw else None, waits=waits)
        c_calls = _load_shim(argv, args.c_calls)
        if c_calls is None:
            return 2
        waits = choose_waits()              # before MPI reads its variables
        from .run import trace_main
        return lambda: trace_main(args.output, target, mode, force=args.force,
                                  keep_raw=True if args.keep_raw else None,
                                  count_c_calls=bool(c_calls), waits=waits)
    if argv and argv[0] == "record":
        opts, mode, target = split_command(argv[1:], VALUED, "instrument")
        args = parser.parse_args(["record"] + opts)
        # the application may change directory before the log is written
        args.output = os.path.abspath(args.output)
        args.reps = args.reps and os.path.abspath(args.reps)
        args.partial = args.partial and os.path.abspath(args.partial)
        if mode is None:
            parser.error("record: give the application: app.py, -m module or -c command")
        _set_watchdog(parser, args.watchdog)
        if bool(args.ranks) == bool(args.reps):
            parser.error("record: give exactly one of --ranks and --reps")
        try:
            ranks = parse_ranks(args.ranks) if args.ranks else None
        except ValueError as e:
            parser.error(f"record: {e}")
        from pmpishim.native import is_native
        if mode == "path" and is_native(target[0]):
            # a compiled program: the PMPI shim logs it all (no Python)
            from .native import record_native
            return lambda: record_native(args.output, ranks, target, force=args.force,
                                         reps=args.reps)
        if _load_shim(argv, args.c_calls, "instrument record") is None:
            return 2
        from .run import record_main
        waits = choose_waits()
        return lambda: record_main(args.output, ranks, target, mode, force=args.force,
                                   reps=args.reps, waits=waits, partial=args.partial)
    args = parser.parse_args(argv)
    from contracts.merge import TraceError
    try:
        if args.cmd == "show":
            from .show import show
            print(show(args.trace, args.max_ranks))
        elif args.cmd == "merge":
            from contracts.merge import merge
            meta = merge(args.trace, keep_raw=True if args.keep_raw else None)
            print(f"merged {meta['events']} events of {meta['size']} ranks; incomplete ranks: "
                  f"{meta['incomplete_ranks'] or 'none'}")
    except TraceError as e:
        print(f"instrument {args.cmd}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
