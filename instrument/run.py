"""Run an unmodified mpi4py application under the tracer (``instrument trace``).

Every rank: initialise MPI, install the interception, run the application as
``__main__`` (a script path, ``-m module`` or ``-c command``), then close its
trace.  Rank 0 prepares the trace directory first and merges it at the end.
"""
from __future__ import annotations

import datetime
import importlib
import json
import os
import signal
import sys
import time

# merge (pandas, pyarrow) is imported only where used: every rank would
# otherwise pay its import time before the application starts

TRACER_VERSION = "1.2"   # 1.1: empty polls folded; 1.2: page faults per span (faults)


from contracts.output import write_json  # noqa: E402  (json only: no heavy imports)
from launch import AtMPIImport, abort_job, in_own_arena, run_app  # noqa: E402  (standard library only)
from launch.progress import report_late_calls, report_progress  # noqa: E402  (standard library only)
from launch.watchdog import watch  # noqa: E402  (standard library only)
from pmpishim.control import set_up_at_c_init  # noqa: E402  (standard library only)

from .waits import recorded  # noqa: E402  (standard library only)

# how often a rank's watcher thread looks for events to flush (a wake-up
# costs microseconds)
WATCH_SECONDS = 0.1


def end_on_sigterm(finish, flush=None, every: float = 1.0) -> None:
    """End this rank on SIGTERM with ``finish("killed by signal 15")``, even
    while its main thread is blocked inside MPI.

    A Python signal handler runs only when the main thread returns to the
    interpreter, which a rank blocked in MPI never does: a deadlocked traced
    run outlived its launcher's SIGTERM by minutes.  The C-level handler
    still writes the signal's number to the wakeup fd, and a watcher thread
    (mpi4py releases the GIL inside MPI) finishes and exits.  ``flush``
    runs every ``every`` seconds meanwhile, so that a rank blocked for
    minutes, or killed outright, loses at most that much.  Other signals
    keep their handlers and meaning."""
    import select
    import threading
    r, w = os.pipe()
    os.set_blocking(w, False)
    signal.set_wakeup_fd(w)

    def ours(signum, frame):
        """The watcher acts; an application's own handler replaces this one."""
    signal.signal(signal.SIGTERM, ours)

    def watch():
        while True:
            ready, _, _ = select.select([r], [], [], every)
            got = os.read(r, 64) if ready else b""
            if signal.SIGTERM in got and signal.getsignal(signal.SIGTERM) is ours:
                finish(f"killed by signal {int(signal.SIGTERM)}")
                os._exit(128 + signal.SIGTERM)
            if flush is not None:
                flush()
    threading.Thread(target=watch, name="repreplay-sigterm", daemon=True).start()


def _when_idle(count, flush, who: str, held=None):
    """A flush of a rank's buffer that acts only when the rank is inside an
    MPI call with events waiting (``held()``: blocked, most likely; killed
    there by the launcher when another rank fails, it keeps them) or made
    no call since the last one (computing at length): a busy rank flushes
    inside its calls, by size and time, and a write from another thread in
    the middle of its computation would be counted into it.  ``count()``:
    calls so far.  A write that fails ends the rank with one message (the
    launcher then ends the others): a blocked rank would never see it."""
    last = [-1]

    def idle_flush():
        n = count()
        if n == last[0] or (held is not None and held()):
            try:
                flush()
            except BaseException as e:          # the trace's WriteError, OSError
                print(f"{who}: error: {e}", file=sys.stderr, flush=True)
                os._exit(2)
        last[0] = n
    return idle_flush


def _shown(rank: int, size: int) -> bool:
    """Whether this rank reports its end: all of a small run, 16 of a large one."""
    return rank % max(1, size // 16) == 0


def is_ours(directory: str, marker: str, kind: str) -> bool:
    """Whether ``directory`` holds our ``marker`` JSON file of this ``kind``:
    the only directories ``--force`` may remove (a user's directory that
    happens to contain a meta.json is not one of ours)."""
    try:
        with open(os.path.join(directory, marker)) as f:
            return json.load(f).get("kind") == kind
    except (OSError, ValueError, AttributeError):
        return False


# (marker file, kind, what it is, what to do): the directories a run writes
TRACE_DIR = ("meta.json", "trace", "a trace directory",
             "choose another directory or pass --force to replace it")
LOG_DIR = ("record.json", "message-log", "a message log directory",
           "pass --force to replace it")


def _refusal(directory: str, force: bool, what: tuple) -> str | None:
    """Why a run may not write into ``directory`` (``what``: TRACE_DIR or
    LOG_DIR), or None.  A non-empty directory is replaced only with
    ``force``, and only if it is ours."""
    marker, kind, name, hint = what
    if os.path.exists(directory) and os.listdir(directory):
        if not force:
            return f"{directory}: already exists and is not empty; {hint}"
        if not is_ours(directory, marker, kind):
            return (f"{directory}: not {name} (no {marker} of kind {kind}); refusing to "
                    f"clear it even with --force")
    return None


def _make_room(directory: str, force: bool, what: tuple) -> str | None:
    """Rank 0, creating the run's directory: why it is refused, or None
    once an earlier run of ours in it is cleared away (``force``)."""
    refused = _refusal(directory, force, what)
    if refused is None and os.path.exists(directory) and os.listdir(directory):
        import shutil
        shutil.rmtree(directory)
    return refused


def _refused_before_start(directory: str, force: bool, what: tuple, who: str) -> bool:
    """Check ``directory`` before the application starts, in every rank
    (each sees the same directory), and say why it is refused once: from
    the rank the launcher numbers 0, or every rank if it numbers none.
    rank 0 checks again when it creates it."""
    refused = _refusal(directory, force, what)
    if refused:
        rank = next((os.environ[k] for k in ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK",
                                             "SLURM_PROCID") if k in os.environ), "0")
        if rank == "0":
            print(f"{who}: error: {refused}", file=sys.stderr)
    return bool(refused)


def _prepare(trace_dir: str, force: bool, argv: list[str], size: int,
             waits: str | None = None) -> str | None:
    """Rank 0: check the output directory and write the initial meta.json
    (``waits``: what instrument/waits.py chose, recorded with how ranks wait).

    Returns an error message, or None.  An existing trace is never overwritten
    unless ``force``: a user's earlier full-scale run may have taken hours.
    """
    refused = _make_room(trace_dir, force, TRACE_DIR)
    if refused:
        return refused
    os.makedirs(os.path.join(trace_dir, "raw"), exist_ok=True)
    import mpi4py
    from mpi4py import MPI
    meta = {
        "kind": "trace", "tracer_version": TRACER_VERSION,
        "argv": argv, "size": size, "cwd": os.getcwd(),
        "mpi_library": MPI.Get_library_version().strip().splitlines()[0],
        "mpi_version": "{}.{}".format(*MPI.Get_version()), "mpi4py_version": mpi4py.__version__,
        "python": sys.version.split()[0],
        "start": datetime.datetime.now(datetime.UTC).isoformat(),
        "end": None, "complete": False, "merged": False,
        "waits": recorded(waits),
    }
    write_json(os.path.join(trace_dir, "meta.json"), meta)
    return None


class SetupError(Exception):
    """A trace or a message log that cannot start: ``message`` for the
    user, said by ``rank`` (every rank raises it: the run stops before the
    application computes anything)."""

    def __init__(self, message: str, rank: int):
        super().__init__(message)
        self.rank = rank


def _start_trace(MPI, trace_dir: str, force: bool, argv: list[str], waits: str | None):
    """Every rank, once MPI is initialised: rank 0 prepares the directory
    (every rank raises its error), then the interception is installed.
    Returns (rank, size, the intercept module)."""
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    err = None
    if rank == 0:
        try:
            err = _prepare(trace_dir, force, argv, size, waits)
        except OSError as e:
            err = f"{trace_dir}: {e}"
    err = world.bcast(err, root=0)
    if err:
        raise SetupError(err, rank)
    if waits and rank == 0:
        print(f"instrument: trace: {waits}", file=sys.stderr, flush=True)
    from . import intercept
    # the allocator is left as the application has it: a heap top pad
    # (M_TOP_PAD) once set here kept NumPy temporaries in the heap and made
    # traced computation up to 6x faster than the real run's
    intercept.install(trace_dir)
    from ._hotpath import count, late
    if rank == 0:
        report_progress(f"instrument: trace: rank 0 of {size}", count, "events")
    report_late_calls(f"instrument: trace: rank {rank}", late)
    return rank, size, intercept


def _on_sigterm(started) -> None:
    """Killed by the launcher or the batch system: keep what we have, also
    while blocked in MPI, and flush meanwhile: a rank killed outright
    (SIGKILL, as mpiexec does when another rank aborts) loses at most the
    events of its last FLUSH_SECONDS while busy, and none once it has
    waited WATCH_SECONDS inside a call (set up in the main thread, where
    signal handlers are set)."""
    rank, _, intercept = started
    R = intercept.R
    end_on_sigterm(intercept.finish, every=WATCH_SECONDS, flush=_when_idle(
        lambda: R.n, R.flush, f"instrument trace: rank {rank}", held=R.held_in_call))


def _run_hooked(hook, target: list[str], mode: str, error: type[BaseException], who: str,
                said, events):
    """Run the application with the tool's ``hook`` (launch.AtMPIImport) in
    place: ``(status, code, the set-up's result)``, or None when the set-up
    failed (rank 0 says why).  ``error``: the tool's write error class; one
    raised in a call ends the run with code 2 and ``said(result, e)``.
    ``events()``: the rank's count of events so far, which the watchdog
    (launch/watchdog.py) watches with its CPU time from now on."""
    watch(f"{who}: rank {os.environ.get('PMI_RANK', '?')}", events)
    try:
        hook.install()
        try:
            status, code = run_app(target, mode, ours=(error, SetupError))
        except error as e:
            print(f"{who}: error: {said(hook.result, e)}", file=sys.stderr, flush=True)
            status, code = f"failed: {e}", 2
        return status, code, hook.ensure()
    except SetupError as e:
        if e.rank == 0:
            print(f"{who}: error: {e}", file=sys.stderr)
        return None


def trace_main(trace_dir: str, target: list[str], mode: str, force: bool = False,
               keep_raw: bool | None = None, count_c_calls: bool = False,
               waits: str | None = None) -> int:
    """Entry point run by every rank; returns the process exit code.

    The application initialises MPI at its own import of ``mpi4py.MPI``;
    the tracer is set up right after, away from the application's heap
    (launch.AtMPIImport), and the first span starts there.
    ``count_c_calls``: the C-level call counter (pmpishim/build.py) was
    loaded before MPI; its counts go beside the trace.  ``waits``: what
    instrument/waits.py chose for this node, said by rank 0."""
    if _refused_before_start(trace_dir, force, TRACE_DIR, "instrument trace"):
        return 2
    # the tracer's C module, loaded away from the application's heap
    WriteError = in_own_arena(importlib.import_module, "instrument._hotpath").WriteError
    argv = [mode] + target if mode != "path" else target
    hook = AtMPIImport(lambda MPI: _start_trace(MPI, trace_dir, force, argv, waits), _on_sigterm)
    if count_c_calls:
        set_up_at_c_init()
    ran = _run_hooked(hook, target, mode, WriteError, "instrument trace",
                      lambda started, e: f"rank {started[0]}: {started[2].R.named(e)}; the "
                                         f"events written before are kept",
                      lambda: hook.result[2].R.n if hook.result else 0)
    if ran is None:
        return 2
    status, code, (rank, size, intercept) = ran
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    intercept.finish(status)
    if _shown(rank, size):
        print(f"instrument: trace: rank {rank} finished ({status}, {intercept.R.n} events)",
              file=sys.stderr, flush=True)
    if count_c_calls:
        from pmpishim import build
        path = os.path.join(trace_dir, "raw", f"ccount{rank}.tsv")
        if not build.dump(path):
            print(f"instrument trace: warning: rank {rank}: could not write the C-level call "
                  f"counts to {path}; this rank's calls below Python go uncounted",
                  file=sys.stderr)
    if code != 0:
        # like `python -m mpi4py`: one failing rank must not leave the others
        # blocked; what every rank wrote stays readable (merge it later).
        abort_job(world, code, intercept.REAL["Comm"].Abort)
        return code

    if not MPI.Is_finalized():
        REAL = intercept.REAL
        REAL["Comm"].Barrier(world)          # untraced: every rank has closed
    else:
        _wait_for_ranks(trace_dir, size) if rank == 0 else None
    if rank == 0:
        finish_trace(trace_dir, size, keep_raw)
    return 0


def finish_trace(trace_dir: str, size: int, keep_raw: bool | None) -> None:
    """Rank 0, once every rank has closed: stamp the end, merge, and say
    what the trace holds and what later stages cannot account for."""
    meta_path = os.path.join(trace_dir, "meta.json")
    with open(meta_path) as f:
        meta = json.load(f)
    meta["end"] = datetime.datetime.now(datetime.UTC).isoformat()
    write_json(meta_path, meta)
    from contracts.merge import merge, trace_warnings
    meta = merge(trace_dir, keep_raw=keep_raw)
    state = "complete" if meta["complete"] else f"INCOMPLETE ranks {meta['incomplete_ranks']}"
    print(f"instrument: trace of {size} ranks, {meta['events']} events -> {trace_dir} "
          f"({state})", file=sys.stderr)
    for w in trace_warnings(meta).values():
        print(f"instrument: WARNING: {w}", file=sys.stderr)


def _wait_for_ranks(trace_dir: str, size: int, timeout: float = 120.0) -> None:
    """After an application's own MPI.Finalize, wait for every rank's close."""
    from contracts.merge import rank_info
    deadline = time.time() + timeout
    pending = set(range(size))
    while pending and time.time() < deadline:
        pending = {r for r in pending if rank_info(trace_dir, r).get("status") == "running"}
        if pending:
            time.sleep(0.05)


def _prepare_log(log_dir: str, force: bool, ranks: list[int] | None, reps: str | None,
                 size: int, target: list[str], mode: str,
                 partial: str | None = None) -> tuple[list[int], dict]:
    """Rank 0: the ranks to record (checked), their cuts (rank -> plan row,
    from the partial-replay plan ``partial``), and the log directory with
    its record.json.  Raises ValueError or OSError with the message for the
    user.  An existing log is replaced only with ``force``, and only if it
    is ours."""
    if ranks is None:
        from contracts.representatives import representative_ranks
        if reps is None:
            raise ValueError("no ranks to record: give --ranks or --reps")
        ranks = representative_ranks(reps, size)
    bad = [r for r in ranks if not 0 <= r < size]
    if bad:
        raise ValueError(f"--ranks {bad} outside 0..{size - 1}")
    cuts: dict = {}
    if partial is not None:
        from contracts.partial import cuts as read_cuts
        cuts = {r: c for r, c in read_cuts(partial).items() if r in ranks}
    refused = _make_room(log_dir, force, LOG_DIR)
    if refused:
        raise ValueError(refused)
    os.makedirs(log_dir, exist_ok=True)
    from contracts.msglog import write_record
    write_record(log_dir, {
        "kind": "message-log", "argv": [mode] + target if mode != "path" else target,
        "size": size, "ranks": ranks, "cwd": os.getcwd(),
        "start": datetime.datetime.now(datetime.UTC).isoformat(),
        "partial": {str(r): c for r, c in cuts.items()}})
    return ranks, cuts


def _start_record(MPI, log_dir, ranks, reps, force, target, mode, waits, partial=None):
    """Every rank, once MPI is initialised: rank 0 checks the ranks and
    prepares the log directory (every rank raises its error); the ranks
    recorded install the message log.  Returns (rank, ranks, the record
    module or None)."""
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    err, cuts = None, {}
    if rank == 0:
        try:
            ranks, cuts = _prepare_log(log_dir, force, ranks, reps, size, target, mode, partial)
        except (OSError, ValueError) as e:
            err = str(e)
    err, ranks, cuts = world.bcast((err, ranks, cuts), root=0)
    if err:
        raise SetupError(err, rank)
    if waits and rank == 0:
        print(f"instrument: record: {waits}", file=sys.stderr, flush=True)
    if rank not in ranks:
        return rank, ranks, None
    from contracts.msglog import clog_path, log_path, script_digest

    from . import record
    header = {"rank": rank, "size": size, "argv": target, "mode": mode,
              "script_sha256": script_digest(target, mode)}
    if rank in cuts:
        header["partial"] = cuts[rank]
    record.install(log_path(log_dir, rank), header)
    from pmpishim.control import ShimError, record_below_python
    try:
        record_below_python(clog_path(log_dir, rank), rank, size)
    except ShimError as e:
        raise SetupError(f"rank {rank}: cannot log its calls below Python: {e}", 0) from None
    report_late_calls(f"instrument: record: rank {rank}", lambda: record.W.late)
    if rank == ranks[0]:
        report_progress(f"instrument: record: rank {rank}", lambda: record.W.index, "records")
    return rank, ranks, record


def _on_sigterm_record(started) -> None:
    """As :func:`_on_sigterm`, for a recorded rank's log."""
    rank, _, record = started
    if record is not None:
        W = record.W
        end_on_sigterm(record.finish, every=WATCH_SECONDS, flush=_when_idle(
            lambda: W.index, W.flush, f"instrument record: rank {rank}: {W.path}"))


def _finish_below_python(log_dir: str, rank: int, status: str) -> int | None:
    """Close the rank's C log (its calls below Python): the records it
    holds (a log of none is removed: the replay then needs no shim), or
    None when it could not be written."""
    from contracts.msglog import clog_path
    from pmpishim.control import loaded, stop_recording
    if not loaded():
        return 0
    path = clog_path(log_dir, rank)
    n = stop_recording(status == "complete")
    if n is None:
        print(f"instrument record: error: rank {rank}: {path}: could not be written completely",
              file=sys.stderr, flush=True)
        return None
    if n == 0 and os.path.exists(path):
        os.remove(path)
    elif n:
        print(f"instrument: record: rank {rank}: {n} calls made below Python logged in {path}",
              file=sys.stderr, flush=True)
    return n


def record_main(log_dir: str, ranks: list[int] | None, target: list[str], mode: str,
                force: bool = False, reps: str | None = None, waits: str | None = None,
                partial: str | None = None) -> int:
    """Entry point of ``instrument record`` on every rank.

    Set up as the tracer is (at the application's import of ``mpi4py.MPI``,
    away from its heap).  ``ranks``: the world ranks to record, or None to
    take the representatives of the file ``reps`` (read by rank 0 alone:
    pandas in every rank would add its import time to the full-scale run);
    ``partial``: the partial-replay plan (contracts/partial.py), whose
    representatives' logs stop at their cuts."""
    if _refused_before_start(log_dir, force, LOG_DIR, "instrument record"):
        return 2
    LogError = in_own_arena(importlib.import_module, "contracts.msglog").LogError
    hook = AtMPIImport(lambda MPI: _start_record(MPI, log_dir, ranks, reps, force, target, mode,
                                                 waits, partial), _on_sigterm_record)
    set_up_at_c_init()
    ran = _run_hooked(hook, target, mode, LogError, "instrument record",
                      lambda started, e: f"rank {started[0]}: {e}",
                      lambda: hook.result[2].W.index if hook.result and hook.result[2] else 0)
    if ran is None:
        return 2
    status, code, (rank, ranks, rec) = ran
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    if rec is not None:
        records = rec.W.index
        try:
            rec.finish(status)
        except LogError as e:
            if code == 0:                  # else the first error said it already
                print(f"instrument record: error: rank {rank}: {e}", file=sys.stderr,
                      flush=True)
                code = 2
        below = _finish_below_python(log_dir, rank, status)
        if below is None and code == 0:
            code = 2
        records += below or 0
        print(f"instrument: record: rank {rank} finished ({status}, {records} records)",
              file=sys.stderr, flush=True)
    if code != 0:
        abort_job(world, code, MPI.Comm.Abort)
        return code
    if rank == 0:
        print(f"instrument: message log of rank(s) {ranks} -> {log_dir}", file=sys.stderr)
    return 0
