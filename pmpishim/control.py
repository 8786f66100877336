"""What the tools ask of the loaded PMPI shim (pmpishim/build.py loads it):
trace a rank's calls made below Python (ctrace.c), log what they receive
while recording (creplay.c), answer them from that log while replaying,
and set a tool up when the application initialises MPI from C."""
from __future__ import annotations

import ctypes
import os

from . import build
from .build import ShimError

# no pandas here: this module is imported before the application


def c_handle(handle: int) -> int:
    """A communicator's handle as the shim keys it: the bytes of the C
    type (an ``int`` in MPICH), zero-extended; mpi4py hands it out signed."""
    from mpi4py import MPI
    return handle & ((1 << (8 * MPI._sizeof(MPI.Comm))) - 1)


class BelowPython:
    """The shim's tracer of MPI calls made below Python (ctrace.c), for one
    rank: its events go to ``raw/rNNNNNN.cev`` and ``.cside`` beside the
    Python-level ones, and the merge interleaves the two by time."""

    def __init__(self, lib: ctypes.CDLL, trace_dir: str, rank: int, origin: float):
        from contracts.raw_trace import rank_path
        self._lib = lib
        lib.rr_trace_start.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_double]
        lib.rr_comm_known.argtypes = [ctypes.c_uint64, ctypes.c_int64, ctypes.c_char_p]
        lib.rr_comm_forget.argtypes = [ctypes.c_uint64]
        lib.rr_trace_count.restype = ctypes.c_int64
        err = lib.rr_trace_start(rank_path(trace_dir, rank, "cev").encode(),
                                 rank_path(trace_dir, rank, "cside").encode(), origin)
        if err:
            raise ShimError(f"{rank_path(trace_dir, rank, 'cev')}: {os.strerror(err)}")

    def comm_known(self, handle: int, idx: int, key: str) -> None:
        """A communicator the Python tracer registered: its C handle's id."""
        self._lib.rr_comm_known(c_handle(handle), idx, key.encode())

    def comm_forget(self, handle: int) -> None:
        self._lib.rr_comm_forget(c_handle(handle))

    def flush(self) -> None:
        self._lib.rr_trace_flush()

    @property
    def n(self) -> int:
        return self._lib.rr_trace_count()

    def stop(self) -> str | None:
        """Stop; the error of a failed write, or None."""
        err = self._lib.rr_trace_stop()
        return os.strerror(err) if err else None


def below_python(trace_dir: str, rank: int, origin: float) -> BelowPython | None:
    """Start tracing this rank's calls below Python, if the shim is loaded."""
    lib = build.loaded_library()
    return None if lib is None else BelowPython(lib, trace_dir, rank, origin)


_ON_INIT = None        # the ctypes callback handed to the shim, kept alive


def on_c_init(fn) -> None:
    """Have the shim call ``fn()`` when the application initialises MPI
    from C, not through mpi4py (petsc4py: PetscInitialize calls MPI_Init):
    the tracer sets itself up there, as it does at the application's import
    of mpi4py.MPI.  No-op when the shim is not loaded."""
    global _ON_INIT
    lib = build.loaded_library()
    if lib is None:
        return
    _ON_INIT = ctypes.CFUNCTYPE(None)(fn)
    lib.rr_set_on_init(_ON_INIT)


# ---- record and replay of the calls made below Python (creplay.c) ---------

def record_below_python(path: str, rank: int, size: int) -> bool:
    """Log this rank's calls made below Python into the C log ``path``
    while ``instrument record`` records it; False if the shim is not
    loaded (nothing below Python can be logged then)."""
    lib = build.loaded_library()
    if lib is None:
        return False
    err = lib.rl_record_start(path.encode(), rank, size)
    if err:
        raise ShimError(f"{path}: {os.strerror(err)}")
    return True


def stop_recording(complete: bool) -> int | None:
    """Close the C log with its end record; the records it holds, or None
    if it could not be written completely."""
    lib = build.loaded_library()
    if lib is None:
        return 0
    lib.rl_record_stop.restype = ctypes.c_int64
    n = lib.rl_record_stop(int(complete))
    return None if n < 0 else n


class _Row(ctypes.Structure):
    # creplay.c rp_row_t
    _fields_ = [("op", ctypes.c_int), ("t0", ctypes.c_double), ("t1", ctypes.c_double),
                ("c0", ctypes.c_double), ("c1", ctypes.c_double), ("polls", ctypes.c_int64),
                ("poll_cpu", ctypes.c_double)]


def _tuples(rows) -> list[tuple]:
    """(op code, entry wall, exit wall, entry CPU, exit CPU, polls, poll
    CPU) of each rp_row_t."""
    return [(r.op, r.t0, r.t1, r.c0, r.c1, r.polls, r.poll_cpu) for r in rows]


def rows_from_bytes(data: bytes) -> list[tuple]:
    """The rows a compiled program's replay wrote (rp_row_t, as
    AnsweredBelowPython.rows gives them)."""
    n = len(data) // ctypes.sizeof(_Row)
    return _tuples((_Row * n).from_buffer_copy(data[:n * ctypes.sizeof(_Row)]))


class AnsweredBelowPython:
    """The shim answering this rank's calls below Python from its C log
    during a replay: the communicators the Python replay makes are told to
    it, and the rows of the calls it answered are read back at the end."""

    def __init__(self, lib: ctypes.CDLL, path: str, rank: int, size: int):
        self._lib = lib
        lib.rp_comm_known.argtypes = [ctypes.c_uint64, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                      ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int),
                                      ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]
        lib.rp_rows.restype = ctypes.c_int64
        lib.rp_rows.argtypes = [ctypes.POINTER(ctypes.POINTER(_Row))]
        lib.rp_replay_left.restype = ctypes.c_int64
        err = lib.rp_replay_start(path.encode(), rank, size)
        if err:
            raise ShimError(f"{path}: not a complete C-level message log of rank {rank} of "
                              f"{size} ({os.strerror(err)}); record the run again")

    def comm_known(self, handle: int, desc: dict) -> None:
        """A communicator the Python replay hands out: ``handle`` stands for
        the logged one ``desc`` (mpimodel.calls.describe_comm)."""
        dims = desc.get("dims") or []
        arr = ctypes.c_int * max(len(dims), 1)
        members = desc.get("members")
        self._lib.rp_comm_known(c_handle(handle), desc.get("size", 1), desc.get("rank", 0),
                                len(dims), arr(*dims), arr(*map(int, desc.get("periods", []))),
                                arr(*desc.get("coords", [])),
                                (ctypes.c_int * len(members))(*members) if members else None)

    def rows(self) -> list[tuple]:
        """(op code, entry wall, exit wall, entry CPU, exit CPU, polls,
        poll CPU) of every call answered, in call order."""
        p = ctypes.POINTER(_Row)()
        n = self._lib.rp_rows(ctypes.byref(p))
        return _tuples(p[i] for i in range(n))

    def left(self) -> int:
        """Logged calls the application did not make."""
        return self._lib.rp_replay_left()

    def finished(self) -> None:
        """The application's replay is over: calls past the log's end from
        now on (its exit handlers') are answered with nothing."""
        self._lib.rp_replay_finished()


def answer_below_python(path: str, rank: int, size: int) -> AnsweredBelowPython:
    """Answer this rank's calls below Python from the C log ``path``."""
    lib = build.loaded_library()
    if lib is None:
        raise ShimError(f"{path}: this rank made MPI calls below Python when recorded, and "
                        f"the shim that answers them is not loaded (no mpicc here?)")
    return AnsweredBelowPython(lib, path, rank, size)


def set_up_at_c_init() -> None:
    """MPI initialised from C (PETSc's PetscInitialize) without mpi4py.MPI
    imported: import it there, which sets the tool (tracer, recorder,
    replay) up as the application's own import does."""
    import importlib
    on_c_init(lambda: importlib.import_module("mpi4py.MPI"))


def loaded() -> bool:
    return build.loaded_library() is not None
