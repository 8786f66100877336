"""What each mpi4py method is, for the recorder and the replayer.

Both sides walk the same table, so a call recorded on the host is the call
replayed on the target, under the same canonical op name the tracer uses
(replayed computation vectors line up with the trace's events).

``KIND[name]`` for communicator methods:

============  ===============================================================
send          blocking send (buffer or object)
isend         nonblocking send: returns a request
recv          blocking receive: fills ``buf`` / returns the object; status
irecv         nonblocking receive: the request fills ``buf`` at completion
sendrecv      Sendrecv(_replace), sendrecv: fills ``recvbuf`` (``buf``)
isendrecv     Isendrecv(_replace)
probe         Probe/Iprobe (either case): flag and status
mprobe        Mprobe/Improbe (either case): a message (or none) and status
pinit         Send_init/Recv_init family: a persistent request
coll          buffer collective: fills its output buffer
icoll         nonblocking buffer collective
pcoll         persistent buffer collective (``*_init``)
ocoll         object (lower-case) collective: returns an object
create        communicator creation: returns a communicator
idup          Idup: a communicator and a request
free          Free/Disconnect
============  ===============================================================
"""
from __future__ import annotations

from mpi4py import MPI

from .bufsize import BLOCKED_RECV

SENDS = ("Send", "Bsend", "Ssend", "Rsend", "send", "bsend", "ssend")
ISENDS = ("Isend", "Ibsend", "Issend", "Irsend", "isend", "ibsend", "issend")
COLLECTIVES = ("Barrier", "Bcast", "Gather", "Gatherv", "Scatter", "Scatterv", "Allgather",
               "Allgatherv", "Alltoall", "Alltoallv", "Alltoallw", "Reduce", "Allreduce",
               "Reduce_scatter_block", "Reduce_scatter", "Scan", "Exscan",
               "Neighbor_allgather", "Neighbor_allgatherv", "Neighbor_alltoall",
               "Neighbor_alltoallv", "Neighbor_alltoallw")
OBJ_COLLECTIVES = ("barrier", "bcast", "gather", "scatter", "allgather", "alltoall", "reduce",
                   "allreduce", "scan", "exscan", "neighbor_allgather", "neighbor_alltoall")
CREATION = {
    "Dup": "comm_dup", "Clone": "comm_dup", "Dup_with_info": "comm_dup",
    "Create": "comm_create", "Split": "comm_split", "Split_type": "comm_split_type",
    "Create_group": "comm_create_group", "Create_cart": "cart_create",
    "Create_graph": "graph_create", "Create_dist_graph": "dist_graph_create",
    "Create_dist_graph_adjacent": "dist_graph_create_adjacent",
    "Create_intercomm": "intercomm_create", "Sub": "cart_sub", "Merge": "intercomm_merge",
}

KIND: dict[str, str] = {}
OP: dict[str, str] = {}
for _n in SENDS:
    KIND[_n] = "send"
for _n in ISENDS:
    KIND[_n] = "isend"
KIND.update({"Recv": "recv", "recv": "recv", "Irecv": "irecv", "irecv": "irecv",
             "Sendrecv": "sendrecv", "sendrecv": "sendrecv", "Sendrecv_replace": "sendrecv",
             "Isendrecv": "isendrecv", "Isendrecv_replace": "isendrecv",
             "Probe": "probe", "Iprobe": "probe", "probe": "probe", "iprobe": "probe",
             "Mprobe": "mprobe", "Improbe": "mprobe", "mprobe": "mprobe", "improbe": "mprobe",
             "Send_init": "pinit", "Bsend_init": "pinit", "Ssend_init": "pinit",
             "Rsend_init": "pinit", "Recv_init": "pinit", "Free": "free", "Disconnect": "free"})
for _n in COLLECTIVES:
    KIND[_n] = "coll"
    KIND["I" + _n.lower()] = "icoll"
    KIND[_n + "_init"] = "pcoll"
for _n in OBJ_COLLECTIVES:
    KIND[_n] = "ocoll"
for _n in CREATION:
    KIND[_n] = "create"
KIND["Idup"] = KIND["Idup_with_info"] = "idup"
for _n in KIND:
    OP[_n] = CREATION.get(_n, _n.lower())
OP["Free"], OP["Disconnect"] = "comm_free", "comm_disconnect"
OP["Idup"] = OP["Idup_with_info"] = "comm_idup"

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
        m = memoryview(np.asarray(m).T)
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


# mpi4py's communicator classes and their parents
COMM_PARENTS = {"Comm": (), "Intracomm": ("Comm",), "Topocomm": ("Intracomm",),
                "Cartcomm": ("Topocomm",), "Graphcomm": ("Topocomm",),
                "Distgraphcomm": ("Topocomm",), "Intercomm": ("Comm",)}


def mixin_hierarchy(prefix: str, methods_for, root=(object,)) -> dict:
    """Mixin classes mirroring mpi4py's communicator hierarchy, so that each
    subclass gets its own and its ancestors' methods: {class name: mixin}.
    ``methods_for(class name)`` gives the methods that class level defines."""
    mixins: dict = {}
    for cname, ps in COMM_PARENTS.items():
        mixins[cname] = type(prefix + cname + "Methods", tuple(mixins[p] for p in ps) or root,
                             methods_for(cname))
    return mixins
