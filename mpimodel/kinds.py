"""What MPI answers each kind of communicator call: how ``instrument
record`` logs it and how ``replay`` gives it back, side by side.

A kind (the ``kind`` column of mpimodel/ops.py) groups the mpi4py
methods that return and fill the same things.  For each kind:

* ``record(call, res, log)`` runs on the host after the real call: it
  writes one log record (the call's op, the peer and tag the application
  passed, and what MPI answered) and returns what the application gets;
* ``replay(call, result, payloads, fake)`` runs on the target instead of
  the call: from that record it gives the application the same answer
  without communicating, and says whether the call was an empty poll.

Polls (``POLLS``: Iprobe, Improbe, Test*) that find or complete nothing
are not logged: replay answers a poll from the log when the log's next
record is that same poll (same op, same arguments or requests: the poll
that succeeded in the recorded run), and with ``EMPTY_ANSWERS`` otherwise.
A waiting loop thus ends at its first poll on replay, and its log holds
one record however long the recorded run polled.

Communicator methods pass a :class:`Call`; request completions and
matched messages (the ``wait``, ``waitmany``, ``mrecv`` and ``imrecv``
kinds) pass the request(s) and status(es) they work on.  A ``start`` is
logged and replayed as a bare event (record.py, fake.py).

``log`` is the recorder's port (``write``, ``event``, ``wrap``:
instrument/record.py), ``fake`` the replayer's (``request``, ``prequest``,
``message``, ``new_comm``, ``copy_in``, ``completed``, ``diverged``:
replay/fake.py).  A request carries ``_out``: what its completion
delivers (a byte view of the receive buffer, ``"obj"`` for an object
receive, None), and on replay ``"done"`` once completed.  Keeping both halves of a kind
in one class keeps what one writes and the other reads in step.
"""
from __future__ import annotations

import zlib
from typing import Any

from mpi4py import MPI

from .bufsize import nbytes
from .calls import bytes_view, describe_comm, fill_status, output_view, status_tuple


class Call:
    """One intercepted communicator call.

    ``name``: the mpi4py method; ``op``: its canonical op name; ``a``: its
    bound arguments (name -> value, defaults applied); ``peer``, ``tag``:
    as the application passed them; ``nbytes``: the size of the buffers or
    objects it passed (:func:`call_bytes`); ``comm``: the log record that
    created the communicator it was called on (0: COMM_WORLD; -1: unknown).
    The recorder logs op, peer, tag, nbytes and comm; replay checks them all.
    ``lower``: the object (lower-case) API, whose payloads are pickles;
    ``status``: the Status MPI fills (the application's, or one of our own)."""

    __slots__ = ("name", "op", "a", "peer", "tag", "lower", "status", "nbytes", "comm")
    status: Any                # an MPI.Status once the call has one

    def __init__(self, name: str, op: str, a: dict, peer: int, tag: int):
        self.name, self.op, self.a, self.peer, self.tag = name, op, a, peer, tag
        self.lower = name[0].islower()
        self.status = None
        self.nbytes = call_bytes(a, self.lower)
        self.comm = getattr(a.get("self"), "_rid", -1)

    def signature(self) -> tuple:
        """What the divergence check compares: (op, peer, tag, nbytes, comm)."""
        return self.op, self.peer, self.tag, self.nbytes, self.comm


# ops that poll: a call that finds or completes nothing is not logged
POLLS = frozenset({"iprobe", "improbe", "test", "testall", "testany", "testsome"})
# what MPI returns for a poll that found or completed nothing, per method
EMPTY_ANSWERS: dict[str, object] = {
    "Iprobe": False, "iprobe": False, "Improbe": None, "improbe": None,
    "Test": False, "test": (False, None), "Testall": False, "testall": (False, None),
    "Testany": (MPI.UNDEFINED, False), "testany": (MPI.UNDEFINED, False, None),
    "Testsome": [], "testsome": ([], []),
}


def empty_answer(name: str):
    """A fresh empty answer of poll method ``name`` (lists the caller may keep)."""
    if name == "Testsome":
        return []
    if name == "testsome":
        return [], []
    return EMPTY_ANSWERS[name]


def found_nothing(name: str, res) -> bool:
    """Whether a poll's answer ``res`` is its empty answer (a Testall of
    inactive requests answers True and Testsome None: those are logged)."""
    if name == "Testsome":
        return res is not None and len(res) == 0
    if name == "testsome":
        return res[0] is not None and len(res[0]) == 0
    return res == EMPTY_ANSWERS[name]


def requests_key(requests) -> int:
    """Which requests a completion call works on, as recorder and replay
    both know them: the log records that made them (``_rid``).  Logged as
    the tag of test records, so that a replayed poll of one request is
    never answered with another's completion."""
    ids = [getattr(r, "_rid", -1) for r in requests]
    return zlib.crc32(repr(ids).encode()) & 0x7fffffff


def _size(spec) -> int:
    try:
        return nbytes(spec)
    except Exception:                     # an argument MPI itself will reject
        return 0


_BUFFERS = ("buf", "sendbuf", "recvbuf")
_OBJECTS = ("obj", "sendobj")


def call_bytes(a: dict, lower: bool) -> int:
    """Bytes of what a call was given: its buffers' sizes (send and receive
    buffers alike: a receive buffer of another size is another run), or for
    the object API the pickled size of the objects it sends.  The same
    application with other input (``--n 128`` instead of ``64``) passes
    other sizes, which replay catches at its first call."""
    if lower:
        total = 0
        for k in _OBJECTS:
            if a.get(k) is not None:
                try:
                    total += len(dumps(a[k]))
                except Exception:         # an object its pickler refuses: not sized
                    pass
        return total
    return sum(_size(a[k]) for k in _BUFFERS
               if a.get(k) is not None and a.get(k) is not MPI.IN_PLACE)


def dumps(obj) -> bytes:
    """An object as the log keeps it (received, returned, sent): pickled by
    mpi4py's configured pickler (MPI.pickle), the one the application's
    objects travel with; mpipool configures dill, and the standard pickler
    refuses the functions dill brought in."""
    return bytes(MPI.pickle.dumps(obj))


def loads(data: bytes):
    """The object :func:`dumps` logged."""
    return MPI.pickle.loads(data)


def _received(c: Call, res) -> bytes:
    """What a blocking receive delivered: the object's pickle, or the bytes
    MPI wrote into the receive buffer (as many as the status counts)."""
    if c.lower:
        return dumps(res)
    v = output_view(c.name, c.a)
    return bytes(v[:c.status.Get_count(MPI.BYTE)]) if v is not None else b""


class Send:
    """A blocking send: the log keeps its size; replay sends nowhere."""

    @staticmethod
    def record(c, res, log):
        log.write(c)
        return res

    @staticmethod
    def replay(c, result, payloads, fake):
        return None, False


class Isend(Send):
    """A nonblocking send: a request that completes at once on replay."""

    @staticmethod
    def record(c, res, log):
        Send.record(c, res, log)
        return log.wrap(res)

    @staticmethod
    def replay(c, result, payloads, fake):
        return fake.request(), False


class PersistentInit(Send):
    """Send_init/Recv_init: a persistent request; a receive's buffer is
    filled at each completion."""

    @staticmethod
    def record(c, res, log):
        Send.record(c, res, log)
        r = log.wrap(res)
        r._out = bytes_view(c.a["buf"]) if c.name == "Recv_init" else None
        return r

    @staticmethod
    def replay(c, result, payloads, fake):
        return fake.prequest(bytes_view(c.a["buf"]) if c.name == "Recv_init" else None), False


class Recv:
    """A blocking receive (or Sendrecv): the received bytes or object and
    the status."""

    @staticmethod
    def record(c, res, log):
        log.write(c, result=status_tuple(c.status), payloads=[_received(c, res)])
        return res

    @staticmethod
    def replay(c, result, payloads, fake):
        fill_status(c.a.get("status"), result)
        if c.lower:
            return loads(payloads[0]), False
        fake.copy_in(output_view(c.name, c.a), payloads[0], c.op)
        return None, False


class Irecv:
    """A nonblocking receive or collective: a request whose completion
    (logged with the completion call) fills the output buffer."""

    @staticmethod
    def record(c, res, log):
        log.write(c)
        r = log.wrap(res)
        r._out = "obj" if c.lower else output_view(c.name, c.a)
        return r

    @staticmethod
    def replay(c, result, payloads, fake):
        return fake.request("obj" if c.lower else output_view(c.name, c.a)), False


class PersistentCollective(Irecv):
    """A persistent collective (*_init): like Irecv, a persistent request."""

    @staticmethod
    def replay(c, result, payloads, fake):
        return fake.prequest(output_view(c.name, c.a)), False


class Probe:
    """Probe/Iprobe: whether a message was there, and its status."""

    @staticmethod
    def record(c, res, log):
        if not res:                       # an Iprobe that found nothing
            return res
        log.write(c, result=(bool(res), status_tuple(c.status) if res else None))
        return res

    @staticmethod
    def replay(c, result, payloads, fake):
        flag, st = result
        if flag:
            fill_status(c.a.get("status"), st)
        return (flag if c.name in ("Iprobe", "iprobe") else True), not flag


class Mprobe:
    """Mprobe/Improbe: a matched message (or none) and its status."""

    @staticmethod
    def record(c, res, log):
        got = res is not None and res != MPI.MESSAGE_NULL
        if not got and c.name in ("Improbe", "improbe"):
            return res                    # found nothing
        log.write(c, result=(got, status_tuple(c.status) if got else None))
        return log.wrap(res) if got else res

    @staticmethod
    def replay(c, result, payloads, fake):
        got, st = result
        if got:
            fill_status(c.a.get("status"), st)
            return fake.message(), False
        return (None if c.name in ("Improbe", "improbe") else MPI.MESSAGE_NULL), True


class Collective:
    """A blocking buffer collective: the bytes of its output buffer."""

    @staticmethod
    def record(c, res, log):
        v = output_view(c.name, c.a)
        log.write(c, payloads=[bytes(v)] if v is not None else [])
        return res

    @staticmethod
    def replay(c, result, payloads, fake):
        if payloads:
            fake.copy_in(output_view(c.name, c.a), payloads[0], c.op)
        return None, False


class ObjectCollective:
    """An object collective: the returned object, pickled.  Replay also
    redoes mpi4py's own pickling and reducing in it (replay/objects.py)."""

    @staticmethod
    def record(c, res, log):
        log.write(c, payloads=[dumps(res)])
        return res

    @staticmethod
    def replay(c, result, payloads, fake):
        return fake.object_result(c, payloads[0]), False


class Create:
    """Communicator creation: the new communicator's description (rank,
    size, members, topology), from which replay impersonates it."""

    @staticmethod
    def record(c, res, log):
        log.write(c, result=describe_comm(res))
        # wrapped after its record: the communicator is known by that record
        return log.wrap(res) if res is not None and res != MPI.COMM_NULL else res

    @staticmethod
    def replay(c, result, payloads, fake):
        return fake.new_comm(result), False


class Idup:
    """Idup: a communicator and a request."""

    @staticmethod
    def record(c, res, log):
        log.write(c, result=describe_comm(res[0]))
        req = log.wrap(res[1])
        return log.wrap(res[0]), req

    @staticmethod
    def replay(c, result, payloads, fake):
        return (fake.new_comm(result), fake.request()), False


class Free(Send):
    """Free/Disconnect: nothing comes back (logged and answered as a send)."""


# ---- requests: what their completion delivers --------------------------------

def _delivered(req, obj) -> bytes | None:
    """Record: what a completed request delivered (its receive buffer's
    bytes, or the object's pickle), or None for a send."""
    out = getattr(req, "_out", None)
    if out is None:
        return None
    if isinstance(out, str):
        return dumps(obj)
    return bytes(out)


def _deliver(req, payloads: list, fake) -> None:
    """Replay: complete ``req``, filling its receive buffer from the next
    payload (a persistent request stays usable, its buffer kept)."""
    out = getattr(req, "_out", None)
    fake.completed(req)
    if out is not None and not isinstance(out, str):
        fake.copy_in(out, payloads.pop(0), "completion")


class Wait:
    """Wait/Test on one request (either case): whether it completed, its
    status, what it delivered, and what the buffer method returned."""

    @staticmethod
    def record(name, req, res, st, log):
        lower, is_test = name[0].islower(), name.lower() == "test"
        flag = (res[0] if lower else res) if is_test else True
        if not flag:
            return res                    # a Test that completed nothing
        obj = (res[1] if is_test else res) if lower else None
        p = _delivered(req, obj)
        log.event(name.lower(), (True, status_tuple(st), res if not lower else None),
                  [p] if p is not None else [], tag=requests_key([req]))
        return res

    @staticmethod
    def replay(name, req, status, result, payloads, fake):
        lower, is_test = name[0].islower(), name.lower() == "test"
        flag, st, res = result
        if flag:
            fill_status(status, st)
            payloads = list(payloads)
            if getattr(req, "_out", None) == "obj":
                obj = loads(payloads[0])
                req._out = "done"
                res = (True, obj) if is_test else obj
            else:
                _deliver(req, payloads, fake)
                if lower:
                    res = (True, None) if is_test else None
        elif lower:
            res = (False, None)
        return res, not flag


class WaitMany:
    """Waitall/any/some and Testall/any/some (either case): which requests
    completed, with their statuses and what they delivered (the object
    methods return the objects: their whole return value is pickled)."""

    @staticmethod
    def _completed(name, requests, res, statuses):
        """(indices completed, {index: status tuple}) after the real call."""
        lname, lower = name.lower(), name[0].islower()
        if lname in ("waitany", "testany"):
            idx = res if name == "Waitany" else res[0]
            flag = True if lname == "waitany" else res[1]
            done = [idx] if flag and idx is not None and idx >= 0 else []
            return done, {idx: status_tuple(statuses)} if done else {}
        if lname == "waitall":
            done = list(range(len(requests)))
        elif lname == "testall":
            done = list(range(len(requests))) if (res[0] if lower else res) else []
        else:
            done = list((res[0] if lower else res) or [])
        return done, {i: status_tuple(statuses[i]) for i in done}

    @staticmethod
    def record(name, requests, res, statuses, log):
        """``statuses``: one Status for Waitany/Testany, else one per request."""
        if name.lower().startswith("test") and found_nothing(name, res):
            return res
        done, sts = WaitMany._completed(name, requests, res, statuses)
        lower = name[0].islower()
        if lower:
            payloads = [dumps(res)]
        else:
            payloads = [p for p in (_delivered(requests[i], None) for i in done)
                        if p is not None]
        log.event(name.lower(), ([(i, sts[i]) for i in done], None if lower else res),
                  payloads, tag=requests_key(requests))
        return res

    @staticmethod
    def replay(name, requests, statuses, result, payloads, fake):
        lname, lower = name.lower(), name[0].islower()
        done, ret = result
        payloads = list(payloads)
        if lower:
            ret = loads(payloads.pop())
        for i, st in done:
            if i >= len(requests):
                fake.diverged(f"({lname}): the log completed request #{i} of "
                              f"{len(requests)} passed")
            if not lower:
                _deliver(requests[i], payloads, fake)
            elif hasattr(requests[i], "_out"):
                requests[i]._out = "done"
            if isinstance(statuses, list) and i < len(statuses):
                fill_status(statuses[i], st)
            elif isinstance(statuses, MPI.Status):
                fill_status(statuses, st)
        return ret, False                 # a logged test is never an empty poll


class MatchedRecv:
    """Message.Recv/recv (a message Mprobe matched): the bytes or object and
    the status."""

    @staticmethod
    def record(name, buf, res, st, log):
        if name == "Recv":
            v = bytes_view(buf)
            payload = bytes(v[:st.Get_count(MPI.BYTE)]) if v is not None else b""
        else:
            payload = dumps(res)
        log.event("mrecv", status_tuple(st), [payload])
        return res

    @staticmethod
    def replay(name, buf, status, result, payloads, fake):
        fill_status(status, result)
        if name == "recv":
            return loads(payloads[0]), False
        fake.copy_in(bytes_view(buf), payloads[0], "mrecv")
        return None, False


class MatchedIrecv:
    """Message.Irecv/irecv: a request, completed by a wait that logs it."""

    @staticmethod
    def record(name, buf, res, log):
        log.event("imrecv")
        r = log.wrap(res)
        r._out = "obj" if name == "irecv" else bytes_view(buf)
        return r

    @staticmethod
    def replay(name, buf, fake):
        return fake.request("obj" if name == "irecv" else bytes_view(buf)), False


# kind (mpimodel/ops.py) -> its recording and replaying, for communicator
# methods; the request kinds above are called by the request classes, and
# ops.REFUSED_KINDS are refused
KIND_CLASS = {
    "send": Send, "isend": Isend, "pinit": PersistentInit,
    "recv": Recv, "sendrecv": Recv, "irecv": Irecv, "isendrecv": Irecv, "icoll": Irecv,
    "pcoll": PersistentCollective, "probe": Probe, "mprobe": Mprobe,
    "coll": Collective, "ocoll": ObjectCollective, "create": Create, "idup": Idup,
    "free": Free,
}
