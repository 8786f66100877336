"""Tracing a compiled MPI program, with no Python in it.

    mpiexec -n N python -m instrument trace -o DIR ./a.out [args ...]

Each rank's Python process stays out of MPI: rank 0 prepares the trace
directory, then every rank runs the program as a child process (which
inherits the launcher's process-manager environment, so it is the MPI
rank) with the PMPI shim preloaded (pmpishim/build.py builds it;
``LD_PRELOAD``, with the dlsym interposer) and ``REPREPLAY_NATIVE_TRACE``
naming the directory.  The shim (pmpishim/ctrace.c) starts tracing when
the program initialises MPI and writes each rank's raw files, status and
call counts at its MPI_Finalize; rank 0's launcher then waits for every
rank and merges, as for a Python application.  Every event carries the
below-Python flag (the program is compiled code), so later stages treat
it as they treat calls made below Python.

    mpiexec -n N python -m instrument record (--ranks R | --reps REPS.csv) -o LOG ./a.out

records it the same way: the shim logs every call of a recorded rank's
program into its C log (pmpishim/creplay.c), and ``python -m replay``
runs the program alone answered from it (replay/run.py).
"""
from __future__ import annotations

import json
import os
import sys

from contracts.output import write_json
from pmpishim import build
from pmpishim.native import preloaded_env, rank_and_size, run_program

NATIVE = "REPREPLAY_NATIVE_TRACE"


def trace_native(trace_dir: str, target: list[str], force: bool = False,
                 keep_raw: bool | None = None, waits: str | None = None) -> int:
    """Every rank: run the compiled program ``target`` traced; returns its exit code."""
    import mpi4py
    mpi4py.rc.initialize = False                  # this process never joins the job
    mpi4py.rc.finalize = False
    from .run import _prepare
    rank, size = rank_and_size()
    trace_dir = os.path.abspath(trace_dir)
    try:
        lib_dir = build.build()
    except build.ShimError as e:
        print(f"instrument trace: error: {e}", file=sys.stderr)
        return 2
    if rank == 0:
        # the other ranks' programs start tracing only once every rank has
        # initialised MPI, which rank 0's does after this
        err = _prepare(trace_dir, force, [os.path.basename(target[0])] + target[1:], size, waits)
        if err:
            print(f"instrument trace: error: {err}", file=sys.stderr)
            return 2
        meta_path = os.path.join(trace_dir, "meta.json")
        with open(meta_path) as f:
            meta = json.load(f)
        write_json(meta_path, dict(meta, native=True))
        if waits:
            print(f"instrument: trace: {waits}", file=sys.stderr, flush=True)
    code = run_program(target, preloaded_env(lib_dir, **{NATIVE: trace_dir}), "instrument trace",
                       rank)
    if rank != 0:
        return code
    from .run import _wait_for_ranks, finish_trace
    _wait_for_ranks(trace_dir, size)
    finish_trace(trace_dir, size, keep_raw)
    return code


def record_native(log_dir: str, ranks: list[int] | None, target: list[str], force: bool = False,
                  reps: str | None = None) -> int:
    """Every rank: run the compiled program ``target``, the ranks recorded
    with their calls logged by the shim into their C logs (all the
    program's calls are below Python); returns its exit code.  Beside each
    C log, the rank's message log holds what replay checks first (the
    command line, the world): its init and finalize."""
    from contracts.msglog import LogWriter, clog_path, log_path, script_digest

    from .run import _prepare_log
    rank, size = rank_and_size()
    log_dir = os.path.abspath(log_dir)
    try:
        lib_dir = build.build()
        if rank == 0:
            # the other ranks' programs log only once every rank has
            # initialised MPI, which rank 0's does after this
            # (a compiled program's calls are all below Python: never cut)
            ranks, _ = _prepare_log(log_dir, force, ranks, reps, size, target, "path")
        elif ranks is None and reps is not None:
            from contracts.representatives import representative_ranks
            ranks = representative_ranks(reps, size)
    except (build.ShimError, ValueError, OSError) as e:
        if rank == 0:
            print(f"instrument record: error: {e}", file=sys.stderr)
        return 2
    mine = ranks is not None and rank in ranks
    extra = {"REPREPLAY_NATIVE_RECORD": clog_path(log_dir, rank)} if mine else {}
    code = run_program(target, preloaded_env(lib_dir, **extra), "instrument record", rank)
    if mine:
        w = LogWriter(log_path(log_dir, rank), {
            "rank": rank, "size": size, "argv": target, "mode": "path", "native": True,
            "script_sha256": script_digest(target, "path")})
        world = {"cls": "Intracomm", "rank": rank, "size": size, "members": list(range(size))}
        w.write("init", -1, -1, world)
        w.write("finalize", -1, -1, None)
        w.close("complete" if code == 0 and os.path.exists(clog_path(log_dir, rank))
                else f"failed: the program exited {code}")
        print(f"instrument: record: rank {rank} finished ({'complete' if code == 0 else 'failed'})",
              file=sys.stderr, flush=True)
    if rank == 0 and code == 0:
        print(f"instrument: message log of rank(s) {ranks} -> {log_dir}", file=sys.stderr)
    return code
