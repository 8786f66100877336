"""Message logging (METHODS.md M1 S3): record what flows into chosen ranks.

``mpiexec -n N python -m instrument record --ranks R1,R2 -o LOG_DIR app.py``
runs the application at full scale; only the chosen ranks are intercepted
(the others run untouched).  On those, every communication call is logged
in call order (instrument/msglog.py): the op and its arguments, and what
MPI answered: received bytes (raw, from the receive buffers), returned
objects (pickled), statuses, probe and test outcomes, completion order of
Waitany/Waitsome/Testsome, and the shape of every communicator created.
``python -m replay`` later answers the same calls from this log.
"""
from __future__ import annotations

import inspect
import pickle

from mpi4py import MPI

from .bufsize import nbytes
from .calls import (COMM_PARENTS, KIND, OP, bytes_view, describe_comm,
                    mixin_hierarchy, output_view, peer_tag, status_tuple)
from .intercept import _Meta
from .msglog import LogWriter

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


def _nbytes(spec) -> int:
    try:
        return nbytes(spec)
    except Exception:
        return 0


def _wrap(obj):
    """The recording subclass of a communicator/request/message MPI returned."""
    cls = _BY_REAL.get(type(obj))
    if cls is None:
        return obj
    new = cls(obj)
    if isinstance(new, REAL["Request"]):
        new._out = None
    return new


def _comm_method(cls_name, name):
    real = REAL[cls_name]
    kind, op = KIND[name], OP[name]
    base = getattr(real, name)
    sig = _sig(real, name)
    lower = name[0].islower()

    def f(self, *args, **kw):
        ba = sig.bind(self, *args, **kw)
        ba.apply_defaults()
        a = ba.arguments
        peer, tag = peer_tag(kind, a)
        st = None
        if "status" in a:
            st = a["status"] if a["status"] is not None else MPI.Status()
            a["status"] = st
        res = base(*ba.args, **ba.kwargs)
        if kind in ("send", "isend", "pinit"):
            size = 0 if lower else _nbytes(a.get("buf"))
            W.write(op, peer, tag, size, None)
            if kind == "isend":
                return _wrap(res)
            if kind == "pinit":
                r = _wrap(res)
                r._out = bytes_view(a["buf"]) if name == "Recv_init" else None
                return r
            return res
        if kind in ("recv", "sendrecv"):
            if lower:
                payload = pickle.dumps(res, protocol=5)
            else:
                v = output_view(name, a)
                payload = bytes(v[:st.Get_count(MPI.BYTE)]) if v is not None else b""
            W.write(op, peer, tag, 0, status_tuple(st), [payload])
            return res
        if kind in ("irecv", "isendrecv", "icoll", "pcoll"):
            W.write(op, peer, tag, 0, None)
            r = _wrap(res)
            r._out = "obj" if lower else output_view(name, a)
            return r
        if kind == "probe":
            flag = res
            W.write(op, peer, tag, 0, (bool(flag), status_tuple(st) if flag else None))
            return res
        if kind == "mprobe":
            got = res is not None and res != MPI.MESSAGE_NULL
            W.write(op, peer, tag, 0, (got, status_tuple(st) if got else None))
            if got:
                m = _wrap(res)
                return m
            return res
        if kind == "coll":
            v = output_view(name, a)
            W.write(op, peer, tag, 0, None, [bytes(v)] if v is not None else [])
            return res
        if kind == "ocoll":
            W.write(op, peer, tag, 0, None, [pickle.dumps(res, protocol=5)])
            return res
        if kind == "create":
            new = _wrap(res) if res is not None and res != MPI.COMM_NULL else res
            W.write(op, -1, -1, 0, describe_comm(res))
            return new
        if kind == "idup":
            W.write(op, -1, -1, 0, describe_comm(res[0]))
            r = _wrap(res[1])
            return _wrap(res[0]), r
        W.write(op, -1, -1, 0, None)             # free
        return res
    f.__name__ = name
    return f


# ---- request completions ---------------------------------------------------
def _payload_of(r, obj):
    out = getattr(r, "_out", None)
    if out is None:
        return None
    if isinstance(out, str):
        return pickle.dumps(obj, protocol=5)
    return bytes(out)


def _single(name):
    base = getattr(REAL["Request"], name)
    lower = name[0].islower()
    is_test = name.lower() == "test"

    def f(self, status=None):
        st = status if status is not None else MPI.Status()
        res = base(self, st)
        flag = (res[0] if lower else res) if is_test else True
        obj = (res[1] if is_test else res) if lower else None
        payloads = []
        if flag:
            p = _payload_of(self, obj)
            if p is not None:
                payloads.append(p)
        W.write(name.lower(), -1, -1, 0, (bool(flag), status_tuple(st) if flag else None,
                                          res if not lower else None), payloads)
        return res
    f.__name__ = name
    return f


def _multi(name):
    """Waitall/Testall/Waitany/Testany/Waitsome/Testsome, either case."""
    base = getattr(REAL["Request"], name)
    lname = name.lower()
    lower = name[0].islower()

    def f(cls, requests, statuses=None):
        requests = list(requests)
        one = lname in ("waitany", "testany")
        if one:
            st = statuses if statuses is not None else MPI.Status()
            res = base(requests, st)
            idx = res if name == "Waitany" else res[0]
            flag = True if lname == "waitany" else res[1]
            done = [idx] if flag and idx is not None and idx >= 0 else []
            sts = {idx: status_tuple(st)} if done else {}
        else:
            sts_ = statuses if statuses is not None else [MPI.Status() for _ in requests]
            res = base(requests, sts_)
            if lname == "waitall":
                done = list(range(len(requests)))
            elif lname == "testall":
                done = list(range(len(requests))) if (res[0] if lower else res) else []
            else:
                idx = res[0] if lower else res
                done = list(idx or [])
            sts = {i: status_tuple(sts_[i]) for i in done}
        payloads = []
        if lower:
            # the objects come back in the return value: pickle it whole
            payloads.append(pickle.dumps(res, protocol=5))
        else:
            for i in done:
                p = _payload_of(requests[i], None)
                if p is not None:
                    payloads.append(p)
        W.write(lname, -1, -1, 0, ([(i, sts[i]) for i in done],
                                   None if lower else res), payloads)
        return res
    f.__name__ = name
    return classmethod(f)


def _start(self):
    REAL["Prequest"].Start(self)
    W.write("start", -1, -1, 0, None)


def _startall(cls, requests):
    requests = list(requests)
    REAL["Prequest"].Startall(requests)
    for _ in requests:
        W.write("start", -1, -1, 0, None)


def _message_method(name):
    base = getattr(REAL["Message"], name)
    lower = name[0].islower()
    op = {"Recv": "mrecv", "recv": "mrecv", "Irecv": "imrecv", "irecv": "imrecv"}[name]

    def f(self, *args, **kw):
        if name in ("Recv", "recv"):
            st = MPI.Status()
            if name == "Recv":
                buf = args[0] if args else kw["buf"]
                res = base(self, buf, st)
                v = bytes_view(buf)
                payload = bytes(v[:st.Get_count(MPI.BYTE)]) if v is not None else b""
            else:
                res = base(self, st)
                payload = pickle.dumps(res, protocol=5)
            W.write(op, -1, -1, 0, status_tuple(st), [payload])
            return res
        res = base(self, *args, **kw)
        W.write(op, -1, -1, 0, None)
        r = _wrap(res)
        r._out = "obj" if lower else bytes_view(args[0] if args else kw["buf"])
        return r
    f.__name__ = name
    return f


def _from_group(cls_name, name, op):
    base = getattr(REAL[cls_name], name)

    def f(cls, *args, **kw):
        res = base(*args, **kw)
        W.write(op, -1, -1, 0, describe_comm(res))
        return _wrap(res) if res is not None and res != MPI.COMM_NULL else res
    f.__name__ = name
    return classmethod(f)


def _build():
    for name in ("Comm", "Intracomm", "Topocomm", "Cartcomm", "Graphcomm", "Distgraphcomm",
                 "Intercomm", "Request", "Prequest", "Message"):
        REAL[name] = getattr(MPI, name)
    mixins = mixin_hierarchy("Rec", lambda c: {n: _comm_method(c, n) for n in KIND
                                               if n in vars(REAL[c])})
    mixins["Intracomm"].Create_from_group = _from_group("Intracomm", "Create_from_group",
                                                        "comm_create_from_group")
    mixins["Intercomm"].Create_from_groups = _from_group("Intercomm", "Create_from_groups",
                                                         "intercomm_create_from_groups")
    for cname in COMM_PARENTS:
        _BY_REAL[REAL[cname]] = _Meta("Rec" + cname, (mixins[cname], REAL[cname]),
                                      {"_real": REAL[cname]})
    req_ns = {"__slots__": ()}
    for n in ("Wait", "wait", "Test", "test"):
        req_ns[n] = _single(n)
    for n in ("Waitall", "waitall", "Testall", "testall", "Waitany", "waitany", "Testany",
              "testany", "Waitsome", "waitsome", "Testsome", "testsome"):
        req_ns[n] = _multi(n)
    mixin = type("RecRequestMethods", (), req_ns)
    # _out: what completion delivers: a byte view of the receive buffer,
    # "obj" for lower-case receives, or None
    RecRequest = _Meta("RecRequest", (mixin, REAL["Request"]),
                       {"_real": REAL["Request"], "__slots__": ("_out",)})
    RecPrequest = _Meta("RecPrequest", (mixin, REAL["Prequest"]),
                        {"_real": REAL["Prequest"], "Start": _start,
                         "Startall": classmethod(_startall), "__slots__": ("_out",)})
    RecMessage = _Meta("RecMessage", (REAL["Message"],),
                       dict({n: _message_method(n) for n in ("Recv", "recv", "Irecv", "irecv")},
                            _real=REAL["Message"]))
    _BY_REAL[REAL["Request"]] = RecRequest
    _BY_REAL[REAL["Prequest"]] = RecPrequest
    _BY_REAL[REAL["Message"]] = RecMessage


def install(log_path: str, header: dict) -> LogWriter:
    """Start logging this rank: recording classes and COMM_WORLD."""
    global W
    from . import calls
    calls.WORLD_GROUP = MPI.COMM_WORLD.Get_group()
    _build()
    W = LogWriter(log_path, header)
    MPI.COMM_WORLD = _BY_REAL[REAL["Intracomm"]](MPI.COMM_WORLD)
    for real, cls in _BY_REAL.items():
        setattr(MPI, real.__name__, cls)
    W.write("init", -1, -1, 0, describe_comm(MPI.COMM_WORLD))
    return W


def finish(status: str = "complete") -> None:
    if W is not None and not W.f.closed:
        W.write("finalize", -1, -1, 0, None)
        W.close(status)

