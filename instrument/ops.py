"""Canonical operation names of the trace contract and their integer codes.

The tracer stores an op as a small integer in its raw per-rank files; the
merged ``events.parquet`` stores the lower-case name.  Categories tell later
stages how to read an event's other columns (see ``docs/TRACE.md``).
"""

# Point-to-point, blocking and nonblocking.
P2P_SEND = ["send", "bsend", "ssend", "rsend"]
P2P_ISEND = ["isend", "ibsend", "issend", "irsend"]
P2P_RECV = ["recv", "mrecv"]
P2P_IRECV = ["irecv", "imrecv"]
P2P_SENDRECV = ["sendrecv", "sendrecv_replace", "isendrecv", "isendrecv_replace"]
PROBES = ["probe", "iprobe", "mprobe", "improbe"]
# Persistent requests: *_init creates, start/startall activates.
PERSISTENT = ["send_init", "bsend_init", "ssend_init", "rsend_init", "recv_init",
              "psend_init", "precv_init", "start", "pready", "parrived"]
COMPLETIONS = ["wait", "test", "waitany", "testany", "waitall", "testall",
               "waitsome", "testsome", "get_status", "get_status_any",
               "get_status_all", "get_status_some", "cancel", "request_free"]
COLLECTIVES = ["barrier", "bcast", "gather", "gatherv", "scatter", "scatterv",
               "allgather", "allgatherv", "alltoall", "alltoallv", "alltoallw",
               "reduce", "allreduce", "reduce_scatter_block", "reduce_scatter",
               "scan", "exscan",
               "neighbor_allgather", "neighbor_allgatherv", "neighbor_alltoall",
               "neighbor_alltoallv", "neighbor_alltoallw"]
NB_COLLECTIVES = ["i" + c for c in COLLECTIVES]
PERSISTENT_COLLECTIVES = [c + "_init" for c in COLLECTIVES]
COMM_CREATION = ["comm_dup", "comm_idup", "comm_create", "comm_create_group",
                 "comm_create_from_group", "comm_split", "comm_split_type",
                 "cart_create", "cart_sub", "graph_create", "dist_graph_create",
                 "dist_graph_create_adjacent", "intercomm_create",
                 "intercomm_create_from_groups", "intercomm_merge",
                 "comm_shrink", "comm_free", "comm_disconnect"]
ENV = ["init", "finalize", "abort"]
# Calls the tracer sees but no later stage models (one-sided, I/O, dynamic
# processes): counted and reported, never silently dropped.
UNMODELLED_PREFIXES = ("win_", "file_", "spawn", "comm_accept", "comm_connect",
                       "comm_join", "comm_get_parent", "grequest_")

NAMES = (ENV + P2P_SEND + P2P_ISEND + P2P_RECV + P2P_IRECV + P2P_SENDRECV + PROBES
         + PERSISTENT + COMPLETIONS + COLLECTIVES + NB_COLLECTIVES
         + PERSISTENT_COLLECTIVES + COMM_CREATION)
CODE = {name: i for i, name in enumerate(NAMES)}


def code(name: str) -> int:
    """Integer code of an op name; unknown names (unmodelled calls) get a new code."""
    c = CODE.get(name)
    if c is None:
        c = CODE[name] = len(NAMES)
        NAMES.append(name)
    return c


def is_unmodelled(name: str) -> bool:
    """True for calls that the simulator and replay do not model."""
    return name.startswith(UNMODELLED_PREFIXES)
