"""Replay runners: one rank in this process, or several as subprocesses."""
from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import time

from contracts.msglog import LogError, LogReader, clog_path, log_path, read_record
from contracts.output import OutputError, write_atomic
from emulate.cores import own_core
from launch import command_line

from .errors import Divergence, ReplayCut, ReplayError
from .lockstep import ENV as LOCKSTEP_ENV
from .lockstep import Keeper


def check_command(header: dict, path: str, target: list[str], mode: str) -> None:
    """Refuse to replay an application other than the recorded one: its
    arguments decide its message sizes, and a replay given others runs on
    answers meant for another run.  The script may live elsewhere on the
    target (its directory is not compared); a changed script is a warning."""
    argv, rmode = header.get("argv"), header.get("mode", "path")
    if not isinstance(argv, list) or not argv:
        return
    ours = list(target)
    if mode == "path" and rmode == "path":
        ours[0], argv = os.path.basename(ours[0]), [os.path.basename(str(argv[0]))] + argv[1:]
    if (rmode, argv) != (mode, ours):
        raise LogError(f"{path}: recorded as `{' '.join(command_line(argv, rmode))}`, but "
                       f"replay was given `{' '.join(command_line(ours, mode))}`; replay "
                       f"the recorded command line (or pass --any-command to replay anyway)")
    digest = header.get("script_sha256")
    if digest and mode == "path":
        from contracts.msglog import script_digest
        if script_digest(target, mode) not in (None, digest):
            print(f"replay: warning: {target[0]} changed since it was recorded; a change "
                  f"that alters its MPI calls stops the replay at the first one",
                  file=sys.stderr)


def open_log(rank: int, size: int | None, log_dir: str, target: list[str], mode: str,
             any_command: bool = False) -> LogReader:
    """Rank ``rank``'s message log, refused before anything runs when it is
    not complete, of another rank or N, or of another command line, or its
    directory has no record of what was recorded."""
    record = read_record(log_dir)
    if rank not in record["ranks"]:
        raise LogError(f"{log_dir}: rank {rank} was not recorded (the log holds rank(s) "
                       f"{record['ranks'][:20]})")
    log = LogReader(log_path(log_dir, rank))
    h = log.header
    if h.get("rank") != rank:
        raise LogError(f"{log.path}: this log is of rank {h.get('rank')}, not {rank}")
    if size is not None and h.get("size") != size:
        raise LogError(f"{log.path}: recorded with {h.get('size')} ranks, not --size {size}")
    if not any_command:
        check_command(h, log.path, target, mode)
    return log


def _install(log, rank: int, clog: str | None = None):
    """Make this process ``rank`` of the logged run (replay.fake), with a
    progress line, a note of calls after the end and a watchdog.
    ``clog``: the rank's C log, when it made calls below Python: the shim
    answers those from it."""
    from . import fake
    if clog is not None:
        from pmpishim.control import ShimError, answer_below_python
        try:
            fake.BELOW = answer_below_python(clog, rank, log.header.get("size"))
        except ShimError as e:
            raise LogError(str(e)) from None
    rp = fake.install(log, rank)
    from launch.progress import report_late_calls, report_progress
    report_progress(f"replay: rank {rank}", lambda: rp.seq, "calls replayed")
    # calls after finalize were not logged: answered with nothing
    report_late_calls(f"replay: rank {rank}", lambda: rp.late)
    # a replay never hangs: stopped, with where it is stuck, when no call
    # comes for a long time (MPI below Python blocks in a one-process world)
    from .watchdog import watch
    watch(rank, rp)
    return rp


def replay_rank(rank: int, size: int | None, log_dir: str, out_dir: str,
                target: list[str], mode: str, any_command: bool = False) -> str:
    """Run the application as ``rank`` from its log; write OUT/rank<R>.csv.

    Nothing heavy (numpy, pandas) is imported before the application: its
    start-up span must cost what it cost in the traced run.

    Columns: ``seq`` (call index, as in the trace), ``op``, ``comp`` (wall
    seconds of computation before the call, on this node), ``cpu``; both
    less the replay's own per-call overhead (:func:`replay.fake.overhead`,
    measured along the run, :func:`less_overhead`);
    ``polls`` (empty polls folded into the call: Iprobe, Test* answered
    "nothing" because the recorded run found nothing there) and
    ``poll_cpu`` (the CPU seconds from the first of them to the call:
    work the application did between them); ``inside`` (seconds of the
    call's own work between its messages: mpi4py's reducing in an
    allreduce of objects, before the broadcast of the result)."""
    from launch import AtMPIImport, in_own_arena, run_app
    # the replay's own modules, log and threads stay out of the
    # application's heap, and MPI is initialised by the application's own
    # import of mpi4py.MPI, as in a plain run (launch.AtMPIImport); no heap
    # top pad either: heat's KMeans.fit took 1.1 s for real, 0.55-0.7 s
    # replayed with a 64 MiB pad
    log = in_own_arena(open_log, rank, size, log_dir, target, mode, any_command)
    path = clog_path(log_dir, rank)
    clog = path if os.path.exists(path) else None
    hook = AtMPIImport(lambda MPI: _install(log, rank, clog))
    hook.install()
    if clog is not None:
        from pmpishim.control import set_up_at_c_init
        set_up_at_c_init()
    # a divergence or a damaged record is reported as itself, not as the
    # application's failure with its traceback
    try:
        status, code = run_app(target, mode, ours=(Divergence, LogError, ReplayCut))
    except ReplayCut:
        status, code = "stopped at its cut", 0
    rp = hook.ensure()
    from . import fake
    if code != 0:
        raise ReplayError(f"rank {rank}: the application {status} during replay "
                          f"(at event {rp.seq}, log record {log.index})")
    if rp.cut is not None and not rp.stopped:
        raise ReplayError(f"rank {rank}: its log was cut for a partial replay at event "
                          f"{rp.cut['cut']}, but the application ended at event {rp.seq}")
    if not rp.stopped:
        fake.finish()
    # the replay's own cost between calls is not the application's
    # computation: measured once more at the end, unless the application
    # finalised MPI itself (the probe's calls need MPI; the probes taken
    # along the run, the first at its first call, stand)
    if not hook.module.Is_finalized() or not rp.probes:
        rp.probes.append((rp.seq, *(fake.overhead() if not hook.module.Is_finalized()
                                    else (0.0, 0.0))))
    rows = on_core_share(less_overhead(rp.rows, rp.probes))
    faults = rp.faults
    # the work inside calls (objects.answer) is CPU seconds, in the core's
    # clock like the spans
    share = own_core()[0]
    rp.inside = {seq: s / share for seq, s in rp.inside.items()}
    if fake.BELOW is not None:
        rows, rp.inside = _with_below_python(rank, rows, rp, fake.BELOW)
        faults = {}                 # the shim's spans count none
    busy = _busy_warning(rank, rows)
    if busy:
        print(f"replay: warning: {busy}", file=sys.stderr)
    walls = sorted(p[1] for p in rp.probes)
    print(f"replay: rank {rank}: {walls[len(walls) // 2] * 1e6:.2f} us of replay overhead per "
          f"call taken out of {len(rows)} computation spans (median of {len(walls)} "
          f"measurements along the run, {walls[0] * 1e6:.2f}-{walls[-1] * 1e6:.2f} us)",
          file=sys.stderr)
    if rp.fault_seconds:
        print(f"replay: note: rank {rank}: {rp.fault_seconds * 1e3:.3f} CPU ms of page faults in "
              f"receives into memory the application had not touched yet, charged to the "
              f"spans after those calls (MPI's copy pays them in a real run)", file=sys.stderr)
    if rp.object_seconds:
        print(f"replay: note: rank {rank}: {rp.object_seconds * 1e3:.3f} CPU ms of mpi4py's "
              f"pickling and reducing in collectives of Python objects, redone and charged "
              f"to the spans around those calls", file=sys.stderr)
    if rp.stopped:
        _write_partial(out_dir, rank, rp.cut, len(rows))
    else:                                   # one left by an earlier partial replay
        from contracts.replayed import partial_path
        side = partial_path(os.path.join(out_dir, f"rank{rank}.csv"))
        if os.path.exists(side):
            os.remove(side)
    return _write_rows(out_dir, rank, rows, rp.inside, faults, fault_seconds())


def fault_seconds(pages: int = 4096, passes: int = 3) -> float:
    """Seconds this node takes per page fault, in the spans' own clock
    (:func:`on_core_share`): the least over ``passes`` of touching
    ``pages`` fresh 4 KiB pages of anonymous memory (no huge pages), each
    pass's time divided by the faults it counted.  A fault maps and
    zeroes a page: kernel time that a span pays when the application
    touches memory that malloc gave back to the kernel, which
    replay.expand charges where the traced run faulted more than the
    replay (docs/METHODS.md, "The application's own heap")."""
    import mmap

    from .fake import minor_faults
    best = None
    for _ in range(passes):
        m = mmap.mmap(-1, pages * mmap.PAGESIZE)
        if hasattr(m, "madvise") and hasattr(mmap, "MADV_NOHUGEPAGE"):
            m.madvise(mmap.MADV_NOHUGEPAGE)
        f0 = minor_faults()
        t0, c0 = time.perf_counter(), time.process_time()
        m[::mmap.PAGESIZE] = b"\1" * pages
        t1, c1 = time.perf_counter(), time.process_time()
        n = minor_faults() - f0
        m.close()
        # the pass as a span (its wall and CPU seconds) in the spans' clock
        took = on_core_share([(0, "probe", t1 - t0, c1 - c0, 0, 0.0)])[0][2]
        if n >= pages // 2 and (best is None or took / n < best):
            best = took / n
    return best or 0.0


def _write_partial(out_dir: str, rank: int, plan: dict, rows: int) -> None:
    """OUT/rank<R>.partial.json beside a partial replay (contracts/replayed.py):
    the loop it stopped in, for replay.expand to fill in the rest."""
    from contracts.output import write_json
    from contracts.replayed import partial_path
    os.makedirs(out_dir, exist_ok=True)
    write_json(partial_path(os.path.join(out_dir, f"rank{rank}.csv")),
               {"rank": rank, "rows": rows, **plan})
    print(f"replay: note: rank {rank}: partial replay: {rows} of {plan['events']} events "
          f"({plan['events'] / rows:.1f}x fewer): the loop of {plan['period']} calls from "
          f"event {plan['start']}, {plan['warmup']} warm-up and {plan['replayed']} of its "
          f"{plan['iterations']} iterations replayed", file=sys.stderr)


def on_core_share(rows: list) -> list:
    """Spans in the core's own clock: on a virtual core that runs at a
    share F of a real CPU in quota periods of P seconds
    (``REPREPLAY_CORE_SHARE``, ``REPREPLAY_CORE_PERIOD``, set by an
    emulated cluster's ``core`` script), a second of its work takes 1/F
    real CPU seconds' worth of wall time, so CPU seconds are divided by F.

    A span's computation is its CPU seconds / F, and its wall seconds
    only beyond that by more than one period (a real wait: a file, a
    sleep).  Its wall seconds alone depend on where the quota's pauses
    fell: inside a span or inside the replayed call around it (a system
    call there is where the kernel stops a process that ran past its
    quota), off by up to a period per span, and jacobi's replayed spans
    at F = 0.1 summed to 0.8 of their CPU seconds / F."""
    share, period = own_core()
    if share == 1.0:
        return rows
    out = []
    for seq, op, comp, cpu, polls, poll_cpu in rows:
        work = cpu / share
        out.append((seq, op, work + max(comp - work - period, 0.0), work,
                    polls, poll_cpu / share))
    return out


def _write_rows(out_dir: str, rank: int, rows: list, inside: dict, faults: dict,
                fault_s: float) -> str:
    """OUT/rank<R>.csv (contracts/replayed.py) from the replay's rows;
    ``faults``: seq -> page faults in its span (-1 where not counted),
    ``fault_s``: this node's seconds per fault."""
    path = os.path.join(out_dir, f"rank{rank}.csv")

    def write(tmp):
        with open(tmp, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["rank", "seq", "op", "comp", "cpu", "polls", "poll_cpu", "inside",
                        "faults", "fault_s"])
            w.writerows((rank, seq, op, repr(c), repr(u), n, repr(pc),
                         repr(inside.get(seq, 0.0)), faults.get(seq, -1), repr(fault_s))
                        for seq, op, c, u, n, pc in rows)
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise OutputError(f"{out_dir}: cannot create ({e.strerror})") from None
    write_atomic(path, write)
    return path


def replay_native(rank: int, size: int | None, log_dir: str, out_dir: str,
                  target: list[str], any_command: bool = False) -> str:
    """Replay rank ``rank`` of a recorded compiled program (no Python in
    it): the program runs alone with the PMPI shim preloaded, every MPI
    call it makes answered from the rank's C log, and its rows (from
    MPI_Init to MPI_Finalize, as its trace's events) come back from the
    shim; writes OUT/rank<R>.csv.  The shim's own cost per call, a tenth
    of a microsecond, is not taken out."""
    import tempfile

    from pmpishim import build
    from pmpishim.control import rows_from_bytes
    from pmpishim.native import preloaded_env, run_program

    from .below_python import interleave
    log = open_log(rank, size, log_dir, target, "path", any_command)
    clog = clog_path(log_dir, rank)
    if not os.path.exists(clog):
        raise LogError(f"{clog}: missing; the compiled program's calls were not logged "
                       f"(record it again with `instrument record ./program`)")
    try:
        lib_dir = build.build()
    except build.ShimError as e:
        raise ReplayError(f"rank {rank}: the shim that answers a compiled program's calls "
                          f"cannot be built: {e}") from None
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        rows_path = os.path.join(tmp, "rows")
        env = preloaded_env(lib_dir, REPREPLAY_NATIVE_REPLAY=clog,
                            REPREPLAY_NATIVE_RANK=str(rank),
                            REPREPLAY_NATIVE_SIZE=str(log.header["size"]),
                            REPREPLAY_NATIVE_ROWS=rows_path)
        code = run_program(target, env, "replay", rank)
        if code != 0 or not os.path.exists(rows_path):
            raise ReplayError(f"rank {rank}: the program exited {code} during replay")
        with open(rows_path, "rb") as f:
            c_rows = rows_from_bytes(f.read())
    rows, _ = interleave([], [], c_rows, {})
    print(f"replay: note: rank {rank}: {len(rows)} calls of the compiled program answered by "
          f"the PMPI shim from its C log", file=sys.stderr)
    return _write_rows(out_dir, rank, rows, {}, {}, 0.0)


def _with_below_python(rank: int, rows: list, rp, below) -> tuple[list, dict]:
    """The rows with those of the calls the shim answered below Python
    (replay/below_python.py), after checking that the application made all
    the logged ones."""
    left = below.left()
    if left:
        raise ReplayError(f"rank {rank}: the application ended with {left} logged call(s) "
                          f"below Python not made (it took another path than when recorded)")
    below.finished()
    from .below_python import interleave
    c_rows = below.rows()
    print(f"replay: note: rank {rank}: {len(c_rows)} calls below Python answered by the "
          f"PMPI shim from its C log",
          file=sys.stderr)
    return interleave(rows, rp.clocks, c_rows, rp.inside)


def _busy_warning(rank: int, rows: list) -> str | None:
    """replay.busy's warning for these rows (seq, op, comp, cpu, polls, poll_cpu)."""
    import numpy as np  # the application has run: imports are free now

    from .busy import describe
    comp = np.array([r[2] for r in rows])
    cpu = np.array([r[3] for r in rows])
    return describe(rank, comp, cpu)


def less_overhead(rows: list, probes: list) -> list:
    """Replay rows ``(seq, op, comp, cpu, polls, poll_cpu)`` less the
    replay's own cost per call (and per folded poll), as measured nearest
    each span: ``probes`` are ``(seq, wall, cpu)`` in seq order, linearly
    interpolated between two, the nearest one before the first and after
    the last.

    Spans never go below zero, yet the sum is kept: the cost taken out is
    a mean, around which single spans of a loop with nothing between its
    calls scatter both ways (1.0-2.3 us against 1.4 us), and cutting the
    short ones at zero would leave the long ones' excess in (0.57 us a
    span, the application's own being 0.03).  So what a span could not
    give is owed by the next ones, up to DEBT_CALLS calls' worth: enough
    for the scatter of a loop to cancel, too little to carry an error of
    the estimate into a long span further on."""
    out, j = [], 0
    owed_w = owed_c = 0.0
    for seq, op, c, u, n, pc in rows:
        while j + 1 < len(probes) and probes[j + 1][0] <= seq:
            j += 1
        s0, w0, c0 = probes[j]
        if j + 1 < len(probes) and s0 <= seq:
            s1, w1, c1 = probes[j + 1]
            f = (seq - s0) / (s1 - s0)
            w0, c0 = w0 + f * (w1 - w0), c0 + f * (c1 - c0)
        c, owed_w = _less(c, w0 + owed_w, DEBT_CALLS * w0)
        u, owed_c = _less(u, c0 + owed_c, DEBT_CALLS * c0)
        out.append((seq, op, c, u, n, max(pc - n * c0, 0.0)))
    return out


DEBT_CALLS = 1000


def _less(span: float, take: float, most: float) -> tuple[float, float]:
    """``span`` less ``take``, never below zero, and what is still owed
    (at most ``most``)."""
    if span >= take:
        return span - take, 0.0
    return 0.0, min(take - span, most)


def replay_many(ranks: list[int], size: int | None, log_dir: str, out_dir: str,
                target: list[str], mode: str, concurrent: int = 1, env=None,
                repeats: int = 1, load: int = 0, any_command: bool = False,
                bind: str | None = None, in_step: bool = True) -> list[str]:
    """Replay each rank in its own process, ``concurrent`` at a time.

    ``load`` K > 1: replay each rank as K concurrent *copies*, one
    representative after the other, each copy bound to a core of its own
    (where the node has K), so that the measured replay (copy 0, written
    as without copies) shares the node as its rank did in the full run (K
    = ranks per node there), and every copy's span times are kept
    (OUT/copies/copy<c>/rank<R>.csv): how fast the node's cores run the
    same work, and how much it varies, go into OUT/variability_rank<R>.csv
    (replay/variability.py; written for every rank, also without copies:
    with one copy and one round it says that nothing was measured to
    vary, with repeats it holds their span-to-span noise).

    ``in_step``: hold the copies together at every call that waits for
    another rank in the run (replay/lockstep.py), as the run's ranks are
    held; else each runs on alone.

    ``bind``: a command that runs a command on core C (``BIND C COMMAND``,
    an emulated node's virtual cores: emulate.cores) starts copy C, or
    each replay on core 0, instead of binding with sched_setaffinity.

    With ``repeats`` > 1 every rank is replayed that many times (round after
    round, so that a slow drift of the machine touches all ranks alike) into
    OUT/repeat<K>/, and OUT/rank<R>.csv is the replay of R with the least
    total computation: the least disturbed run, as the measured side of a
    validation keeps its fastest run.  OUT/repeats_rank<R>.csv lists R's
    repeats (``rank, repeat, comp, cpu, kept``; seconds; one file per rank,
    so that replays of different ranks can run as separate jobs)."""
    if concurrent < 1:
        raise ReplayError("--concurrent must be >= 1")
    if repeats < 1:
        raise ReplayError("--repeats must be >= 1")
    if load < 0:
        raise ReplayError("--load must be >= 0")
    if load > 1 and concurrent > 1:
        raise ReplayError("--load K replays K copies of one representative at a time, "
                          "on K cores: give it without --concurrent")
    if bind and concurrent > 1:
        raise ReplayError("--bind-command runs the replays on given cores: give --load K "
                          "(K copies on cores 0..K-1) instead of --concurrent")
    cores = copy_cores(load, bind)

    def one_round(dest: str) -> list[str]:
        if load > 1:
            return _copies_round(ranks, size, log_dir, dest, target, mode, env, load, cores,
                                 any_command, bind, in_step)
        return _replay_round(ranks, size, log_dir, dest, target, mode, concurrent, env,
                             any_command, bind)
    rounds = [out_dir] if repeats == 1 else [os.path.join(out_dir, f"repeat{k}")
                                             for k in range(1, repeats + 1)]
    for k, d in enumerate(rounds, 1):
        if repeats > 1:
            print(f"replay: repeat {k}/{repeats}", file=sys.stderr, flush=True)
        done = one_round(d)
    if repeats > 1:
        done = keep_least_disturbed(ranks, out_dir, repeats)
    measure_variability(ranks, out_dir, rounds, max(load, 1), cores)
    return done


def copy_cores(load: int, bind: str | None = None) -> list[int]:
    """The CPU each of ``load`` copies is bound to: one each where this
    process may run on that many, else none (-1), said in a note; with a
    ``bind`` command, the cores 0 ... load - 1 that it is given."""
    if load < 2:
        return []
    if bind:
        return list(range(load))
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) >= load:
        return cpus[:load]
    print(f"replay: note: {load} copies on {len(cpus)} CPU(s): not bound to cores (the "
          f"copies share them, as an oversubscribed run's ranks would)", file=sys.stderr)
    return [-1] * load


def measure_variability(ranks: list[int], out_dir: str, rounds: list[str], load: int,
                        cores: list[int] | None = None) -> list[str]:
    """OUT/variability_rank<R>.csv for each rank, from its ``load`` copies'
    replays in every round directory of ``rounds`` (replay/variability.py);
    returns the files written."""
    from contracts.replayed import ReplayedError
    from contracts.variability import write_variability

    from .variability import collect, estimate
    cores = cores or [-1] * load
    written = []
    for r in ranks:
        try:
            spans, _, _, same = collect(r, rounds, load, warn=lambda m: print(
                f"replay: note: {m}", file=sys.stderr))
        except ReplayedError as e:
            raise ReplayError(str(e)) from None
        table = estimate(r, spans, [cores[c] for c in same])
        path = os.path.join(out_dir, f"variability_rank{r}.csv")
        write_variability(table, path)
        written.append(path)
        if spans.shape[0] * spans.shape[1] < 2:
            continue                         # one replay: nothing to say
        f = table["factor"].to_numpy()
        print(f"replay: rank {r}: {len(same)} copies x {len(rounds)} round(s): core factors "
              f"{f.min():.3f}-{f.max():.3f}, run-to-run {100 * table['sigma_run'].iat[0]:.1f} %, "
              f"span-to-span {100 * table['sigma_span'].iat[0]:.1f} % -> {path}",
              file=sys.stderr, flush=True)
    return written


def keep_least_disturbed(ranks: list[int], out_dir: str, repeats: int) -> list[str]:
    """Of the replays OUT/repeat<1..repeats>/rank<R>.csv, copy each rank's
    replay with the least total computation to OUT/rank<R>.csv (and its
    output, .out) and list them all in OUT/repeats_rank<R>.csv; returns the
    kept CSVs.  A validation that interleaves replay rounds with its real
    runs (bench/apps/run.py) calls this after its last round."""
    # rank, repeat, comp, cpu, disturbed share, kept
    rows = [[r, k, *_totals(os.path.join(out_dir, f"repeat{k}", f"rank{r}.csv"), r), False]
            for k in range(1, repeats + 1) for r in ranks]
    done = []
    for r in ranks:
        mine = [row for row in rows if row[0] == r]
        best = min(mine, key=lambda row: row[2])
        best[5] = True
        src = os.path.join(out_dir, f"repeat{best[1]}", f"rank{r}")
        for ext in (".csv", ".out", ".partial.json"):
            if os.path.exists(src + ext):
                write_atomic(os.path.join(out_dir, f"rank{r}{ext}"),
                             lambda tmp, f=src + ext: shutil.copyfile(f, tmp))
        spread = max(row[2] for row in mine) / best[2] - 1 if best[2] > 0 else 0.0
        print(f"replay: rank {r}: kept repeat {best[1]} of {repeats} "
              f"({best[2]:.4f} s of computation; the slowest took {100 * spread:.1f} % more)",
              file=sys.stderr, flush=True)
        done.append(os.path.join(out_dir, f"rank{r}.csv"))
        write_atomic(os.path.join(out_dir, f"repeats_rank{r}.csv"),
                     lambda tmp, mine=mine: _write_repeats(tmp, mine))
    return done


def _write_repeats(path: str, rows: list) -> None:
    """repeats_rank<R>.csv: one rank's repeats (rank, repeat, comp, cpu,
    disturbed share, kept) as the file's columns order them."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["rank", "repeat", "comp", "cpu", "kept", "disturbed"])
        w.writerows((r, k, repr(c), repr(u), str(kept).lower(), f"{d:.4f}")
                    for r, k, c, u, d, kept in rows)


def _totals(path: str, rank: int) -> tuple[float, float, float]:
    """Total ``comp`` and ``cpu`` seconds of one replay and its disturbed
    share (replay/busy.py), read by its checked reader (the driver only: a
    replayed rank never imports pandas)."""
    from contracts.replayed import ReplayedError, read_replayed, target_seconds

    from .busy import disturbed_share
    try:
        df = read_replayed(path, rank)
    except ReplayedError as e:
        raise ReplayError(str(e)) from None
    return (float(target_seconds(df).sum()),
            float(df["cpu"].sum() + df["poll_cpu"].sum()),
            disturbed_share(df["comp"].to_numpy(), df["cpu"].to_numpy()))


def _reason(stderr: str, code: int) -> str:
    """Why a replay process failed, from its stderr: its own error line (which
    names the rank, and the application's exception), else the last line."""
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    ours = [ln for ln in lines if ln.startswith("replay: error: ")]
    if ours:
        return ours[-1][len("replay: error: "):]
    return lines[-1] if lines else f"exit code {code}"


def _command(r: int, out: str, size, log_dir: str, target, mode: str,
             any_command: bool) -> list[str]:
    """The command line that replays rank ``r`` into ``out`` (--force: the
    driver already checked what it may replace)."""
    return [sys.executable, "-m", "replay", "--rank", str(r), "--log", log_dir, "-o", out,
            "--force"] + (["--size", str(size)] if size else []) + \
        (["--any-command"] if any_command else []) + command_line(target, mode)


def _replay_round(ranks, size, log_dir, out_dir, target, mode, concurrent, env,
                  any_command=False, bind=None) -> list[str]:
    """Every rank of ``ranks`` replayed once, each in its own process,
    ``concurrent`` at a time (``bind``: one at a time, on core 0)."""
    todo = list(ranks)
    running: dict = {}
    done: list = []
    failed: list = []
    t0 = time.time()
    os.makedirs(out_dir, exist_ok=True)
    while todo or running:
        while todo and len(running) < concurrent:
            r = todo.pop(0)
            # the replayed rank's own output, for comparison with the host run's
            with open(os.path.join(out_dir, f"rank{r}.out"), "w") as out:
                running[r] = subprocess.Popen(
                    ([bind, "0"] if bind else [])
                    + _command(r, out_dir, size, log_dir, target, mode, any_command), env=env,
                    stdout=out, stderr=subprocess.PIPE, text=True)
            print(f"replay: rank {r} started ({len(done) + len(running)}/{len(ranks)})",
                  file=sys.stderr, flush=True)
        time.sleep(0.05)
        for r, p in list(running.items()):
            if p.poll() is None:
                continue
            err = p.stderr.read()
            del running[r]
            if p.returncode == 0:
                _pass_notes(err)
                done.append(os.path.join(out_dir, f"rank{r}.csv"))
                print(f"replay: rank {r} done ({len(done)}/{len(ranks)}, "
                      f"{time.time() - t0:.1f} s)", file=sys.stderr, flush=True)
            else:
                failed.append((r, _reason(err, p.returncode)))
    _raise_failed(failed)
    return done


def _pass_notes(stderr: str) -> None:
    """The replayed rank's own warnings (a busy node) and notes (work
    charged that the log skipped) reach the user."""
    for ln in stderr.splitlines():
        if ln.startswith(("replay: warning: ", "replay: note: ")):
            print(ln, file=sys.stderr, flush=True)


def _raise_failed(failed: list) -> None:
    """One ReplayError for every (rank, reason) that failed; each message
    names its rank already (replay_rank's errors do)."""
    if failed:
        raise ReplayError("; ".join(msg if msg.startswith(f"rank {r}:") else f"rank {r}: {msg}"
                                    for r, msg in failed))


def _copies_round(ranks, size, log_dir, out_dir, target, mode, env, load, cores,
                  any_command=False, bind=None, in_step=True) -> list[str]:
    """Every rank of ``ranks`` replayed as ``load`` concurrent copies, one
    rank after the other, copy c bound to ``cores[c]`` (-1: not bound;
    with ``bind``, started as ``bind cores[c] command``), held in step
    where ``in_step`` (replay/lockstep.py);
    copy 0 writes OUT/rank<R>.csv and .out, copy c OUT/copies/copy<c>/."""
    from .variability import copy_path  # the driver only: it imports numpy
    done, failed = [], []
    t0 = time.time()
    for n, r in enumerate(ranks):
        keeper = Keeper(load) if in_step else None
        copy_env = dict(env if env is not None else os.environ)
        if keeper:
            copy_env[LOCKSTEP_ENV] = keeper.path
        procs = []
        try:
            for c in range(load):
                dest = os.path.dirname(copy_path(out_dir, c, r))
                os.makedirs(dest, exist_ok=True)
                core = cores[c]
                with open(os.path.join(dest, f"rank{r}.out"), "w") as out:
                    cmd = _command(r, dest, size, log_dir, target, mode, any_command)
                    procs.append(subprocess.Popen(
                        [bind, str(core)] + cmd if bind else cmd, env=copy_env,
                        stdout=out, stderr=subprocess.PIPE, text=True,
                        preexec_fn=None if core < 0 or bind else (
                            lambda core=core: os.sched_setaffinity(0, {core}))))
            print(f"replay: rank {r} started as {load} copies"
                  f"{' in step' if keeper else ''} ({n + 1}/{len(ranks)})",
                  file=sys.stderr, flush=True)
            if keeper:
                keeper.started(procs)
            errs = [p.communicate()[1] for p in procs]
        finally:
            if keeper:
                keeper.close()
        bad = [(c, p.returncode, e) for c, (p, e) in enumerate(zip(procs, errs))
               if p.returncode != 0]
        if bad:
            c, code, err = bad[0]
            failed.append((r, _reason(err, code) + ("" if c == 0 else f" (in copy {c})")))
            continue
        _pass_notes(errs[0])
        done.append(copy_path(out_dir, 0, r))
        print(f"replay: rank {r} done ({len(done)}/{len(ranks)}, {time.time() - t0:.1f} s)",
              file=sys.stderr, flush=True)
    _raise_failed(failed)
    return done
