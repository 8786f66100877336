"""The MPI operations: one table that the tracer, the recorder, the
replayer and the simulator's lowering all read.

One row per mpi4py method (``TABLE``, or :func:`table` as a DataFrame):

=======  ====================================================================
column   meaning
=======  ====================================================================
method   the mpi4py name: ``Isend``, ``isend``, ``Allreduce_init``, ``Wait``
level    the mpi4py class that defines it (``Comm``, ``Intracomm``,
         ``Topocomm``, ``Cartcomm``, ``Intercomm``, ``Request``,
         ``Prequest``, ``Message``, ``Win``, ``File``); subclasses inherit it
op       the canonical lower-case name the trace stores (``events.op``)
kind     what the call gives back, which decides how it is traced,
         recorded and replayed (KINDS below; mpimodel/kinds.py has the
         recording and the replaying of each kind side by side)
shape    collectives (buffer and object): where their bytes go (SHAPES);
         else ""
completes  completion calls (kinds ``wait``, ``waitmany``): which of the
         requests they complete: ``one`` (its own), ``any``, ``all``,
         ``some``; else ""
starts   persistent and partitioned inits: the nonblocking op that
         ``Start`` begins (``send_init`` -> ``isend``); else ""
=======  ====================================================================

The trace stores an op as a small integer in its raw per-rank files
(:func:`code`; the names travel with the codes, so the numbering is private
to one run) and the merged ``events.parquet`` the lower-case name.  The
simulator lowers a traced op by its kind (``SENDS``, ``RECVS``, ...).
"""
from __future__ import annotations

from typing import NamedTuple


class Op(NamedTuple):
    method: str
    level: str
    op: str
    kind: str
    shape: str = ""
    completes: str = ""
    starts: str = ""


# What each kind of call is.  Replay refuses the REFUSED_KINDS with a
# message naming the call: the message log cannot hold what they do.
KINDS = {
    "env": "MPI initialisation and finalisation (the tool's own, not the application's)",
    "send": "blocking send (buffer or object)",
    "isend": "nonblocking send: returns a request",
    "recv": "blocking receive: fills buf / returns the object; status",
    "irecv": "nonblocking receive: the request fills buf at completion",
    "sendrecv": "Sendrecv(_replace), sendrecv: fills recvbuf (buf)",
    "isendrecv": "Isendrecv(_replace): a request",
    "probe": "Probe/Iprobe (either case): flag and status",
    "mprobe": "Mprobe/Improbe (either case): a message (or none) and status",
    "mrecv": "Message.Recv/recv: fills buf / returns the object; status",
    "imrecv": "Message.Irecv/irecv: a request",
    "pinit": "Send_init/Recv_init family: a persistent request",
    "coll": "buffer collective: fills its output buffer",
    "icoll": "nonblocking buffer collective: a request",
    "pcoll": "persistent buffer collective (*_init): a persistent request",
    "ocoll": "object (lower-case) collective: returns an object",
    "create": "communicator creation: returns a communicator",
    "create_from": "communicator from a group (a class method): a communicator",
    "idup": "Idup: a communicator and a request",
    "free": "Free/Disconnect of a communicator",
    "wait": "Wait/Test (either case): completes one request",
    "waitmany": "Waitall/any/some, Testall/any/some (either case): completes several",
    "start": "Start/Startall: activates persistent requests",
    "request": "request bookkeeping (Cancel, Free): traced; nothing logged, replay answers",
    "query": "Get_status*: not traced (asks, completes nothing); the request answers",
    # traced and counted, but refused by replay: the log cannot hold them
    "partitioned": "partitioned communication (Psend_init, Pready, ...)",
    "dynamic": "processes that come and go (Spawn, Accept, Connect, Shrink)",
    "onesided": "one-sided communication (MPI.Win)",
    "io": "MPI-IO (MPI.File)",
}
REFUSED_KINDS = ("partitioned", "dynamic", "io")

# Where a buffer collective's bytes go (the tracer's sbytes/rbytes).
SHAPES = {
    "none": "no data (Barrier)",
    "bcast": "root sends its buffer to every member",
    "rooted": "root sends/receives one block per member (Gather*, Scatter*)",
    "reduce": "every member sends its buffer to the root",
    "pair": "every member exchanges a block with every other (or neighbour)",
    "op": "every member sends and receives its buffer (Allreduce, Scan, ...)",
    "counts": "Reduce_scatter: receive counts per member",
}

# Buffer collectives: method, level, shape; each also comes as I<name>
# (nonblocking) and <Name>_init (persistent).
_COLLECTIVES = [
    ("Barrier", "Comm", "none"), ("Bcast", "Comm", "bcast"),
    ("Gather", "Comm", "rooted"), ("Gatherv", "Comm", "rooted"),
    ("Scatter", "Comm", "rooted"), ("Scatterv", "Comm", "rooted"),
    ("Allgather", "Comm", "pair"), ("Allgatherv", "Comm", "pair"),
    ("Alltoall", "Comm", "pair"), ("Alltoallv", "Comm", "pair"), ("Alltoallw", "Comm", "pair"),
    ("Reduce", "Comm", "reduce"), ("Allreduce", "Comm", "op"),
    ("Reduce_scatter_block", "Comm", "op"), ("Reduce_scatter", "Comm", "counts"),
    ("Scan", "Intracomm", "op"), ("Exscan", "Intracomm", "op"),
    ("Neighbor_allgather", "Topocomm", "pair"), ("Neighbor_allgatherv", "Topocomm", "pair"),
    ("Neighbor_alltoall", "Topocomm", "pair"), ("Neighbor_alltoallv", "Topocomm", "pair"),
    ("Neighbor_alltoallw", "Topocomm", "pair"),
]
_OBJECT_COLLECTIVES = [
    ("barrier", "Comm", "none"), ("bcast", "Comm", "bcast"), ("gather", "Comm", "rooted"),
    ("scatter", "Comm", "rooted"), ("allgather", "Comm", "pair"), ("alltoall", "Comm", "pair"),
    ("reduce", "Comm", "reduce"), ("allreduce", "Comm", "op"),
    ("scan", "Intracomm", "op"), ("exscan", "Intracomm", "op"),
    ("neighbor_allgather", "Topocomm", "pair"), ("neighbor_alltoall", "Topocomm", "pair"),
]


# The methods of MPI.Win the tracer counts, the recorder logs and replay
# answers (mpimodel/windows.py, replay/windows.py), by what they do:
# create a window; move data (the argument that receives data, if any);
# synchronise (a target rank argument, if any); the rest.
WIN_CREATION = ("Create", "Allocate", "Allocate_shared", "Create_dynamic")
WIN_TRANSFERS = {"Put": None, "Get": "origin", "Accumulate": None,
                 "Get_accumulate": "result", "Fetch_and_op": "result",
                 "Compare_and_swap": "result"}
WIN_SYNCS = {"Fence": None, "Lock": "rank", "Unlock": "rank", "Lock_all": None,
             "Unlock_all": None, "Flush": "rank", "Flush_all": None, "Flush_local": "rank",
             "Flush_local_all": None, "Sync": None, "Post": None, "Start": None,
             "Complete": None, "Wait": None, "Test": None}
WIN_OTHERS = ("Attach", "Detach", "Shared_query", "Free")
# request-based transfers: the transfer of that name (without the R), whose
# request completes it
WIN_REQUESTS = {"Rput": "Put", "Rget": "Get", "Raccumulate": "Accumulate",
                "Rget_accumulate": "Get_accumulate"}
WIN_METHODS = (WIN_CREATION + tuple(WIN_TRANSFERS) + tuple(WIN_SYNCS) + WIN_OTHERS
               + tuple(WIN_REQUESTS))


def _rows() -> list[Op]:
    rows = [Op("Init", "-", "init", "env"), Op("Finalize", "-", "finalize", "env"),
            Op("Abort", "Comm", "abort", "env")]
    rows += [Op(m, "Comm", m.lower(), "send")
             for m in ("Send", "Bsend", "Ssend", "Rsend", "send", "bsend", "ssend")]
    rows += [Op(m, "Comm", m.lower(), "isend")
             for m in ("Isend", "Ibsend", "Issend", "Irsend", "isend", "ibsend", "issend")]
    rows += [Op("Recv", "Comm", "recv", "recv"), Op("recv", "Comm", "recv", "recv"),
             Op("Irecv", "Comm", "irecv", "irecv"), Op("irecv", "Comm", "irecv", "irecv"),
             Op("Sendrecv", "Comm", "sendrecv", "sendrecv"),
             Op("sendrecv", "Comm", "sendrecv", "sendrecv"),
             Op("Sendrecv_replace", "Comm", "sendrecv_replace", "sendrecv"),
             Op("Isendrecv", "Comm", "isendrecv", "isendrecv"),
             Op("Isendrecv_replace", "Comm", "isendrecv_replace", "isendrecv")]
    rows += [Op(m, "Comm", m.lower(), "probe") for m in ("Probe", "Iprobe", "probe", "iprobe")]
    rows += [Op(m, "Comm", m.lower(), "mprobe")
             for m in ("Mprobe", "Improbe", "mprobe", "improbe")]
    rows += [Op("Recv", "Message", "mrecv", "mrecv"), Op("recv", "Message", "mrecv", "mrecv"),
             Op("Irecv", "Message", "imrecv", "imrecv"),
             Op("irecv", "Message", "imrecv", "imrecv")]
    rows += [Op(m, "Comm", m.lower(), "pinit", starts=starts) for m, starts in (
        ("Send_init", "isend"), ("Bsend_init", "ibsend"), ("Ssend_init", "issend"),
        ("Rsend_init", "irsend"), ("Recv_init", "irecv"))]
    rows += [Op("Psend_init", "Comm", "psend_init", "partitioned", starts="isend"),
             Op("Precv_init", "Comm", "precv_init", "partitioned", starts="irecv")]
    rows += [Op("Start", "Prequest", "start", "start"),
             Op("Startall", "Prequest", "start", "start"),
             Op("Pready", "Prequest", "pready", "partitioned"),
             Op("Parrived", "Prequest", "parrived", "partitioned")]
    rows += [Op(m, "Request", m.lower(), "wait", completes="one")
             for m in ("Wait", "wait", "Test", "test")]
    rows += [Op(m, "Request", m.lower(), "waitmany", completes=m[4:].lower())
             for m in ("Waitany", "waitany", "Testany", "testany", "Waitall", "waitall",
                       "Testall", "testall", "Waitsome", "waitsome", "Testsome", "testsome")]
    rows += [Op("Get_status", "Request", "get_status", "query"),
             Op("Get_status_any", "Request", "get_status_any", "query"),
             Op("Get_status_all", "Request", "get_status_all", "query"),
             Op("Get_status_some", "Request", "get_status_some", "query"),
             Op("Cancel", "Request", "cancel", "request"),
             Op("Free", "Request", "request_free", "request")]
    for m, level, shape in _COLLECTIVES:
        rows.append(Op(m, level, m.lower(), "coll", shape))
    for m, level, shape in _COLLECTIVES:
        rows.append(Op("I" + m.lower(), level, "i" + m.lower(), "icoll", shape))
    for m, level, shape in _COLLECTIVES:
        rows.append(Op(m + "_init", level, m.lower() + "_init", "pcoll", shape))
    rows += [Op(m, level, m, "ocoll", shape) for m, level, shape in _OBJECT_COLLECTIVES]
    rows += [Op(m, level, op, "create") for m, level, op in (
        ("Dup", "Comm", "comm_dup"), ("Clone", "Comm", "comm_dup"),
        ("Dup_with_info", "Comm", "comm_dup"), ("Create", "Comm", "comm_create"),
        ("Split", "Comm", "comm_split"), ("Split_type", "Comm", "comm_split_type"),
        ("Create_group", "Intracomm", "comm_create_group"),
        ("Create_cart", "Intracomm", "cart_create"),
        ("Create_graph", "Intracomm", "graph_create"),
        ("Create_dist_graph", "Intracomm", "dist_graph_create"),
        ("Create_dist_graph_adjacent", "Intracomm", "dist_graph_create_adjacent"),
        ("Create_intercomm", "Intracomm", "intercomm_create"),
        ("Sub", "Cartcomm", "cart_sub"), ("Merge", "Intercomm", "intercomm_merge"))]
    rows += [Op("Create_from_group", "Intracomm", "comm_create_from_group", "create_from"),
             Op("Create_from_groups", "Intercomm", "intercomm_create_from_groups",
                "create_from")]
    rows += [Op("Idup", "Comm", "comm_idup", "idup"),
             Op("Idup_with_info", "Comm", "comm_idup", "idup"),
             Op("Free", "Comm", "comm_free", "free"),
             Op("Disconnect", "Comm", "comm_disconnect", "free")]
    # dynamic processes and fault tolerance: the trace sees a new
    # communicator; the log cannot stand in for processes that come and go
    rows += [Op(m, level, op, "dynamic") for m, level, op in (
        ("Shrink", "Comm", "comm_shrink"), ("Spawn", "Intracomm", "spawn"),
        ("Spawn_multiple", "Intracomm", "spawn"), ("Accept", "Intracomm", "comm_accept"),
        ("Connect", "Intracomm", "comm_connect"))]
    # one-sided communication (the WIN_* groups below) and MPI-IO: the
    # tracer counts these methods of Win and File as win_<method> / file_<method>
    rows += [Op(m, "Win", "win_" + m.lower(), "onesided") for m in WIN_METHODS]
    rows += [Op(m, "File", "file_" + m.lower(), "io") for m in (
        "Open", "Read", "Read_at", "Read_all", "Write", "Write_at", "Write_all", "Close")]
    return rows


TABLE: tuple[Op, ...] = tuple(_rows())

# mpi4py's communicator classes and their parents (a method of Comm is
# also Cartcomm's), innermost last
COMM_PARENTS = {"Comm": (), "Intracomm": ("Comm",), "Topocomm": ("Intracomm",),
                "Cartcomm": ("Topocomm",), "Graphcomm": ("Topocomm",),
                "Distgraphcomm": ("Topocomm",), "Intercomm": ("Comm",)}
COMM_LEVELS = tuple(COMM_PARENTS)
# the classes whose methods the tools replace: communicators, then requests
# and messages
WRAPPED_LEVELS = COMM_LEVELS + ("Request", "Prequest", "Message")
COMM_METHODS: dict[str, Op] = {o.method: o for o in TABLE if o.level in COMM_LEVELS}
# "Bcast" -> "bcast": where a buffer collective's bytes go (also for Ibcast, Bcast_init)
SHAPE = {o.method: o.shape for o in TABLE if o.kind == "coll"}


def ops_of(*kinds: str) -> frozenset[str]:
    """The canonical op names of the calls of these kinds."""
    return frozenset(o.op for o in TABLE if o.kind in kinds)


# What the simulator's lowering and the clustering read off the trace
SENDS = ops_of("send", "isend")                         # one message out
SYNC_SENDS = frozenset({"ssend", "issend"})             # complete once matched
RECVS = ops_of("recv", "irecv", "mrecv", "imrecv")      # one message in
SENDRECVS = ops_of("sendrecv", "isendrecv")             # one out, one in
COMPLETIONS = ops_of("wait", "waitmany")
POINT_TO_POINT = ops_of("send", "isend", "recv", "irecv", "sendrecv", "isendrecv", "probe",
                        "mprobe", "mrecv", "imrecv", "pinit") | {"start"}
# collectives of Python objects that reduce (mpi4py pickles partial results)
REDUCING_OBJECTS = frozenset(o.op for o in TABLE if o.kind == "ocoll"
                             and o.shape in ("reduce", "op"))
# completion calls that complete at most one request of their list
COMPLETE_ONE = frozenset(o.op for o in TABLE if o.completes in ("one", "any")) | \
    ops_of("request")
# persistent init -> the nonblocking op its Start begins
STARTS = {o.op: o.starts for o in TABLE if o.starts}
NAMES: list[str] = list(dict.fromkeys(o.op for o in TABLE))


def methods(level: str, *kinds: str) -> tuple[str, ...]:
    """The mpi4py method names of ``level`` (a class) with these kinds."""
    return tuple(o.method for o in TABLE if o.level == level and o.kind in kinds)
CODE = {name: i for i, name in enumerate(NAMES)}


def code(name: str) -> int:
    """Integer code of an op name; a name not in the table (a Win or File
    method the table does not list) gets a new code."""
    c = CODE.get(name)
    if c is None:
        c = CODE[name] = len(NAMES)
        NAMES.append(name)
    return c


def table():
    """TABLE as a pandas DataFrame (columns method, level, op, kind, shape,
    completes, starts)."""
    import pandas as pd
    return pd.DataFrame(TABLE, columns=Op._fields)
