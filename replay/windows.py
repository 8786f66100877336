"""One-sided communication in replay: windows answered from the log.

The stand-in for ``MPI.Win`` never communicates.  A window created on
memory keeps that memory; an allocated one gets memory of the logged size
(``tomemory()``).  A transfer (Put, Get, Accumulate, ...) is checked
against its record (target, bytes, window) and remembered if it returns
data.  At each synchronisation call the logged bytes are copied back
(mpimodel/windows.py): into the result buffers of the transfers still
pending, then into the window's own memory and every shared segment the
rank queried, so that the application reads what it read in the real run.
"""
from __future__ import annotations

import inspect

from mpi4py import MPI

from mpimodel.bufsize import nbytes
from mpimodel.calls import Meta, bytes_view
from mpimodel.ops import WIN_CREATION, WIN_REQUESTS, WIN_SYNCS, WIN_TRANSFERS
from mpimodel.windows import completed, same_memory

from . import fake as F


class _WinCall:
    """What the divergence check compares, for a window's call."""

    __slots__ = ("op", "peer", "tag", "nbytes", "comm")

    def __init__(self, op, peer, nbytes_, comm):
        self.op, self.peer, self.tag, self.nbytes, self.comm = op, peer, -1, nbytes_, comm

    def signature(self):
        return self.op, self.peer, self.tag, self.nbytes, self.comm


def _copy_back(win, payloads, result):
    """The logged bytes into the pending result buffers, then the regions."""
    views = [v for _, v in win._pending] + win._regions
    if result is None or result.get("pending") != len(win._pending) \
            or len(payloads) != len(views):
        F.RP.diverged(f"window of log record {win._rid}: the log holds "
                      f"{len(payloads)} buffers to restore at this call, the replay has "
                      f"{len(views)} (pending transfers or attached memory differ)", F._CAUSE)
    for v, p in zip(views, payloads):
        F._copy_in(v, p, "one-sided data")


_REAL = MPI.Win
_CLS: dict = {}


def _sig(name):
    return inspect.signature(getattr(_REAL, name))


def _begin() -> bool:
    """Enter a call, unless the application runs on after finalize."""
    if F.RP.finished:
        F.RP.late += 1
        return False
    F.RP.enter()
    return True


def _creation(name):
    s, op = _sig(name), "win_" + name.lower()

    def f(cls, *args, **kw):
        ba = s.bind(*args, **kw)
        ba.apply_defaults()
        a = ba.arguments
        F.RP.enter()
        if name == "Create":
            v = bytes_view(a["memory"])
            regions = [v] if v is not None and v.nbytes else []
            size = sum(r.nbytes for r in regions)
        elif name in ("Allocate", "Allocate_shared"):
            size = int(a["size"])
            regions = [memoryview(bytearray(size))] if size else []
        else:
            size, regions = 0, []
        comm = getattr(a.get("comm"), "_rid", -1)
        F.RP.next(op, _WinCall(op, -1, size, comm))
        win = _CLS["Win"]()
        win._regions, win._pending, win._flavor = regions, [], name
        win._comm, win._unit = a.get("comm"), a.get("disp_unit", 1)
        win._rid = F.RP.log.index - 1
        F.RP.leave(op)
        return win
    f.__name__ = name
    return classmethod(f)


def _transfer(name):
    """Put, Get, ... and Rput, Rget, ... (a request whose completion fills
    the result buffer from the log, as an Irecv's)."""
    s, op = _sig(name), "win_" + name.lower()
    out = WIN_TRANSFERS[WIN_REQUESTS.get(name, name)]

    def f(self, *args, **kw):
        if not _begin():
            return None
        ba = s.bind(self, *args, **kw)
        ba.apply_defaults()
        a = ba.arguments
        target = a.get("target_rank", -1)
        F.RP.next(op, _WinCall(op, target, nbytes(a.get("origin")), self._rid))
        v = bytes_view(a[out]) if out is not None else None
        if v is not None:
            self._pending.append((target, v))
        F.RP.leave(op)
        return F._Fake.request(v) if name in WIN_REQUESTS else None
    f.__name__ = name
    return f


def _sync(name):
    s, op, rank_arg = _sig(name), "win_" + name.lower(), WIN_SYNCS[name]

    def f(self, *args, **kw):
        if not _begin():
            return None
        ba = s.bind(self, *args, **kw)
        ba.apply_defaults()
        target = ba.arguments[rank_arg] if rank_arg else -1
        result, payloads = F.RP.next(op, _WinCall(op, target, 0, self._rid))
        _copy_back(self, payloads, result)
        self._pending = completed(self._pending, name, target)
        payloads = None
        F.RP.leave(op)
        return result.get("flag") if name == "Test" else None
    f.__name__ = name
    return f


def _attach(self, memory):
    if not _begin():
        return
    F.RP.next("win_attach", _WinCall("win_attach", -1, nbytes(memory), self._rid))
    v = bytes_view(memory)
    if v is not None and v.nbytes:
        self._regions.append(v)
    F.RP.leave("win_attach")


def _detach(self, memory):
    if not _begin():
        return
    F.RP.next("win_detach", _WinCall("win_detach", -1, nbytes(memory), self._rid))
    v = bytes_view(memory)
    if v is not None:
        self._regions = [r for r in self._regions if not same_memory(r, v)]
    F.RP.leave("win_detach")


def _shared_query(self, rank):
    if not _begin():
        return None
    result, payloads = F.RP.next("win_shared_query",
                                 _WinCall("win_shared_query", rank, 0, self._rid))
    me = self._comm.Get_rank() if self._comm is not None else 0
    if rank == me and self._regions:
        mem = self._regions[0]
    else:
        # another rank's segment: a copy, refreshed at every synchronisation
        mem = memoryview(bytearray(result["size"]))
        if result["size"]:
            mem[:] = payloads[0]
            self._regions.append(mem)
    F.RP.leave("win_shared_query")
    return mem, result["unit"]


def _free(self):
    if not _begin():
        return
    F.RP.next("win_free", _WinCall("win_free", -1, 0, self._rid))
    F.RP.leave("win_free")


# queries the window answers itself
def _tomemory(self):
    return self._regions[0] if self._regions and self._flavor != "Create_dynamic" \
        else memoryview(bytearray(0))


_FLAVOR = {"Create": "WIN_FLAVOR_CREATE", "Allocate": "WIN_FLAVOR_ALLOCATE",
           "Allocate_shared": "WIN_FLAVOR_SHARED", "Create_dynamic": "WIN_FLAVOR_DYNAMIC"}


def _get_attr(self, keyval):
    size = self._regions[0].nbytes if self._regions else 0
    return {MPI.WIN_SIZE: size, MPI.WIN_DISP_UNIT: self._unit,
            MPI.WIN_CREATE_FLAVOR: getattr(MPI, _FLAVOR[self._flavor]),
            MPI.WIN_MODEL: MPI.WIN_UNIFIED}.get(keyval)


def _get_group(self):
    return self._comm.Get_group()


def build(real=MPI.Win):
    """The replay stand-in of ``real`` (MPI.Win)."""
    global _REAL
    _REAL = real
    ns = {n: _creation(n) for n in WIN_CREATION}
    ns.update({n: _transfer(n) for n in (*WIN_TRANSFERS, *WIN_REQUESTS)})
    ns.update({n: _sync(n) for n in WIN_SYNCS})
    ns.update(Attach=_attach, Detach=_detach, Shared_query=_shared_query, Free=_free,
              tomemory=_tomemory, Get_attr=_get_attr, Get_group=_get_group,
              group=property(_get_group), __bool__=lambda self: True,
              __eq__=lambda self, o: self is o, __ne__=lambda self, o: self is not o,
              __hash__=lambda self: id(self))
    _CLS["Win"] = Meta("ReplayWin", (real,), dict(ns, _real=real))
    return _CLS["Win"]
