"""Running a compiled MPI program (no Python in it) under the shim.

The tools' Python process per rank stays out of MPI and runs the program
as a child (which inherits the launcher's process-manager environment, so
it is the MPI rank) with the shim and its dlsym interposer preloaded
(``LD_PRELOAD``); environment variables tell the shim what to do from
the program's MPI_Init to its MPI_Finalize: trace (ctrace.c,
``REPREPLAY_NATIVE_TRACE``), record or replay (creplay.c,
``REPREPLAY_NATIVE_RECORD``, ``REPREPLAY_NATIVE_REPLAY``).
"""
from __future__ import annotations

import os
import subprocess
import sys

from . import build


def is_native(path: str) -> bool:
    """Whether ``path`` is a compiled program (ELF), not a Python script."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def rank_and_size() -> tuple[int, int]:
    """This rank and the job's size, from the process manager's environment."""
    for rank, size in (("PMI_RANK", "PMI_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                       ("PMIX_RANK", "PMIX_SIZE")):
        if rank in os.environ and size in os.environ:
            return int(os.environ[rank]), int(os.environ[size])
    return 0, 1                                   # run without mpiexec: a singleton


def preloaded_env(lib_dir: str, **extra: str) -> dict:
    """This environment and ``extra`` with the shim built in ``lib_dir``
    and its dlsym interposer preloaded."""
    preload = [os.path.join(lib_dir, f"lib{build.LIB_NAME}.so"),
               os.path.join(lib_dir, build.DLSYM_NAME)]
    env = dict(os.environ, **extra)
    env["LD_PRELOAD"] = ":".join(preload + [p for p in env.get("LD_PRELOAD", "").split(":") if p])
    return env


def run_program(target: list[str], env: dict, who: str, rank: int) -> int:
    """Run the program; its exit code, or 2 (said, naming the rank) when it
    cannot start.  close_fds=False: the program talks to the process
    manager through descriptors the launcher inherited (MPICH's PMI_FD)."""
    try:
        return subprocess.run(target, env=env, close_fds=False).returncode
    except OSError as e:
        print(f"{who}: error: rank {rank}: cannot run {target[0]}: {e.strerror}",
              file=sys.stderr)
        return 2
