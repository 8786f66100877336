"""python -m replay: run representatives alone, answered from their message logs."""
from __future__ import annotations

import importlib
import os
import sys

from launch import bind_command, in_own_arena, split_command

VALUED = ("--rank", "--ranks", "--reps", "--size", "--log", "-o", "--output",
          "--concurrent", "--repeats", "--load", "--watchdog", "--bind-command",
          "--copies")
# (--force takes no value)


def _alone() -> None:
    """Make MPI start as a singleton even inside a launcher's job step.

    Under srun or mpiexec the environment carries a process manager's
    address (PMI_*); MPI_Init would try to join that job and fail.  A replay
    is one process on its own: drop those before mpi4py is imported."""
    import os
    for k in list(os.environ):
        if k.startswith(("PMI_", "PMIX_", "HYDI_", "HYDRA_")):
            del os.environ[k]


def _refuse_to_overwrite(ranks: list[int], out_dir: str) -> None:
    """A replay already in ``out_dir`` is kept unless --force."""
    import os

    from .run import ReplayError
    there = [r for r in ranks if os.path.exists(os.path.join(out_dir, f"rank{r}.csv"))]
    if there:
        raise ReplayError(f"{out_dir}: already holds the replay of rank(s) {there}; pass "
                          f"--force to replace it, or choose another directory")


def _logged_size(log_dir: str) -> int | None:
    """N of the recorded run, from the log's record.json (None if unreadable:
    the replay itself then says what is wrong with the log)."""
    from contracts.msglog import LogError, read_record
    try:
        return read_record(log_dir)["size"]
    except LogError:
        return None


def _parse(argv: list[str]):
    """The options, the application and the parser (for its errors)."""
    import argparse
    ap = argparse.ArgumentParser(
        prog="python -m replay",
        usage="python -m replay (--rank R | --ranks R1,R2 | --reps REPS.csv) --log LOG_DIR "
              "-o OUT_DIR [--size N] [--concurrent K] [--load K] [--repeats K] "
              "(app.py | -m module | -c cmd) [args]",
        description="Replay ranks of a recorded run one at a time (or K at once) on this "
                    "node and measure their computation between MPI calls.  Writes "
                    "OUT_DIR/rank<R>.csv with rank, seq, op, comp, cpu (seconds; the "
                    "replay's own cost per call, measured at the end, is taken out); "
                    "with --ranks, --reps, --load or --repeats also "
                    "OUT_DIR/variability_rank<R>.csv (docs/FILES.md).",
        epilog="A target node elsewhere (no shared file system, another login): python -m "
               "replay pack | run-bundle | unpack, each with its own --help.")
    ap.add_argument("--rank", type=int, help="replay this rank in this process")
    ap.add_argument("--ranks", help="comma-separated ranks, each in its own process")
    ap.add_argument("--reps", help="representatives CSV from `python -m cluster`")
    ap.add_argument("--size", type=int, help="N of the recorded run (checked against the log)")
    ap.add_argument("--log", required=True, help="message log directory (instrument record)")
    ap.add_argument("-o", "--output", required=True, help="output directory")
    ap.add_argument("--concurrent", type=int, default=1,
                    help="replay K ranks at once, one per core, to mimic a loaded node "
                         "(default 1: one at a time)")
    ap.add_argument("--load", type=int, default=0,
                    help="replay each rank as K concurrent copies, one rank after the "
                         "other, each copy bound to a core of its own where there are K: "
                         "the measured replay shares the node as its rank did in the full "
                         "run (K = ranks per node there), and every copy's times are kept "
                         "(OUT_DIR/copies/) and summarised in OUT_DIR/variability_rank<R>.csv: "
                         "the cores' speeds and the run-to-run and span-to-span noise that "
                         "the simulator samples (default 0: alone, nothing measured to vary)")
    ap.add_argument("--copies", choices=("in-step", "free"), default="in-step",
                    help="with --load K: in-step (the default) holds the K copies together "
                         "at every call that waits for another rank in the run (collectives, "
                         "receives, waits), so that they contend for the node phase against "
                         "phase as the run's ranks do; free lets each copy run on alone "
                         "(they drift apart, and each then computes beside a different mix "
                         "of the others' phases)")
    ap.add_argument("--bind-command", metavar="CMD",
                    help="start copy C (or each replay, on core 0) as `CMD C COMMAND...` "
                         "instead of binding it with sched_setaffinity: an emulated node's "
                         "virtual cores (`python -m emulate up --core-share F` prints its "
                         "core script), or a site's own binding tool taking a core number")
    ap.add_argument("--force", action="store_true",
                    help="replace OUT_DIR/rank<R>.csv and rank<R>.out of the ranks replayed "
                         "(by default an existing replay is never overwritten)")
    ap.add_argument("--any-command", action="store_true",
                    help="replay although the application's command line differs from the "
                         "recorded one (its script's directory is never compared; use this "
                         "when input paths moved on the target): every call is still checked "
                         "against the log, and the first that differs stops the replay")
    ap.add_argument("--watchdog", type=float,
                    help="stop a replayed rank that makes no MPI call for this many seconds, "
                         "saying where it is stuck (default 300; 0: never): a replay only "
                         "blocks in what the tracer did not see, such as MPI called below "
                         "Python.  On a virtual core of share F (python -m emulate "
                         "--core-share) these are the core's seconds, 1/F wall seconds each")
    ap.add_argument("--repeats", type=int, default=1,
                    help="replay every rank K times (each in its own process, into "
                         "OUT_DIR/repeat<K>/; OUT_DIR/repeats_rank<R>.csv lists them) and "
                         "keep, per rank, the replay with the least total computation: the "
                         "least disturbed run, as a validation keeps the fastest of its real "
                         "runs (default 1)")
    opts, mode, target = split_command(argv, VALUED, "replay")
    a = ap.parse_args(opts)
    # the application may change directory while its replay is measured
    a.output, a.log = os.path.abspath(a.output), os.path.abspath(a.log)
    a.reps = a.reps and os.path.abspath(a.reps)
    if mode is None:
        ap.error("give the application: app.py, -m module or -c command")
    if a.repeats < 1:
        ap.error("--repeats must be >= 1")
    if a.load < 0:
        ap.error("--load must be >= 0")
    if a.bind_command:
        a.bind_command = bind_command(ap, a.bind_command)
    if a.watchdog is not None:
        if a.watchdog < 0:
            ap.error("--watchdog must be >= 0")
        from .watchdog import ENV
        os.environ[ENV] = repr(a.watchdog)      # this process and the replays it starts
    return a, mode, target, ap


def _load_shim(argv: list[str], log_dir: str, rank: int) -> None:
    """Where ``rank`` made MPI calls below Python when recorded (its C log
    is there), load the PMPI shim that answers them, before MPI; rerun this
    process with its dlsym interposer preloaded first (ctypes lookups on
    the MPI library's handle are answered too, as they were logged)."""
    from contracts.msglog import clog_path
    if not os.path.exists(clog_path(log_dir, rank)):
        return
    from pmpishim.build import load, preloaded_command
    again = preloaded_command(argv, "replay")
    if again:                               # LD_PRELOAD is read when a process starts
        cmd, env = again
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(cmd[0], cmd, env)
    load()


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("pack", "run-bundle", "unpack"):
        # the replay carried to a node elsewhere (replay/bundle)
        from .bundle.cli import main as bundle_main
        return bundle_main(argv)
    _alone()
    # parsing and the tool's modules stay out of the application's heap
    a, mode, target, ap = in_own_arena(_parse, argv)
    # the runners and the log's reader loaded there too (not replay.fake,
    # which imports mpi4py.MPI: the application initialises MPI); the
    # imports below then find them loaded
    in_own_arena(importlib.import_module, "replay.run")
    from contracts.msglog import LogError

    from .errors import Divergence, ReplayError
    from .run import replay_many, replay_rank
    try:
        if a.rank is not None and not a.force:
            _refuse_to_overwrite([a.rank], a.output)
        if a.rank is not None and (a.repeats > 1 or a.load > 1 or a.bind_command):
            replay_many([a.rank], a.size, a.log, a.output, target, mode, 1,
                        repeats=a.repeats, load=a.load, any_command=a.any_command,
                        bind=a.bind_command, in_step=a.copies == "in-step")
        elif a.rank is not None:
            from pmpishim.build import ShimError
            from pmpishim.native import is_native
            if mode == "path" and is_native(target[0]):
                # a compiled program: run alone, the shim answering it all
                from .run import replay_native
                path = replay_native(a.rank, a.size, a.log, a.output, target, a.any_command)
                print(f"replay: rank {a.rank} -> {path}", file=sys.stderr)
                return 0
            try:
                _load_shim(argv, a.log, a.rank)
            except ShimError as e:
                raise ReplayError(f"rank {a.rank}: it made MPI calls below Python when "
                                  f"recorded, and the shim that answers them cannot be "
                                  f"loaded: {e}") from None
            path = replay_rank(a.rank, a.size, a.log, a.output, target, mode, a.any_command)
            print(f"replay: rank {a.rank} -> {path}", file=sys.stderr)
            from . import fake
            if fake.RP is not None and fake.RP.stopped:
                # stopped inside the application: its threads and exit
                # handlers would run on (or wait) for nothing
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(0)
        else:
            if bool(a.ranks) == bool(a.reps):
                ap.error("give exactly one of --rank, --ranks and --reps")
            if a.ranks:
                from launch import parse_ranks
                try:
                    ranks = parse_ranks(a.ranks)
                except ValueError as e:
                    ap.error(str(e))
            else:
                # the driver only: a replayed rank never imports pandas
                from contracts.representatives import RepresentativesError, representative_ranks
                try:
                    ranks = representative_ranks(a.reps, a.size or _logged_size(a.log))
                except RepresentativesError as e:
                    print(f"replay: error: {e}", file=sys.stderr)
                    return 2
            if not a.force:
                _refuse_to_overwrite(ranks, a.output)
            replay_many(ranks, a.size, a.log, a.output, target, mode, a.concurrent,
                        repeats=a.repeats, load=a.load, any_command=a.any_command,
                        bind=a.bind_command, in_step=a.copies == "in-step")
    except (LogError, Divergence, ReplayError, OSError) as e:
        print(f"replay: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
