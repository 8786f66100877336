"""What the recorder and the replayer share about mpi4py calls.

Buffer views of what a call writes (``output_view``), the peer and tag the
application passed (``peer_tag``, for the divergence check), statuses as
tuples, communicator descriptions (what replay needs to impersonate one),
and the metaclass and mixin hierarchy of the classes that stand in for
mpi4py's.  What each method *is* lives in mpimodel/ops.py.
"""
from __future__ import annotations

from mpi4py import MPI

from .bufsize import BLOCKED_RECV
from .ops import COMM_PARENTS


class Meta(type):
    """``isinstance``/``issubclass`` against a traced class ask the real one.

    Only for the traced classes themselves: an application's subclass of
    them (``mpi4py.util.pkl5.Comm`` subclasses whatever ``MPI.Comm`` is at
    import) answers for its own instances only, as it would untraced."""

    def __new__(mcls, name, bases, ns):
        if "_real" in ns:
            # they claim mpi4py's module, as their real classes do: code that
            # tells mpi4py's objects by it (petsc4py's Comm conversion checks
            # ``type(comm).__module__ == "mpi4py.MPI"``) takes ours as theirs
            ns = dict(ns, __module__=ns["_real"].__module__)
        return super().__new__(mcls, name, bases, ns)

    def __instancecheck__(cls, obj):
        if "_real" in cls.__dict__:
            return isinstance(obj, cls._real)
        return type.__instancecheck__(cls, obj)

    def __subclasscheck__(cls, sub):
        if "_real" in cls.__dict__:
            return type.__subclasscheck__(cls, sub) or issubclass(sub, cls._real)
        return type.__subclasscheck__(cls, sub)


ANY_SOURCE, ANY_TAG, PROC_NULL = MPI.ANY_SOURCE, MPI.ANY_TAG, MPI.PROC_NULL
_SPECIAL = (None, MPI.IN_PLACE, MPI.BOTTOM)


def bytes_view(spec, blocks: int = 1):
    """A writable byte view of the memory a buffer spec describes (or None).

    ``[data, count, datatype]`` and ``[data, (count, displ), datatype]``
    with a predefined datatype describe only part of ``data``: the OSU demos
    receive a few bytes into a 4 MiB buffer, and logging the whole buffer
    every time wrote 72 GB.  Other specs describe the whole buffer.
    ``blocks``: the count is that of one block of so many (see output_view)."""
    data = spec[0] if isinstance(spec, (list, tuple)) else spec
    if data is None or data is MPI.IN_PLACE or data is MPI.BOTTOM:
        return None
    m = memoryview(data)
    if not m.c_contiguous and m.f_contiguous:
        # a Fortran-ordered array (pylops-mpi passes them): MPI reads and
        # writes its memory in memory order, which its transpose's C order is
        import numpy as np
        m = memoryview(np.asarray(m).T)  # type: ignore[arg-type]  # ndarray is a buffer
    if m.nbytes == 0:
        # an empty array (Devito gathers into (0, n) arrays on ranks that
        # hold no points): nothing to write, and a view of zeros in its
        # shape cannot be cast
        return memoryview(bytearray())
    m = m.cast("B")
    if isinstance(spec, (list, tuple)) and len(spec) == 3:
        count, dt = spec[1], spec[2]
        displ = 0
        if isinstance(count, tuple) and len(count) == 2:
            count, displ = count
        if isinstance(dt, str):
            dt = MPI._typedict[dt]
        if isinstance(count, int) and isinstance(displ, int) and \
                isinstance(dt, MPI.Datatype) and dt.is_predefined:
            ext = dt.Get_extent()[1]
            return m[displ * ext:displ * ext + count * blocks * dt.Get_size()]
    return m


def output_view(name: str, a: dict):
    """A writable byte view of what the call ``name`` (bound arguments
    ``a``) writes, or None: output_of, one block per process where the
    receive buffer holds one (bufsize.BLOCKED_RECV)."""
    spec = output_of(name, a)
    stem = name.lower().removesuffix("_init")
    if stem.startswith("i") and stem[1:] in BLOCKED_RECV:
        stem = stem[1:]
    blocks = 1
    if stem in BLOCKED_RECV and spec is a.get("recvbuf"):
        c = a["self"]
        blocks = c.Get_remote_size() if c.Is_inter() else c.Get_size()
    return bytes_view(spec, blocks)


def output_of(name: str, a: dict):
    """The buffer spec a buffer call writes (bound arguments ``a``), or None."""
    if "recvbuf" in a:
        rb = a["recvbuf"]
        if rb is MPI.IN_PLACE:
            return a.get("sendbuf")
        return rb
    if name in ("Bcast", "Ibcast", "Bcast_init", "Recv", "Irecv", "Recv_init",
                "Sendrecv_replace", "Isendrecv_replace"):
        return a.get("buf")
    if name in ("Scatter", "Scatterv", "Iscatter", "Iscatterv") and "recvbuf" in a:
        return a["recvbuf"]
    return None


def peer_tag(kind: str, a: dict):
    """(peer, tag) the application passed, for the divergence check."""
    if kind in ("send", "isend"):
        return a.get("dest", -1), a.get("tag", 0)
    if kind in ("recv", "irecv", "probe", "mprobe"):
        return a.get("source", ANY_SOURCE), a.get("tag", ANY_TAG)
    if kind in ("sendrecv", "isendrecv"):
        return a.get("dest", -1), a.get("sendtag", 0)
    if kind == "pinit":
        return a.get("dest", a.get("source", ANY_SOURCE)), a.get("tag", 0)
    if kind in ("coll", "icoll", "pcoll", "ocoll"):
        return a.get("root", -1), -1
    return -1, -1


def status_tuple(st) -> tuple:
    return (st.Get_source(), st.Get_tag(), st.Get_count(MPI.BYTE), bool(st.Is_cancelled()))


def fill_status(st, t) -> None:
    if st is None or t is None:
        return
    st.Set_source(t[0])
    st.Set_tag(t[1])
    st.Set_elements(MPI.BYTE, t[2])


WORLD_GROUP = None        # set by the recorder: the world group, for member lists


def describe_comm(c) -> dict | None:
    """What replay needs to impersonate a communicator (members as world ranks)."""
    if c is None or c == MPI.COMM_NULL:
        return None
    d = {"cls": None, "rank": c.Get_rank(), "size": c.Get_size()}
    if WORLD_GROUP is not None:
        g = MPI.Comm.Get_group(c)
        d["members"] = list(MPI.Group.Translate_ranks(g, list(range(g.Get_size())),
                                                      WORLD_GROUP))
        g.Free()
    for name in ("Cartcomm", "Graphcomm", "Distgraphcomm", "Intercomm", "Intracomm"):
        if isinstance(c, getattr(MPI, name)):
            d["cls"] = name
            break
    topo = c.Get_topology()
    if topo == MPI.CART:
        dims, periods, coords = c.Get_topo()
        d.update(cls="Cartcomm", dims=list(dims), periods=[bool(p) for p in periods],
                 coords=list(coords))
    elif topo == MPI.GRAPH:
        index, edges = c.Get_topo()
        d.update(cls="Graphcomm", index=list(index), edges=list(edges))
    elif topo == MPI.DIST_GRAPH:
        src, dst, w = c.Get_dist_neighbors()
        d.update(cls="Distgraphcomm", sources=list(src), destinations=list(dst))
    if c.Is_inter():
        d.update(cls="Intercomm", remote_size=c.Get_remote_size())
    return d


def mixin_hierarchy(prefix: str, methods_for, root=(object,)) -> dict:
    """Mixin classes mirroring mpi4py's communicator hierarchy, so that each
    subclass gets its own and its ancestors' methods: {class name: mixin}.
    ``methods_for(class name)`` gives the methods that class level defines."""
    mixins: dict = {}
    for cname, ps in COMM_PARENTS.items():
        mixins[cname] = type(prefix + cname + "Methods", tuple(mixins[p] for p in ps) or root,
                             methods_for(cname))
    return mixins
