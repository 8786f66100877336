"""Tracing a compiled MPI program, with no Python in it.

    mpiexec -n N python -m instrument trace -o DIR ./a.out [args ...]

Each rank's Python process stays out of MPI: rank 0 prepares the trace
directory, then every rank runs the program as a child process (which
inherits the launcher's process-manager environment, so it is the MPI
rank) with the PMPI shim preloaded (instrument/ccount.py builds it;
``LD_PRELOAD``, with the dlsym interposer) and ``REPREPLAY_NATIVE_TRACE``
naming the directory.  The shim (instrument/ctrace.c) starts tracing when
the program initialises MPI and writes each rank's raw files, status and
call counts at its MPI_Finalize; rank 0's launcher then waits for every
rank and merges, as for a Python application.  Every event carries the
below-Python flag (the program is compiled code), so later stages treat
it as they treat calls made below Python: clustered and simulated, not
replayed.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

from contracts.output import write_json

from . import ccount

NATIVE = "REPREPLAY_NATIVE_TRACE"


def is_native(path: str) -> bool:
    """Whether ``path`` is a compiled program (ELF), not a Python script."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def _rank_and_size() -> tuple[int, int]:
    """This rank and the job's size, from the process manager's environment."""
    for rank, size in (("PMI_RANK", "PMI_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                       ("PMIX_RANK", "PMIX_SIZE")):
        if rank in os.environ and size in os.environ:
            return int(os.environ[rank]), int(os.environ[size])
    return 0, 1                                   # run without mpiexec: a singleton


def trace_native(trace_dir: str, target: list[str], force: bool = False,
                 keep_raw: bool | None = None, waits: str | None = None) -> int:
    """Every rank: run the compiled program ``target`` traced; returns its exit code."""
    import mpi4py
    mpi4py.rc.initialize = False                  # this process never joins the job
    mpi4py.rc.finalize = False
    from .run import _prepare
    rank, size = _rank_and_size()
    trace_dir = os.path.abspath(trace_dir)
    try:
        lib_dir = ccount.build()
    except ccount.CcountError as e:
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
    shim = os.path.join(lib_dir, f"lib{ccount.LIB_NAME}.so")
    preload = [shim, os.path.join(lib_dir, ccount.DLSYM_NAME)]
    env = dict(os.environ, **{NATIVE: trace_dir})
    env["LD_PRELOAD"] = ":".join(preload + [p for p in env.get("LD_PRELOAD", "").split(":") if p])
    try:
        # close_fds=False: the program talks to the process manager through
        # descriptors the launcher inherited (MPICH's PMI_FD)
        code = subprocess.run(target, env=env, close_fds=False).returncode
    except OSError as e:
        print(f"instrument trace: error: rank {rank}: cannot run {target[0]}: {e.strerror}",
              file=sys.stderr)
        return 2
    if rank != 0:
        return code
    from .run import _wait_for_ranks, finish_trace
    _wait_for_ranks(trace_dir, size)
    finish_trace(trace_dir, size, keep_raw)
    return code
