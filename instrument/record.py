"""Message logging (docs/METHODS.md: the record step): record what flows into chosen ranks.

``mpiexec -n N python -m instrument record --ranks R1,R2 -o LOG_DIR app.py``
runs the application at full scale; only the chosen ranks are intercepted
(the others run untouched).  On those, every communication call is logged
in call order (contracts/msglog.py): the op and its arguments, and what
MPI answered: received bytes (raw, from the receive buffers), returned
objects (pickled), statuses, probe and test outcomes, completion order of
Waitany/Waitsome/Testsome, the shape of every communicator created, and
what one-sided communication put into the rank's memory
(mpimodel/windows.py).
``python -m replay`` later answers the same calls from this log.  The
calls the rank's compiled code makes itself (below Python) are logged by
the PMPI shim into a C log beside it (pmpishim/creplay.c), which the
replay's shim answers them from.
"""
from __future__ import annotations

import inspect

from mpi4py import MPI

from contracts.msglog import LogError, LogWriter
from launch import app_modules
from mpimodel.calls import (
    Meta,
    describe_comm,
    mixin_hierarchy,
    peer_tag,
)
from mpimodel.kinds import KIND_CLASS, Call, MatchedIrecv, MatchedRecv, Wait, WaitMany
from mpimodel.ops import COMM_METHODS, COMM_PARENTS, COMPLETE_ONE, WRAPPED_LEVELS, methods
from mpimodel.windows import build as build_windows

W: LogWriter | None = None
REAL: dict = {}
_BY_REAL: dict = {}
_SIG: dict = {}


def _sig(cls, name):
    key = (cls, name)
    s = _SIG.get(key)
    if s is None:
        s = _SIG[key] = inspect.signature(getattr(cls, name))
    return s


def _wrap(obj):
    """The recording subclass of a communicator/request/message MPI returned.

    Called right after the record of the call that made it: a communicator
    or request is known by that record's index (``_rid``), as replay knows
    its stand-in."""
    cls = _BY_REAL.get(type(obj))
    if cls is None:
        return obj
    new = cls(obj)
    if isinstance(new, REAL["Request"]):
        new._out = None
    new._rid = W.index - 1
    return new


class _Log:
    """The recorder's side of mpimodel/kinds.py: write a call's record,
    wrap what MPI returned into our recording classes."""

    @staticmethod
    def write(c: Call, result=None, payloads=()) -> None:
        W.write(c.op, c.peer, c.tag, result, payloads, c.nbytes, c.comm)

    @staticmethod
    def event(op: str, result=None, payloads=(), tag: int = -1) -> None:
        """A record of a call with no peer or tag to check (requests,
        messages); a test's ``tag`` says which requests it polled
        (kinds.requests_key)."""
        W.write(op, -1, tag, result, payloads)

    wrap = staticmethod(_wrap)


def _comm_method(cls_name, name):
    """The recording wrapper of a communicator method (its kind's record)."""
    real = REAL[cls_name]
    row = COMM_METHODS[name]
    kind = KIND_CLASS[row.kind]
    base = getattr(real, name)
    sig = _sig(real, name)

    def f(self, *args, **kw):
        ba = sig.bind(self, *args, **kw)
        ba.apply_defaults()
        a = ba.arguments
        c = Call(name, row.op, a, *peer_tag(row.kind, a))
        if "status" in a:
            c.status = a["status"] = a["status"] if a["status"] is not None else MPI.Status()
        return kind.record(c, base(*ba.args, **ba.kwargs), _Log)
    f.__name__ = name
    return f


# ---- requests and matched messages (mpimodel/kinds.py: what is logged) ------
def _single(name):
    """Wait/Test (either case) on one request."""
    base = getattr(REAL["Request"], name)

    def f(self, status=None):
        st = status if status is not None else MPI.Status()
        return Wait.record(name, self, base(self, st), st, _Log)
    f.__name__ = name
    return f


def _multi(name):
    """Waitall/Testall/Waitany/Testany/Waitsome/Testsome, either case."""
    base = getattr(REAL["Request"], name)
    one = name.lower() in COMPLETE_ONE

    def f(cls, requests, statuses=None):
        requests = list(requests)
        if statuses is None:
            statuses = MPI.Status() if one else [MPI.Status() for _ in requests]
        return WaitMany.record(name, requests, base(requests, statuses), statuses, _Log)
    f.__name__ = name
    return classmethod(f)


def _start(self):
    REAL["Prequest"].Start(self)
    _Log.event("start")


def _startall(cls, requests):
    requests = list(requests)
    REAL["Prequest"].Startall(requests)
    for _ in requests:
        _Log.event("start")


def _message_method(name):
    base = getattr(REAL["Message"], name)

    def f(self, *args, **kw):
        buf = (args[0] if args else kw["buf"]) if name[0].isupper() else None
        if name in ("Recv", "recv"):
            st = MPI.Status()
            res = base(self, buf, st) if name == "Recv" else base(self, st)
            return MatchedRecv.record(name, buf, res, st, _Log)
        return MatchedIrecv.record(name, buf, base(self, *args, **kw), _Log)
    f.__name__ = name
    return f


def _from_group(cls_name, name, op):
    base = getattr(REAL[cls_name], name)

    def f(cls, *args, **kw):
        res = base(*args, **kw)
        W.write(op, -1, -1, describe_comm(res))
        return _wrap(res) if res is not None and res != MPI.COMM_NULL else res
    f.__name__ = name
    return classmethod(f)


def _methods_for(cls_name: str) -> dict:
    """The recording methods the mpi4py class ``cls_name`` defines."""
    ns = {}
    for m, row in COMM_METHODS.items():
        if row.level == cls_name and row.kind in KIND_CLASS:
            ns[m] = _comm_method(cls_name, m)
        elif row.level == cls_name and row.kind == "create_from":
            ns[m] = _from_group(cls_name, m, row.op)
    return ns


def _build():
    for name in WRAPPED_LEVELS:
        REAL[name] = getattr(MPI, name)
    mixins = mixin_hierarchy("Rec", lambda c: _methods_for(c))
    for cname in COMM_PARENTS:
        _BY_REAL[REAL[cname]] = Meta("Rec" + cname, (mixins[cname], REAL[cname]),
                                      {"_real": REAL[cname]})
    req_ns = {"__slots__": ()}
    for n in methods("Request", "wait"):
        req_ns[n] = _single(n)
    for n in methods("Request", "waitmany"):
        req_ns[n] = _multi(n)
    mixin = type("RecRequestMethods", (), req_ns)
    # _out: what completion delivers: a byte view of the receive buffer,
    # "obj" for lower-case receives, or None; _rid: the record that made it
    RecRequest = Meta("RecRequest", (mixin, REAL["Request"]),
                       {"_real": REAL["Request"], "__slots__": ("_out", "_rid")})
    RecPrequest = Meta("RecPrequest", (mixin, REAL["Prequest"]),
                        {"_real": REAL["Prequest"], "Start": _start,
                         "Startall": classmethod(_startall), "__slots__": ("_out", "_rid")})
    RecMessage = Meta("RecMessage", (REAL["Message"],),
                       dict({n: _message_method(n) for n in methods("Message", "mrecv", "imrecv")},
                            _real=REAL["Message"]))
    _BY_REAL[REAL["Request"]] = RecRequest
    _BY_REAL[REAL["Prequest"]] = RecPrequest
    _BY_REAL[REAL["Message"]] = RecMessage
    REAL["Win"] = MPI.Win
    _BY_REAL[REAL["Win"]] = build_windows(lambda: W, _wrap, REAL["Win"])


def install(log_path: str, header: dict) -> LogWriter:
    """Start logging this rank: recording classes and COMM_WORLD."""
    global W
    from mpimodel import calls
    calls.WORLD_GROUP = MPI.COMM_WORLD.Get_group()
    _build()
    W = LogWriter(log_path, header, modules=app_modules)
    MPI.COMM_WORLD = _BY_REAL[REAL["Intracomm"]](MPI.COMM_WORLD)
    MPI.COMM_WORLD._rid = 0                 # known by the init record, as in replay
    for real, cls in _BY_REAL.items():
        setattr(MPI, real.__name__, cls)
    W.write("init", -1, -1, describe_comm(MPI.COMM_WORLD))
    return W


def finish(status: str = "complete") -> None:
    """Log finalize, close the log and write its completion status."""
    if W is not None and not W.f.closed:
        try:
            W.write("finalize", -1, -1, None)
        except LogError as e:
            status = f"failed: {e}"
        W.close(status)

