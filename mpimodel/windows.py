"""One-sided communication in the record step: what a window's calls log.

Replay cannot ask other ranks for data, so the log holds what one-sided
communication put into the recorded rank's memory, at the points where
MPI lets the rank see it: every synchronisation call of a window (Fence,
Lock/Unlock, Flush*, Sync, Post/Start/Complete/Wait/Test) logs, after the
real call returned,

* the bytes of every result buffer of this window's transfers still
  pending (Get's origin buffer, Get_accumulate's, Fetch_and_op's and
  Compare_and_swap's result): what the transfer delivered, or will;
* the bytes of the rank's own window memory (what other ranks Put or
  Accumulated into it, and its own stores), and of every segment of a
  shared window it queried.

Replay (replay/windows.py) copies them back at the same calls, so the
application reads what it read in the real run.  A result buffer stops
being logged once a call completes its transfer for sure (Fence,
Complete, Unlock, Flush and their _all forms).  Large unchanged memory
costs little: the log stores a repeated payload once (contracts/msglog.py).

Each record: op ``win_<method>``, the target rank as peer (transfers,
Lock, Unlock, Flush), the bytes the call passed, and as communicator the
record that created the window (its creation record: the window's
communicator).  A request-based transfer (Rput, Rget, ...) is logged as its
plain form; its request, a recording one, logs at its completion what the
result buffer received (as for Irecv, mpimodel/kinds.py).
"""
from __future__ import annotations

import inspect

from mpi4py import MPI

from .bufsize import nbytes
from .calls import Meta, bytes_view
from .ops import WIN_CREATION, WIN_REQUESTS, WIN_SYNCS, WIN_TRANSFERS

# syncs after which every pending transfer of the window has completed,
# and those that complete the transfers to one target (the rank argument)
COMPLETES_ALL = ("Fence", "Complete", "Unlock_all", "Flush_all", "Flush_local_all")
COMPLETES_ONE = ("Unlock", "Flush", "Flush_local")


def regions_of(flavor: str, a: dict, win) -> list:
    """Byte views of a new window's local memory (as replay will see it)."""
    if flavor == "Create":
        v = bytes_view(a["memory"])
        return [v] if v is not None and v.nbytes else []
    if flavor in ("Allocate", "Allocate_shared"):
        mem = win.tomemory()
        return [memoryview(mem).cast("B")] if len(mem) else []
    return []                                   # dynamic: what gets attached


def completed(pending: list, name: str, target) -> list:
    """The pending (target, view) transfers still open after sync ``name``."""
    if name in COMPLETES_ALL:
        return []
    if name in COMPLETES_ONE:
        return [p for p in pending if p[0] != target]
    return pending


_REAL = MPI.Win
_WRITER = None                    # () -> the log writer
_WRAP = None                      # a request MPI returned -> the recording one
_CLS: dict = {}


def _sig(name):
    return inspect.signature(getattr(_REAL, name))


def _creation(name):
    base, s, op = getattr(_REAL, name), _sig(name), "win_" + name.lower()

    def f(cls, *args, **kw):
        ba = s.bind(*args, **kw)
        ba.apply_defaults()
        win = _CLS["Win"](base(*args, **kw))
        win._regions = regions_of(name, ba.arguments, win)
        win._pending, win._flavor = [], name
        size = sum(v.nbytes for v in win._regions)
        comm = getattr(ba.arguments.get("comm"), "_rid", -1)
        W = _WRITER()
        W.write(op, -1, -1, {"size": size}, (), size, comm)
        win._rid = W.index - 1
        return win
    f.__name__ = name
    return classmethod(f)


def _transfer(name):
    """Put, Get, ... and their request-based forms (Rput, Rget, ...), whose
    request delivers the result buffer at its completion as an Irecv's."""
    base, s, op = getattr(_REAL, name), _sig(name), "win_" + name.lower()
    out = WIN_TRANSFERS[WIN_REQUESTS.get(name, name)]

    def f(self, *args, **kw):
        ba = s.bind(self, *args, **kw)
        ba.apply_defaults()
        a = ba.arguments
        res = base(self, *args, **kw)
        target = a.get("target_rank", -1)
        v = bytes_view(a[out]) if out is not None else None
        if v is not None:
            self._pending.append((target, v))
        _WRITER().write(op, target, -1, None, (), nbytes(a.get("origin")), self._rid)
        if name in WIN_REQUESTS:
            res = _WRAP(res)
            res._out = v
        return res
    f.__name__ = name
    return f


def _sync(name):
    base, s, op, rank_arg = getattr(_REAL, name), _sig(name), "win_" + name.lower(), \
        WIN_SYNCS[name]

    def f(self, *args, **kw):
        ba = s.bind(self, *args, **kw)
        ba.apply_defaults()
        res = base(self, *args, **kw)
        target = ba.arguments[rank_arg] if rank_arg else -1
        payloads = [bytes(v) for _, v in self._pending] + [bytes(v) for v in self._regions]
        result = {"pending": len(self._pending)}
        if name == "Test":
            result["flag"] = bool(res)
        _WRITER().write(op, target, -1, result, payloads, 0, self._rid)
        self._pending = completed(self._pending, name, target)
        return res
    f.__name__ = name
    return f


def _attach(self, memory):
    _REAL.Attach(self, memory)
    v = bytes_view(memory)
    if v is not None and v.nbytes:
        self._regions.append(v)
    _WRITER().write("win_attach", -1, -1, None, (), nbytes(memory), self._rid)


def _detach(self, memory):
    _REAL.Detach(self, memory)
    v = bytes_view(memory)
    if v is not None:
        self._regions = [r for r in self._regions if not same_memory(r, v)]
    _WRITER().write("win_detach", -1, -1, None, (), nbytes(memory), self._rid)


def _shared_query(self, rank):
    mem, unit = _REAL.Shared_query(self, rank)
    view = memoryview(mem).cast("B")
    if rank != _my_rank(self) and view.nbytes:
        self._regions.append(view)          # logged from now on, as replay reads it
    _WRITER().write("win_shared_query", rank, -1, {"size": view.nbytes, "unit": unit},
                    (bytes(view),), 0, self._rid)
    return mem, unit


def _free(self):
    _REAL.Free(self)
    _WRITER().write("win_free", -1, -1, None, (), 0, self._rid)


def build(writer_of, wrap, real=MPI.Win):
    """The recording subclass of ``real`` (MPI.Win); ``writer_of()`` gives
    the log writer (contracts/msglog.py's LogWriter), ``wrap(request)``
    the recording request (instrument/record.py)."""
    global _REAL, _WRITER, _WRAP
    _REAL, _WRITER, _WRAP = real, writer_of, wrap
    ns = {n: _creation(n) for n in WIN_CREATION}
    ns.update({n: _transfer(n) for n in (*WIN_TRANSFERS, *WIN_REQUESTS)})
    ns.update({n: _sync(n) for n in WIN_SYNCS})
    ns.update(Attach=_attach, Detach=_detach, Shared_query=_shared_query, Free=_free)
    _CLS["Win"] = Meta("RecWin", (real,), dict(ns, _real=real))
    return _CLS["Win"]


def same_memory(a: memoryview, b: memoryview) -> bool:
    """The same memory (an attached region is detached by the buffer again)."""
    import numpy as np
    return (a.nbytes == b.nbytes and np.frombuffer(a, np.uint8).ctypes.data
            == np.frombuffer(b, np.uint8).ctypes.data)


def _my_rank(win) -> int:
    g = win.Get_group()
    try:
        return g.Get_rank()
    finally:
        g.Free()
