"""Interception of mpi4py: traced subclasses of every communicator, request
and message class, installed before the application imports anything.

How it works, and why this way:

* mpi4py's classes are extension types whose methods cannot be patched, so
  the tracer defines subclasses (``TracedIntracomm`` ...) whose methods time
  the real call and record one event.  ``MPI.COMM_WORLD``/``COMM_SELF`` and
  the class names in the ``mpi4py.MPI`` module are replaced by them, so
  ``MPI.Request.Waitall(...)`` and ``isinstance(c, MPI.Intracomm)`` keep
  working (a metaclass answers ``isinstance`` for the real class too).
* Every method returning a communicator, request or message wraps the result
  in the traced subclass.  mpi4py's copy constructor shares the handle and,
  for requests and messages, the buffer kept alive for pickled data, so the
  wrapper behaves exactly like the original object.
* Lower-case (pickle) methods get their byte counts from a counting
  ``MPI.pickle`` (same functions, same protocol: identical bytes on the wire).
* One-sided windows and files are wrapped too; their calls are recorded under
  ``win_*``/``file_*`` op names: windows with targets and bytes (modelled by
  the simulator), files as calls later stages report as unmodelled.
"""
from __future__ import annotations

import hashlib
import inspect
import warnings

from mpi4py import MPI

from contracts.raw_trace import (
    FLAG_ANY_SOURCE,
    FLAG_ANY_TAG,
    FLAG_INPLACE,
    FLAG_LOCK_SHARED,
    FLAG_NONCONTIG,
    FLAG_NONE,
    FLAG_OBJECT,
)
from mpimodel import ops
from mpimodel.bufsize import (
    BLOCKED_RECV,
    BLOCKED_SEND,
    PickleCounter,
    blocked_nbytes,
    nbytes,
    noncontiguous,
    per_peer,
)
from mpimodel.calls import Meta, mixin_hierarchy
from mpimodel.kinds import POLLS, found_nothing

from ._hotpath import WriteError, enter, leave, leave_ex, new_req
from .writer import Recorder

R: Recorder = None            # set by install()
PK = PickleCounter()
ANY_SOURCE, ANY_TAG, PROC_NULL, ROOT = MPI.ANY_SOURCE, MPI.ANY_TAG, MPI.PROC_NULL, MPI.ROOT
IN_PLACE = MPI.IN_PLACE
REAL: dict = {}               # name -> the real mpi4py class
_STATUS = MPI.Status()        # used when the application passes no status
_world_group = None
_comm_keys: dict = {}         # communicator key -> count of comms seen with it


def code(name: str) -> int:
    c = ops.CODE.get(name)
    if c is None:
        c = ops.code(name)
        if R is not None:
            R.note("o", c, name)
    return c


# --------------------------------------------------------------------------
# Communicators: registration (members as world ranks) and peer translation
# --------------------------------------------------------------------------

def _world_ranks(group) -> list[int]:
    return MPI.Group.Translate_ranks(group, None, _world_group)


def _register(comm, parent_key: str, how: str, parent_idx: int = -1):
    """Give a communicator its trace id and world-rank tables; note it."""
    real = REAL
    g = real["Comm"].Get_group(comm)
    members = _world_ranks(g)
    g.Free()
    remote = None
    if real["Comm"].Is_inter(comm):
        rg = real["Intercomm"].Get_remote_group(comm)
        remote = _world_ranks(rg)
        rg.Free()
    # The key is the same on every member: the parent's key, how many comms
    # this rank already derived from that parent (creation is collective over
    # the parent, so members agree), and the members themselves (which tell
    # apart the comms one Split call makes).
    groups = (tuple(members),) if remote is None else \
        tuple(sorted([tuple(members), tuple(remote)]))   # both sides of an intercomm agree
    base = (parent_key, how, groups)
    nth = _comm_keys.get(base, 0)
    _comm_keys[base] = nth + 1
    key = hashlib.blake2b(repr(base + (nth,)).encode(), digest_size=8).hexdigest()
    idx = len(_comm_keys_by_idx)
    _comm_keys_by_idx.append(key)
    comm._tidx = idx
    comm._tkey = key
    comm._w = members
    comm._p = remote if remote is not None else members
    comm._me = members[real["Comm"].Get_rank(comm)]
    if R.below is not None:              # calls below Python name it by its handle
        R.below.comm_known(comm.handle, idx, key)
    topo = _topology(comm, members, remote)
    R.note("c", idx, key, type(comm).__name__.replace("Traced", ""), members, remote,
           parent_idx, how, topo)
    return comm


_comm_keys_by_idx: list[str] = []


def _topology(comm, members, remote):
    """Neighbour lists (world ranks) of a topology communicator, or None."""
    real = REAL
    if not isinstance(comm, real["Topocomm"]):
        return None
    ins, outs = comm.inoutedges
    w = lambda r: members[r] if r >= 0 else -1
    topo = {"sources": [w(r) for r in ins], "destinations": [w(r) for r in outs]}
    if isinstance(comm, real["Cartcomm"]):
        dims, periods, coords = real["Cartcomm"].Get_topo(comm)
        topo.update(dims=list(dims), periods=[bool(p) for p in periods], coords=list(coords))
    return topo


def _wrap_comm(c, parent, how, parent_key=None):
    """Wrap a communicator returned by a creation call and register it.

    ``parent_key`` overrides the parent's key where members of the new comm
    call from different parents (intercomm creation, creation from groups).
    """
    if c is None or c == MPI.COMM_NULL:
        return c
    cls = _TRACED_BY_REAL.get(type(c))
    if cls is None:                      # already a traced (or user) subclass
        cls = type(c)
    if type(c) is not cls:
        c = cls(c)
    pkey = parent_key or (parent._tkey if parent is not None else "group")
    pidx = parent._tidx if parent is not None else -1
    return _register(c, pkey, how, pidx)


def _peer(comm, r):
    return comm._p[r] if r >= 0 else -1


def _root(comm, root):
    """World rank of a collective's root; intercomm roots are remote ranks."""
    if root == ROOT:
        return comm._me
    if root < 0:
        return -1
    return comm._p[root]


_next_req = new_req                         # request ids of this rank (C counter)
_side = None                                # R.side.append, set by install()


def _wrap_req(req, rx=None, pinfo=None):
    """The traced request for a request an MPI call returned (same handle)."""
    t = type(req)
    r = TracedRequest(req) if t is _R else TracedPrequest(req) if t is _P else req
    # a persistent request is inactive (-1) until started
    r._tid = _next_req() if pinfo is None else -1
    r._rx = rx
    r._pinfo = pinfo
    return r


# --------------------------------------------------------------------------
# Point-to-point
# --------------------------------------------------------------------------

def _send(name):
    op = code(name.lower())
    base = getattr(REAL["Comm"], name)
    if name.islower():
        def f(self, obj, dest, tag=0):
            s = enter()
            PK.dumped = 0
            base(self, obj, dest, tag)
            leave(s, op, self._tidx, self._p[dest] if dest >= 0 else -1, tag, PK.dumped, 0, -1)
    else:
        def f(self, buf, dest, tag=0):
            s = enter()
            base(self, buf, dest, tag)
            leave(s, op, self._tidx, self._p[dest] if dest >= 0 else -1, tag, nbytes(buf), 0, -1)
    f.__name__ = name
    return f


def _isend(name):
    op = code(name.lower())
    base = getattr(REAL["Comm"], name)
    lower = name.islower()

    # the hottest path of stencil codes: the request is wrapped inline and
    # numbered by leave() (req -2), which saves two Python calls
    if lower:
        def f(self, buf, dest, tag=0):
            s = enter()
            PK.dumped = 0
            r = TracedRequest(base(self, buf, dest, tag))
            r._rx = r._pinfo = None
            r._tid = leave(s, op, self._tidx, self._p[dest] if dest >= 0 else -1, tag,
                           PK.dumped, 0, -2)
            return r
    else:
        def f(self, buf, dest, tag=0):
            s = enter()
            r = TracedRequest(base(self, buf, dest, tag))
            r._rx = r._pinfo = None
            r._tid = leave(s, op, self._tidx, self._p[dest] if dest >= 0 else -1, tag,
                           nbytes(buf), 0, -2)
            return r
    f.__name__ = name
    return f


def _matched(comm, st, source, tag):
    """(world source, tag, bytes, flags) of a completed receive or probe."""
    s = st.Get_source()
    flags = (FLAG_ANY_SOURCE if source == ANY_SOURCE else 0) | \
            (FLAG_ANY_TAG if tag == ANY_TAG else 0)
    return (comm._p[s] if s >= 0 else -1), st.Get_tag(), st.Get_count(), flags


def _recv(name):
    op = code(name.lower())
    base = getattr(REAL["Comm"], name)

    def f(self, buf=None, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        s = enter()
        st = _STATUS if status is None else status
        res = base(self, buf, source, tag, st)
        if source >= 0 and tag >= 0:            # nothing to learn but the size
            leave(s, op, self._tidx, self._p[source], tag, 0, st.count, -1)
        else:
            p, tg, n, fl = _matched(self, st, source, tag)
            leave_ex(s, op, self._tidx, p, tg, 0, n, -1, -1, -1, -1, fl, None, 1)
        return res
    f.__name__ = name
    return f


def _irecv(name):
    op = code(name.lower())
    base = getattr(REAL["Comm"], name)

    def f(self, buf=None, source=ANY_SOURCE, tag=ANY_TAG):
        s = enter()
        r = TracedRequest(base(self, buf, source, tag))
        r._pinfo = None
        # Posted size.  For a wildcard receive the completion fix-up replaces
        # peer, tag and bytes by what actually matched (the request keeps the
        # communicator's peer table for that); a receive from a known source
        # and tag skips that status work: the message size is the sender's.
        # (Lower-case irecv has no buffer: its size too comes at completion.)
        if buf is not None and source >= 0 and tag >= 0:
            r._rx = None
            r._tid = leave(s, op, self._tidx, self._p[source], tag, 0, nbytes(buf), -2)
        elif buf is not None and source == PROC_NULL:
            r._rx = None
            r._tid = leave(s, op, self._tidx, -1, tag, 0, nbytes(buf), -2)
        else:
            n = nbytes(buf) if buf is not None else 0
            r._rx = self._p
            r._tid = _next_req()
            fl = (FLAG_ANY_SOURCE if source == ANY_SOURCE else 0) | \
                 (FLAG_ANY_TAG if tag == ANY_TAG else 0)
            leave_ex(s, op, self._tidx, _peer(self, source), tag, 0, n, r._tid,
                     -1, -1, -1, fl, None, 1)
        return r
    f.__name__ = name
    return f


def _sendrecv(name):
    op = code(name.lower())
    base = getattr(REAL["Comm"], name)
    lower = name.islower()

    def f(self, sendbuf, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE,
          recvtag=ANY_TAG, status=None):
        s = enter()
        st = _STATUS if status is None else status
        PK.dumped = 0
        res = base(self, sendbuf, dest, sendtag, recvbuf, source, recvtag, st)
        p, tg, n, fl = _matched(self, st, source, recvtag)
        sb = PK.dumped if lower else nbytes(sendbuf)
        leave_ex(s, op, self._tidx, _peer(self, dest), sendtag, sb, n, -1, p, tg, -1, fl, None, 1)
        return res
    f.__name__ = name
    return f


def _sendrecv_replace(self, buf, dest, sendtag=0, source=ANY_SOURCE, recvtag=ANY_TAG,
                      status=None):
    s = enter()
    st = _STATUS if status is None else status
    REAL["Comm"].Sendrecv_replace(self, buf, dest, sendtag, source, recvtag, st)
    p, tg, n, fl = _matched(self, st, source, recvtag)
    leave_ex(s, _OP_SRR, self._tidx, _peer(self, dest), sendtag, nbytes(buf), n, -1, p, tg, -1,
             fl, None, 1)


def _isendrecv(name):
    op = code(name.lower())
    base = getattr(REAL["Comm"], name)
    replace = name.endswith("replace")

    if replace:
        def f(self, buf, dest, sendtag=0, source=ANY_SOURCE, recvtag=ANY_TAG):
            s = enter()
            r = _wrap_req(base(self, buf, dest, sendtag, source, recvtag))
            leave_ex(s, op, self._tidx, _peer(self, dest), sendtag, nbytes(buf), nbytes(buf),
                     r._tid, _peer(self, source), recvtag, -1, 0, None, 1)
            return r
    else:
        def f(self, sendbuf, dest, sendtag=0, recvbuf=None, source=ANY_SOURCE,
              recvtag=ANY_TAG):
            s = enter()
            # no completion fix-up: MPICH 5.0 fills an Isendrecv status with
            # garbage tags; the posted source/tag/size are recorded instead
            r = _wrap_req(base(self, sendbuf, dest, sendtag, recvbuf, source, recvtag))
            leave_ex(s, op, self._tidx, _peer(self, dest), sendtag, nbytes(sendbuf),
                     nbytes(recvbuf), r._tid, _peer(self, source), recvtag, -1, 0, None, 1)
            return r
    f.__name__ = name
    return f


def _probe(name):
    """Probe/Iprobe/Mprobe/Improbe and lower-case: record what matched."""
    op = code(name.lower())
    base = getattr(REAL["Comm"], name)
    returns_message = "mprobe" in name.lower()
    nonblocking = name.lower().startswith("i")

    def f(self, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        s = enter()
        st = _STATUS if status is None else status
        res = base(self, source, tag, st)
        found = (res is not None) if returns_message else bool(res)
        if found or not nonblocking:
            p, tg, n, fl = _matched(self, st, source, tag)
            if returns_message:
                res = TracedMessage(res)
                res._rx = (self._tidx, p, tg, n, fl)
        else:
            p, tg, n = _peer(self, source), tag, 0
            fl = FLAG_NONE                   # nothing matched
        leave_ex(s, op, self._tidx, p, tg, 0, n, -1, -1, -1, -1, fl, None, 1)
        return res
    f.__name__ = name
    return f




def _p2p_init(name):
    """Send_init/Recv_init family: a persistent request remembering its op."""
    lname = name.lower()
    op = code(lname)
    base = getattr(REAL["Comm"], name)
    recv = lname in ("recv_init", "precv_init")
    kind = code(ops.STARTS[lname])

    def f(self, buf, *args, **kw):
        s = enter()
        req = base(self, buf, *args, **kw)
        names = ["partitions"] if name.startswith("P") else []
        a = dict(zip(names + (["source", "tag"] if recv else ["dest", "tag"]), args), **kw)
        who = a.get("source", ANY_SOURCE) if recv else a.get("dest")
        tag = a.get("tag", ANY_TAG if recv else 0)
        n = nbytes(buf)
        peer = _peer(self, who)
        pinfo = (kind, self._tidx, peer, tag, 0 if recv else n, n if recv else 0, -1, -1, None)
        wild = recv and (who == ANY_SOURCE or tag == ANY_TAG)
        r = _wrap_req(req, rx=self._p if wild else None, pinfo=pinfo)
        leave(s, op, self._tidx, peer, tag, pinfo[4], pinfo[5], -1)
        return r
    f.__name__ = name
    return f


# --------------------------------------------------------------------------
# Collectives
# --------------------------------------------------------------------------
# Each collective has one of a few signatures ("shapes"); the wrapper of a
# shape has that exact signature, because generic *args/**kwargs handling
# alone would cost the tracer's whole per-call budget.
_SHAPE = ops.SHAPE                            # "Bcast" -> "bcast" (mpimodel/ops.py)
_PLAIN = {k.lower(): k for k in _SHAPE}       # "bcast" -> "Bcast" (for Ibcast)
_GATHERS = ("gather", "allgather", "gatherv", "allgatherv")
_SUM = MPI.SUM


def _coll_done(s, self, sbuf, rbuf, root, res, spec):
    """Record a buffer collective (shared tail of every shape's wrapper)."""
    op, kind, stem, variable, mode = spec
    peer = _root(self, root) if root is not None else -1
    if stem == "bcast":
        n = nbytes(sbuf)
        sb, rb = (n, 0) if peer == self._me else (0, n)
    else:
        p = len(self._w)
        rb = blocked_nbytes(rbuf, p) if stem in BLOCKED_RECV else nbytes(rbuf)
        if sbuf is IN_PLACE:
            sb = rb // p if stem in _GATHERS else rb
            if stem in ("scatter", "scatterv"):
                sb, rb = rb, 0
        else:
            sb = blocked_nbytes(sbuf, p) if stem in BLOCKED_SEND else nbytes(sbuf)
    extra, fl = None, FLAG_INPLACE if sbuf is IN_PLACE else 0
    if variable:
        extra = ("c", per_peer(sbuf), per_peer(rbuf))
        fl |= FLAG_NONCONTIG if noncontiguous(sbuf) or noncontiguous(rbuf) else 0
    req = -1
    if mode == "persistent":
        res = _wrap_req(res, pinfo=(kind, self._tidx, peer, -1, sb, rb, -1, -1, extra))
    elif mode == "nonblocking":
        res = _wrap_req(res)
        req = res._tid
    leave_ex(s, op, self._tidx, peer, -1, sb, rb, req, -1, -1, -1, fl, extra, 2)
    return res


_PARAMS = {"none": [], "bcast": ["buf", "root"], "rooted": ["sendbuf", "recvbuf", "root"],
           "reduce": ["sendbuf", "recvbuf", "op", "root"], "pair": ["sendbuf", "recvbuf"],
           "op": ["sendbuf", "recvbuf", "op"],
           "counts": ["sendbuf", "recvbuf", "recvcounts", "op"]}


# One wrapper per shape, with that shape's exact signature (generic
# argument binding would cost the tracer's whole per-call budget).

def _coll_persistent(base, spec, shape):
    params = _PARAMS[shape]             # rare: generic argument binding is fine

    def f(self, *args, **kw):
        s = enter()
        res = base(self, *args, **kw)
        a = dict(zip(params, args), **kw)
        sbuf = a.get("buf", a.get("sendbuf"))
        rbuf = a.get("buf", a.get("recvbuf"))
        root = a.get("root", 0) if "root" in params else None
        return _coll_done(s, self, sbuf, rbuf, root, res, spec)
    return f


def _coll_none(base, spec):
    def f(self):
        s = enter()
        return _coll_done(s, self, None, None, None, base(self), spec)
    return f


def _coll_bcast(base, spec):
    def f(self, buf, root=0):
        s = enter()
        return _coll_done(s, self, buf, buf, root, base(self, buf, root), spec)
    return f


def _coll_rooted(base, spec):
    def f(self, sendbuf, recvbuf, root=0):
        s = enter()
        res = base(self, sendbuf, recvbuf, root)
        return _coll_done(s, self, sendbuf, recvbuf, root, res, spec)
    return f


def _coll_reduce(base, spec):
    def f(self, sendbuf, recvbuf, op=_SUM, root=0):
        s = enter()
        res = base(self, sendbuf, recvbuf, op, root)
        return _coll_done(s, self, sendbuf, recvbuf, root, res, spec)
    return f


def _coll_pair(base, spec):
    def f(self, sendbuf, recvbuf):
        s = enter()
        res = base(self, sendbuf, recvbuf)
        return _coll_done(s, self, sendbuf, recvbuf, None, res, spec)
    return f


def _coll_op(base, spec):
    def f(self, sendbuf, recvbuf, op=_SUM):
        s = enter()
        res = base(self, sendbuf, recvbuf, op)
        return _coll_done(s, self, sendbuf, recvbuf, None, res, spec)
    return f


def _coll_counts(base, spec):
    def f(self, sendbuf, recvbuf, recvcounts=None, op=_SUM):
        s = enter()
        res = base(self, sendbuf, recvbuf, recvcounts, op)
        return _coll_done(s, self, sendbuf, recvbuf, None, res, spec)
    return f


_COLL_WRAPPER = {"none": _coll_none, "bcast": _coll_bcast, "rooted": _coll_rooted,
                 "reduce": _coll_reduce, "pair": _coll_pair, "op": _coll_op,
                 "counts": _coll_counts}


def _coll(cls_name, name):
    """Wrap a buffer collective: blocking, nonblocking (I*) or persistent (*_init)."""
    base = getattr(REAL[cls_name], name)
    plain = _PLAIN.get(name[1:], name) if name.startswith("I") else name
    mode = "nonblocking" if plain != name else "blocking"
    if plain.endswith("_init"):
        plain, mode = plain[:-5], "persistent"
    stem = plain.lower()
    spec = (code(name.lower()), code("i" + stem), stem, stem.endswith(("v", "w")), mode)
    shape = _SHAPE[plain]
    f = _coll_persistent(base, spec, shape) if mode == "persistent" \
        else _COLL_WRAPPER[shape](base, spec)
    f.__name__ = name
    return f


_REDUCING: set = set()  # op codes of ops.REDUCING_OBJECTS (filled in _build_classes)


def _obj_done(s, self, root, res, op):
    peer = _root(self, root) if root is not None else -1
    if op in _REDUCING:
        # mpi4py reduces pickled objects along a tree, pickling partial results
        # at every hop: the totals depend on the rank's place in that tree.
        # Record what the operation means: this rank's own contribution.
        sb = rb = PK.first if PK.first >= 0 else PK.dumped
    else:
        sb, rb = PK.dumped, PK.loaded
    leave_ex(s, op, self._tidx, peer, -1, sb, rb, -1, -1, -1, -1, FLAG_OBJECT, None, 2)
    return res


def _obj_coll(cls_name, name):
    """Wrap a lower-case (pickle) collective; bytes are the pickled sizes."""
    base = getattr(REAL[cls_name], name)
    opc = code(name)
    if name == "barrier":
        def f(self):
            s = enter()
            PK.dumped = PK.loaded = 0
            PK.first = -1
            return _obj_done(s, self, None, base(self), opc)
    elif name == "bcast":
        def f(self, obj, root=0):
            s = enter()
            PK.dumped = PK.loaded = 0
            PK.first = -1
            return _obj_done(s, self, root, base(self, obj, root), opc)
    elif name in ("gather", "scatter"):
        def f(self, sendobj, root=0):
            s = enter()
            PK.dumped = PK.loaded = 0
            PK.first = -1
            return _obj_done(s, self, root, base(self, sendobj, root), opc)
    elif name == "reduce":
        def f(self, sendobj, op=_SUM, root=0):
            s = enter()
            PK.dumped = PK.loaded = 0
            PK.first = -1
            return _obj_done(s, self, root, base(self, sendobj, op, root), opc)
    elif name in ("allreduce", "scan", "exscan"):
        def f(self, sendobj, op=_SUM):
            s = enter()
            PK.dumped = PK.loaded = 0
            PK.first = -1
            return _obj_done(s, self, None, base(self, sendobj, op), opc)
    else:  # allgather, alltoall, neighbor_*
        def f(self, sendobj):
            s = enter()
            PK.dumped = PK.loaded = 0
            PK.first = -1
            return _obj_done(s, self, None, base(self, sendobj), opc)
    f.__name__ = name
    return f


# --------------------------------------------------------------------------
# Communicator creation
# --------------------------------------------------------------------------
def _creation(name):
    row = ops.COMM_METHODS[name]
    opname = row.op
    base = getattr(REAL[row.level], name)
    op = code(opname)

    def f(self, *args, **kw):
        s = enter()
        pkey = None
        if name == "Create_intercomm":
            # the two groups call from different local comms: key on the peer
            # comm and tag, which both sides share
            a = dict(zip(["local_leader", "peer_comm", "remote_leader", "tag"], args), **kw)
            pkey = f"{getattr(a['peer_comm'], '_tkey', '?')}/ic{a.get('tag', 0)}"
        new = _wrap_comm(base(self, *args, **kw), self, opname, pkey)
        leave_ex(s, op, self._tidx, -1, -1, 0, 0, -1, -1, -1, getattr(new, "_tidx", -1), 0, None, 1)
        return new
    f.__name__ = name
    return f


def _idup(name):
    base = getattr(REAL["Comm"], name)
    op = code("comm_idup")

    def f(self, *args, **kw):
        s = enter()
        new, req = base(self, *args, **kw)
        new = _wrap_comm(new, self, "comm_dup")
        req = _wrap_req(req)
        leave_ex(s, op, self._tidx, -1, -1, 0, 0, req._tid, -1, -1, new._tidx, 0, None, 1)
        return new, req
    f.__name__ = name
    return f


def _from_group(cls_name, name, opname):
    base = getattr(REAL[cls_name], name)
    op = code(opname)

    def f(cls, *args, **kw):
        s = enter()
        tag_at = 1 if name == "Create_from_group" else 4
        tag = args[tag_at] if len(args) > tag_at else kw.get("stringtag", "org.mpi4py")
        new = _wrap_comm(base(*args, **kw), None, opname, "group:" + str(tag))
        leave_ex(s, op, -1, -1, -1, 0, 0, -1, -1, -1, getattr(new, "_tidx", -1), 0, None, 1)
        return new
    f.__name__ = name
    return classmethod(f)


def _free(name, opname):
    base = getattr(REAL["Comm"], name)
    op = code(opname)

    def f(self):
        s = enter()
        idx = self._tidx
        if R.below is not None:
            R.below.comm_forget(self.handle)
        base(self)
        leave(s, op, idx, -1, -1, 0, 0, -1)
    f.__name__ = name
    return f


# --------------------------------------------------------------------------
# Requests and messages
# --------------------------------------------------------------------------

def _completed(r, st):
    """Note a completed request; receives get their matched source/tag/size."""
    tid = getattr(r, "_tid", -1)       # untraced requests (e.g. from pkl5) have none
    if tid >= 0:
        r._tid = -1
        rx = r._rx
        if rx is not None and st is not None:
            src = st.source
            _side(("f", tid, rx[src] if src >= 0 else -1, st.tag, st.count))
    return tid


def _status_for(status, rx):
    """The status to pass down: the caller's, or ours for receive requests."""
    return _STATUS if status is None and rx is not None else status


_POOL: list = []     # reusable statuses for multi-request completions


class RequestMethods:
    """Traced completion calls (the mixin of TracedRequest/TracedPrequest).

    Instances carry three slots (a dict per request would cost more than
    the rest of the tracing): ``_tid`` id of the pending operation (-1 when
    none), ``_rx`` peer table of the communicator for receive requests,
    ``_pinfo`` what a persistent request does when started.  Requests not
    made by the tracer may lack them, hence ``getattr`` with defaults.
    """
    __slots__ = ()

    def Wait(self, status=None):
        s = enter()
        st = _status_for(status, getattr(self, "_rx", None))
        _R.Wait(self, st)
        leave(s, _OP["wait"], -1, -1, -1, 0, 0, _completed(self, st))
        return True

    def wait(self, status=None):
        s = enter()
        st = _status_for(status, getattr(self, "_rx", None))
        res = _R.wait(self, st)
        leave(s, _OP["wait"], -1, -1, -1, 0, 0, _completed(self, st))
        return res

    def Test(self, status=None):
        s = enter()
        st = _status_for(status, getattr(self, "_rx", None))
        flag = _R.Test(self, st)
        tid = _completed(self, st) if flag else -1
        leave_ex(s, _OP["test"], -1, -1, -1, 0, 0, tid, -1, -1, -1, 0 if flag else FLAG_NONE,
                 None, 1)
        return flag

    def test(self, status=None):
        s = enter()
        st = _status_for(status, getattr(self, "_rx", None))
        flag, obj = _R.test(self, st)
        tid = _completed(self, st) if flag else -1
        leave_ex(s, _OP["test"], -1, -1, -1, 0, 0, tid, -1, -1, -1, 0 if flag else FLAG_NONE,
                 None, 1)
        return flag, obj

    def Cancel(self):
        s = enter()
        _R.Cancel(self)
        leave(s, _OP["cancel"], -1, -1, -1, 0, 0, getattr(self, "_tid", -1))

    cancel = Cancel

    def Free(self):
        s = enter()
        tid = getattr(self, "_tid", -1)
        _R.Free(self)
        leave(s, _OP["request_free"], -1, -1, -1, 0, 0, tid)



def _multi(opname, base, result):
    """Waitall/Testall/Waitsome/Testsome, either case: record completed ids.

    ``result`` says how the call reports completion: "all" (everything),
    "flag"/"flag0" (all or nothing, the flag alone or first of a tuple),
    "indices"/"indices0" (the completed indices, alone or first)."""
    op = code(opname)
    name, poll = base.__name__, opname in POLLS

    def f(cls, requests, statuses=None):
        s = enter()
        requests = list(requests)
        # one pass over the pending requests (those with an id); requests
        # that the tracer did not make have no _tid at all
        try:
            live = [i for i, r in enumerate(requests) if r._tid >= 0]
        except AttributeError:
            live = [i for i, r in enumerate(requests) if getattr(r, "_tid", -1) >= 0]
        sts = statuses
        if sts is None:
            for i in live:
                if requests[i]._rx is not None:      # a receive to fix up
                    while len(_POOL) < len(requests):
                        _POOL.append(MPI.Status())
                    sts = _POOL[:len(requests)]
                    break
        res = base(requests, sts)
        if result == "all":
            done = live
        elif result == "flag" or result == "flag0":
            done = live if (res if result == "flag" else res[0]) else ()
        else:
            idx = (res if result == "indices" else res[0]) or ()
            done = [i for i in idx if getattr(requests[i], "_tid", -1) >= 0]
        # a poll that found nothing is folded (_hotpath.c), exactly where the
        # recorder logs nothing and replay answers empty
        nothing = poll and found_nothing(name, res)
        tids = []
        for i in done:
            r = requests[i]
            tids.append(r._tid)
            r._tid = -1
            rx = r._rx
            if rx is not None and sts is not None:
                st = sts[i]
                src = st.source
                _side(("f", tids[-1], rx[src] if src >= 0 else -1, st.tag, st.count))
        leave_ex(s, op, -1, -1, -1, 0, 0, -1, -1, -1, -1, FLAG_NONE if nothing else 0,
                 ("r", tids) if tids else None, 1)
        return res
    f.__name__ = opname
    return classmethod(f)


def _any(opname, base, result):
    """Waitany/Testany, either case: record the one completed id.

    ``result`` is "index" when the call returns the index alone, else the
    index comes first in a tuple (and for testany the flag second)."""
    op = code(opname)

    def f(cls, requests, status=None):
        return _one_of(op, opname, base, requests, status, result)
    f.__name__ = opname
    return classmethod(f)


def _completion(method: str):
    """The traced Waitall/any/some or Testall/any/some (``method``, either
    case), told where mpi4py's answer says what completed: an upper-case
    method returns it alone (Waitsome/Testsome the indices, Waitany the
    index, Testall the flag), except Testany, which returns (index, flag);
    a lower-case one in a tuple whose first item it is.  Waitall completes
    everything."""
    row = next(o for o in ops.TABLE if o.method == method and o.level == "Request")
    alone = "" if method[0].isupper() and method != "Testany" else "0"
    base = getattr(_R, method)
    if row.completes == "any":
        return _any(row.op, base, "index" + alone)
    if row.completes == "some":
        return _multi(row.op, base, "indices" + alone)
    return _multi(row.op, base, "all" if row.op == "waitall" else "flag" + alone)


def _one_of(op, opname, base, requests, status, result):
    s = enter()
    requests = list(requests)
    st = _status_for(status, True if any(getattr(r, "_rx", None) is not None
                                         for r in requests) else None)
    res = base(requests, st)
    idx = res if result == "index" else res[0]
    if opname == "testany":
        flag = res[1]
    else:
        flag = True
    tid = -1
    if flag and idx is not None and idx >= 0:
        tid = _completed(requests[idx], st)
    leave_ex(s, op, -1, -1, -1, 0, 0, tid, -1, -1, -1, 0 if flag else FLAG_NONE, None, 2)
    return res


def _start(self):
    s = enter()
    _P.Start(self)
    _record_start(self, s, 2)


def _record_start(r, s, depth):
    kind, comm, peer, tag, sb, rb, _, _, extra = r._pinfo
    r._tid = _next_req()
    leave_ex(s, _OP["start"], comm, peer, tag, sb, rb, r._tid, -1, -1, -1, 0, ("p", kind, extra),
             depth)


def _startall(cls, requests):
    s = enter()
    requests = list(requests)
    _P.Startall(requests)
    # one start event per request, all timed by the single Startall call
    for r in requests:
        if getattr(r, "_pinfo", None) is not None:
            _record_start(r, s, 2)
            s = enter()


class MessageMethods:
    """Traced receives of a matched message (from Mprobe/Improbe)."""
    _rx = None

    def Recv(self, buf, status=None):
        s = enter()
        comm, p, tg, n, fl = self._rx
        _M.Recv(self, buf, status)
        leave_ex(s, _OP["mrecv"], comm, p, tg, 0, n, -1, -1, -1, -1, fl, None, 1)

    def recv(self, status=None):
        s = enter()
        comm, p, tg, n, fl = self._rx
        res = _M.recv(self, status)
        leave_ex(s, _OP["mrecv"], comm, p, tg, 0, n, -1, -1, -1, -1, fl, None, 1)
        return res

    def Irecv(self, buf):
        s = enter()
        comm, p, tg, n, fl = self._rx
        r = _wrap_req(_M.Irecv(self, buf))
        leave_ex(s, _OP["imrecv"], comm, p, tg, 0, n, r._tid, -1, -1, -1, fl, None, 1)
        return r

    def irecv(self):
        s = enter()
        comm, p, tg, n, fl = self._rx
        r = _wrap_req(_M.irecv(self))
        leave_ex(s, _OP["imrecv"], comm, p, tg, 0, n, r._tid, -1, -1, -1, fl, None, 1)
        return r

    @classmethod
    def Probe(cls, comm, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        return comm.Mprobe(source, tag, status)

    @classmethod
    def Iprobe(cls, comm, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        return comm.Improbe(source, tag, status)

    @classmethod
    def probe(cls, comm, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        return comm.mprobe(source, tag, status)

    @classmethod
    def iprobe(cls, comm, source=ANY_SOURCE, tag=ANY_TAG, status=None):
        return comm.improbe(source, tag, status)


# --------------------------------------------------------------------------
# One-sided windows (modelled) and files (counted, reported as unmodelled)
# --------------------------------------------------------------------------
_QUIET = ("Get_", "Set_", "tomemory", "toint", "py2f", "f2py", "fromhandle", "free",
          "fromint", "Create_keyval", "Free_keyval", "Delete_attr", "Call_errhandler")


def _counted(cls_name, prefix):
    """A subclass of File whose calls (all but queries) are recorded as
    unmodelled events."""
    real = REAL[cls_name]
    ns = {}
    holder = {}

    def counter(name, attr):
        op = code(prefix + name.lower())
        is_class = isinstance(inspect.getattr_static(real, name), classmethod)

        def f(*args, **kw):
            s = enter()
            if is_class:
                res = getattr(real, name)(*args[1:], **kw)
            else:
                res = attr(*args, **kw)
            if type(res) is real:
                res = holder["cls"](res)
            R.unmodelled[prefix + name.lower()] = R.unmodelled.get(prefix + name.lower(), 0) + 1
            leave(s, op, -1, -1, -1, 0, 0, -1)
            return res
        f.__name__ = name
        return classmethod(f) if is_class else f

    for name in dir(real):
        if name.startswith("_") or name.startswith(_QUIET):
            continue
        attr = inspect.getattr_static(real, name)
        if callable(attr) or isinstance(attr, classmethod):
            ns[name] = counter(name, getattr(real, name))
    cls = Meta("Traced" + cls_name, (real,), dict(ns, _real=real))
    holder["cls"] = cls
    return cls


def _args_of(method, names):
    """A function ``(args, kw) -> values`` of the parameters ``names`` of
    ``method`` (None for a name that is None or not a parameter), as passed
    or defaulted: what ``inspect.Signature.bind`` finds, at a fraction of
    its cost.  It runs after the real call, inside the event: the window
    wrappers once bound first, and those microseconds landed in the
    application's computation span.  A bad call is mpi4py's own error."""
    params = list(inspect.signature(method).parameters.values())
    where = []
    for name in names:
        i = next((k for k, p in enumerate(params) if p.name == name), None)
        default = None if i is None or params[i].default is params[i].empty else params[i].default
        where.append((name, i, default))

    def values(args, kw):
        return [kw[n] if n in kw else args[i] if i is not None and i < len(args) else d
                for n, i, d in where]
    return values


def _traced_win():
    """The traced Win: each call of mpimodel/ops.py's WIN_METHODS is an
    event with the window's communicator as ``comm``, the window's number
    (per rank, in creation order: windows are created collectively) as
    ``tag``, the target as a world rank (transfers, Lock, Unlock, Flush*),
    the bytes sent (``sbytes``: the origin buffer) and received
    (``rbytes``: Get's origin, the result buffer of Get_accumulate,
    Fetch_and_op, Compare_and_swap), and for creation the window's local
    size in ``sbytes``.  The simulator models them (netsim/schedule.py)."""
    real = REAL["Win"]
    holder = {}
    count = [0]

    def target_of(self, rank):
        return self._p[rank] if rank is not None and rank >= 0 else -1

    def creation(name):
        base, op = getattr(real, name), code("win_" + name.lower())
        args_of = _args_of(base, ("comm", "memory" if name == "Create" else "size"))

        def f(cls, *args, **kw):
            s = enter()
            w = holder["cls"](base(*args, **kw))
            comm, memory_or_size = args_of(args, kw)
            w._tcomm = getattr(comm, "_tidx", -1)
            w._p = getattr(comm, "_p", None) or [MPI.COMM_WORLD.Get_rank()]
            w._wid = count[0]
            count[0] += 1
            size = nbytes(memory_or_size) if name == "Create" else int(memory_or_size or 0)
            leave(s, op, w._tcomm, -1, w._wid, size, 0, -1)
            return w
        f.__name__ = name
        return classmethod(f)

    def call(name):
        base, op = getattr(real, name), code("win_" + name.lower())
        plain = ops.WIN_REQUESTS.get(name, name)        # Rget moves what Get moves
        transfer = plain in ops.WIN_TRANSFERS
        out = ops.WIN_TRANSFERS.get(plain)
        args_of = _args_of(base, ("target_rank", "origin", out) if transfer else
                           (ops.WIN_SYNCS.get(name), "lock_type") if name == "Lock" else
                           (ops.WIN_SYNCS.get(name),))

        def f(self, *args, **kw):
            s = enter()
            res = base(self, *args, **kw)
            a = args_of((self,) + args, kw)
            peer = target_of(self, a[0])
            if transfer:
                sb = 0 if plain == "Get" else nbytes(a[1])
                rb = nbytes(a[2]) if out else 0
            else:
                sb = rb = 0
            if name in ops.WIN_REQUESTS:                # numbered like an isend's
                res = TracedRequest(res)
                res._rx = res._pinfo = None
                res._tid = leave(s, op, getattr(self, "_tcomm", -1), peer,
                                 getattr(self, "_wid", -1), sb, rb, -2)
                return res
            if name == "Lock":                          # exclusive unless said otherwise
                shared = a[1] is not None and a[1] == MPI.LOCK_SHARED
                leave_ex(s, op, getattr(self, "_tcomm", -1), peer, getattr(self, "_wid", -1),
                         0, 0, -1, -1, -1, -1, FLAG_LOCK_SHARED if shared else 0, None, 1)
                return res
            leave(s, op, getattr(self, "_tcomm", -1), peer, getattr(self, "_wid", -1), sb, rb,
                  -1)
            return res
        f.__name__ = name
        return f

    ns = {n: creation(n) for n in ops.WIN_CREATION}
    ns.update({n: call(n) for n in ops.WIN_METHODS if n not in ops.WIN_CREATION})
    cls = Meta("TracedWin", (real,), dict(ns, _real=real))
    holder["cls"] = cls
    return cls


# --------------------------------------------------------------------------
# Assembly
# --------------------------------------------------------------------------
_OP: dict = {}
_OP_SRR = None
_R = _P = _M = None
_TRACED_BY_REAL: dict = {}
TracedRequest = TracedPrequest = TracedMessage = None


_COMM_REGISTRATION = ("_tidx", "_tkey", "_w", "_p", "_me")


def _comm_init(self, comm=None):
    """``Cls(comm)`` shares ``comm``'s handle (mpi4py's copy constructor): the
    same communicator, so the same registration.  Libraries construct their
    own subclasses that way (``pkl5.Intracomm(MPI.COMM_WORLD)``)."""
    if comm is not None:
        for a in _COMM_REGISTRATION:
            v = getattr(comm, a, None)
            if v is not None:
                setattr(self, a, v)


# The tracer's wrapper of each kind of communicator method (mpimodel/ops.py)
_WRAPPER = {
    "send": _send, "isend": _isend, "recv": _recv, "irecv": _irecv,
    "sendrecv": _sendrecv, "isendrecv": _isendrecv, "probe": _probe, "mprobe": _probe,
    "pinit": _p2p_init, "partitioned": _p2p_init, "create": _creation, "dynamic": _creation,
    "idup": _idup,
}


def _methods_for(cls_name):
    """Traced methods a mixin for the mpi4py class ``cls_name`` defines."""
    ns = {"__init__": _comm_init} if cls_name == "Comm" else {}
    for row in ops.TABLE:
        if row.level != cls_name:
            continue
        name, kind = row.method, row.kind
        if name == "Sendrecv_replace":
            ns[name] = _sendrecv_replace
        elif kind in _WRAPPER:
            ns[name] = _WRAPPER[kind](name)
        elif kind in ("coll", "icoll", "pcoll"):
            ns[name] = _coll(cls_name, name)
        elif kind == "ocoll":
            ns[name] = _obj_coll(cls_name, name)
        elif kind == "create_from":
            ns[name] = _from_group(cls_name, name, row.op)
        elif kind == "free":
            ns[name] = _free(name, row.op)
    return ns


def _build_classes():
    global _R, _P, _M, _OP_SRR, TracedRequest, TracedPrequest, TracedMessage
    for name in ops.WRAPPED_LEVELS + ("Grequest", "Win", "File"):
        REAL[name] = getattr(MPI, name)
    _R, _P, _M = REAL["Request"], REAL["Prequest"], REAL["Message"]
    for name in ops.NAMES[:]:
        _OP[name] = code(name)
    _OP_SRR = code("sendrecv_replace")
    _REDUCING.update(code(n) for n in ops.REDUCING_OBJECTS)
    # Mixins mirror mpi4py's hierarchy so each traced class gets its own
    # and its ancestors' traced methods.
    mixins = mixin_hierarchy("", _methods_for)
    for name in ops.COMM_PARENTS:
        cls = Meta("Traced" + name, (mixins[name], REAL[name]), {"_real": REAL[name]})
        _TRACED_BY_REAL[REAL[name]] = cls
        globals()["Traced" + name] = cls
    slots = ("_tid", "_rx", "_pinfo")
    completions = {m: _completion(m) for m in ops.methods("Request", "waitmany")}
    for name, meth in completions.items():
        setattr(RequestMethods, name, meth)
    TracedRequest = Meta("TracedRequest", (RequestMethods, _R),
                          {"_real": _R, "__slots__": slots})
    TracedPrequest = Meta("TracedPrequest", (RequestMethods, _P),
                           {"_real": _P, "Start": _start, "Startall": classmethod(_startall),
                            "__slots__": slots})
    TracedMessage = Meta("TracedMessage", (MessageMethods, _M), {"_real": _M})
    _TRACED_BY_REAL[_R] = TracedRequest
    _TRACED_BY_REAL[_P] = TracedPrequest
    _TRACED_BY_REAL[_M] = TracedMessage
    _TRACED_BY_REAL[REAL["Win"]] = _traced_win()
    _TRACED_BY_REAL[REAL["File"]] = _counted("File", "file_")


def install(trace_dir: str) -> Recorder:
    """Start tracing this process: replace mpi4py's classes and world comms.

    Must run before the application imports anything that captures
    ``MPI.COMM_WORLD``.  Returns the recorder (``finish()`` closes it).
    """
    global R, _world_group, _side
    world = MPI.COMM_WORLD
    _build_classes()
    rank, size = world.Get_rank(), world.Get_size()
    world.Barrier()                      # a common time origin for all ranks
    from ._hotpath import now
    origin = now()
    R = Recorder(trace_dir, rank, size, origin)
    from pmpishim.control import below_python
    R.below = below_python(trace_dir, rank, origin)
    _side = R.side.append
    for name in ops.NAMES:
        R.note("o", ops.CODE[name], name)
    _world_group = world.Get_group()
    PK.install()
    tw = _TRACED_BY_REAL[REAL["Intracomm"]](world)
    _register(tw, "world", "world")
    ts = _TRACED_BY_REAL[REAL["Intracomm"]](MPI.COMM_SELF)
    _register(ts, f"self{rank}", "self")
    MPI.COMM_WORLD = tw
    MPI.COMM_SELF = ts
    for real, traced in _TRACED_BY_REAL.items():
        setattr(MPI, real.__name__, traced)
    # A C extension importing mpi4py's C API (import_mpi4py) checks each
    # class's size and warns that the traced ones are larger: they add
    # three slots after the handle, which the C API reads where it always is
    warnings.filterwarnings("ignore", message=r"mpi4py\.MPI\.\w+ size changed",
                            category=RuntimeWarning)
    MPI.REQUEST_NULL = _wrap_req(MPI.REQUEST_NULL)
    MPI.REQUEST_NULL._tid = -1
    MPI.MESSAGE_NULL = TracedMessage(MPI.MESSAGE_NULL)
    MPI.MESSAGE_NO_PROC = TracedMessage(MPI.MESSAGE_NO_PROC)
    s = enter()
    leave_ex(s, _OP["init"], 0, -1, -1, 0, 0, -1, -1, -1, -1, 0, None, 0)
    return R


def finish(status: str = "complete"):
    """Record finalize and close this rank's trace."""
    if R is None or R.closed:
        return
    s = enter()
    try:
        leave_ex(s, _OP["finalize"], 0, -1, -1, 0, 0, -1, -1, -1, -1, 0, None, 0)
    except WriteError as e:
        status = f"failed: {e}"
    R.close(status)
