"""The traced C wrappers of the PMPI shim, generated from the one table of
operations (mpimodel/ops.py) and the MPI library's own header.

An op of the table is traced at the C level when its C function exists in
``mpi.h`` (``MPI_`` and the op name capitalised: ``isend`` -> ``MPI_Isend``,
``comm_dup`` -> ``MPI_Comm_dup``) and its kind is one this module can
write a body for.  The body is put together from the op's kind and shape
and the function's parameter names as the header declares them (``buf``,
``count``, ``datatype``, ``dest``, ``sendcounts``, ``request`` ...): the
same byte counts, peers and flags the Python tracer records for the same
call (instrument/intercept.py).  A function without a body here (persistent
partitioned requests, matched probes, neighbourhood collectives, Alltoallw,
one-sided, MPI-IO) is still counted, and a call of it made below Python is
reported as invisible.  The large-count variants (``MPI_Isend_c``, with
``MPI_Count`` counts, which PETSc calls) are traced as their plain forms.

Every body runs after ``rr_count_traced`` said the call is to be recorded
(made below Python, tracing on); the runtime it calls is pmpishim/ctrace.c.
"""
from __future__ import annotations

import re

from mpimodel import ops

# kinds with a C body; the others are counted only
TRACED_KINDS = ("send", "isend", "recv", "irecv", "sendrecv", "probe", "coll", "icoll", "wait",
                "waitmany", "create", "free", "pinit", "start")
_CREATIONS = ("comm_dup", "comm_split", "comm_split_type", "comm_create", "cart_create")
_STATUS_LOCAL = 16            # statuses on the stack before a completion allocates


def c_name(op: str) -> str:
    """The C function (without ``MPI_``) of a canonical op name."""
    return op[:1].upper() + op[1:]


def traced_ops() -> dict[str, ops.Op]:
    """C function name -> the table's row, for every buffer-API op whose
    kind has a C body (the lower-case object methods share the op names)."""
    out: dict[str, ops.Op] = {}
    for row in ops.TABLE:
        if row.kind in TRACED_KINDS and row.method[:1].isupper() and \
                (row.kind != "create" or row.op in _CREATIONS) and \
                (row.kind != "free" or row.op == "comm_free"):
            # Start and Startall share their op
            out.setdefault(row.method if row.kind == "start" else c_name(row.op), row)
    return out


def traced_row(name: str, traced: dict[str, ops.Op]) -> ops.Op | None:
    """The row a C function records as: its own, or for a large-count
    variant (``Isend_c``: MPI_Count counts) that of the plain function."""
    row = traced.get(name)
    if row is None and name.endswith("_c"):
        row = traced.get(name[:-2])
    return row


def _params(params: str) -> list[tuple[str, str]]:
    """(type, name) of each parameter of a C parameter list."""
    out = []
    for p in re.split(r",(?![^\[]*\])", params):
        p = p.strip()
        m = re.match(r"(.*?)([A-Za-z_]\w*)\s*(\[[^\]]*\])?$", p)
        if m:
            out.append((m.group(1).strip() + ("*" if m.group(3) else ""), m.group(2)))
    return out


def _put(op: str, comm="ce->idx", peer="-1", tag="-1", sb="0", rb="0", req="-1", rpeer="-1",
         rtag="-1", newcomm="-1", flags="0", extra="NULL") -> str:
    return (f"    rr_put(&sp, ret, {ops.CODE[op]} /* {op} */, {comm}, {peer}, {tag}, {sb}, "
            f"{rb}, {req}, {rpeer}, {rtag}, {newcomm}, {flags}, {extra});\n")


def _statuses(arg: str, n: str) -> str:
    """Statements that make ``arg`` (a status array) real for ``n`` requests."""
    return (f"    MPI_Status rr_local[{_STATUS_LOCAL}], *rr_given = {arg};\n"
            f"    {arg} = rr_statuses({arg}, {n}, rr_local, {_STATUS_LOCAL});\n")


def _handles(reqs: str, n: str) -> str:
    """Statements that copy the request handles before MPI nulls them."""
    return (f"    MPI_Request rr_hl[{_STATUS_LOCAL}], *rr_h = {n} <= {_STATUS_LOCAL} ? rr_hl : "
            f"malloc(sizeof(MPI_Request) * (size_t)({n} > 0 ? {n} : 1));\n"
            f"    memcpy(rr_h, {reqs}, sizeof(MPI_Request) * (size_t)({n} > 0 ? {n} : 0));\n")


def _free_handles() -> str:
    return "    if (rr_h != rr_hl) free(rr_h);\n"


_STATUS_IN = ("    MPI_Status rr_st;\n"
              "    if (status == MPI_STATUS_IGNORE) status = &rr_st;\n")


def _reduce_sizes(stem: str) -> tuple[str, str, str] | None:
    """(statements, sbytes, rbytes) of the collectives that reduce or
    broadcast one buffer."""
    if stem == "barrier":
        return "", "0", "0"
    n = "    int64_t rr_n = rr_bytes(count, datatype);\n"
    if stem == "bcast":
        return n, "rr_rootme ? rr_n : 0", "rr_rootme ? 0 : rr_n"
    if stem == "reduce":
        return n, "rr_n", "rr_rootme ? rr_n : 0"
    if stem in ("allreduce", "scan", "exscan"):
        return n, "rr_n", "rr_n"
    if stem == "reduce_scatter_block":
        return "    int64_t rr_n = rr_bytes(recvcount, datatype);\n", "rr_p * rr_n", "rr_n"
    if stem == "reduce_scatter":
        return ("    int rr_me = 0;\n    PMPI_Comm_rank(comm, &rr_me);\n"
                "    int64_t rr_n = rr_bytes(recvcounts[rr_me], datatype);\n",
                "rr_sum_bytes(recvcounts, rr_p, datatype)", "rr_n")
    return None


def _side_bytes(side: str, a: set, blocks: bool) -> str | None:
    """Bytes of one side (``send`` or ``recv``) of a block collective: the
    per-peer counts summed, or the count times the members where the
    buffer holds one block per member (``blocks``)."""
    if f"{side}counts" in a:
        return f"rr_sum_bytes({side}counts, rr_p, {side}type)"
    if f"{side}count" in a:
        one = f"rr_bytes({side}count, {side}type)"
        return f"rr_p * {one}" if blocks else one
    return None


def _block_sizes(stem: str, a: set) -> tuple[str, str, str, str] | None:
    """(statements, sbytes, rbytes, extra) of the gathers, scatters and
    all-to-alls: blocks per member, per-peer counts for the v forms."""
    rb = _side_bytes("recv", a, blocks=not stem.startswith("scatter"))
    sb = _side_bytes("send", a, blocks=stem.startswith(("scatter", "alltoall")))
    if rb is None or sb is None:
        return None
    if stem.startswith("gather"):
        rb = f"(rr_rootme ? {rb} : 0)"
    if stem.startswith("scatter"):
        rb = f"(recvbuf == MPI_IN_PLACE ? 0 : {rb})"
    pre = f"    int64_t rr_rb = {rb};\n"
    if stem.startswith("scatter"):
        sb = f"(rr_rootme ? {sb} : 0)"
    elif stem.startswith("alltoall"):
        sb = f"(sendbuf == MPI_IN_PLACE ? rr_rb : {sb})"
    else:                                     # gathers: in place, one block of the result
        sb = f"(sendbuf == MPI_IN_PLACE ? rr_rb / (rr_p > 0 ? rr_p : 1) : {sb})"
    if not stem.endswith("v"):
        return pre, sb, "rr_rb", "NULL"
    sc = "sendcounts" if "sendcounts" in a else "NULL"
    rc = "recvcounts" if "recvcounts" in a else "NULL"
    st = "sendtype" if sc != "NULL" else "MPI_DATATYPE_NULL"
    rt = "recvtype" if rc != "NULL" else "MPI_DATATYPE_NULL"
    if stem.startswith(("gather", "scatter")):   # the counts mean something at the root
        pre += (f"    char *rr_x = rr_rootme ? rr_counts_json({sc}, {st}, {rc}, {rt}, rr_p) "
                ": NULL;\n")
    else:
        if sc != "NULL":
            sc = f"(sendbuf == MPI_IN_PLACE ? NULL : {sc})"
        pre += f"    char *rr_x = rr_counts_json({sc}, {st}, {rc}, {rt}, rr_p);\n"
    return pre, sb, "rr_rb", "rr_x"


def _coll_sizes(stem: str, a: set) -> tuple[str, str, str, str, str] | None:
    """(statements, sbytes, rbytes, peer, extra) of a buffer collective,
    as the Python tracer counts them (mpimodel/bufsize.py)."""
    rooted = "root" in a
    pre = "    int rr_p = ce->n;\n    (void)rr_p;\n"
    if rooted:
        pre += "    int rr_rootme = rr_is_root(ce, root);\n"
    peer = "rr_root(ce, root)" if rooted else "-1"
    sizes = _reduce_sizes(stem)
    if sizes is not None:
        return pre + sizes[0], sizes[1], sizes[2], peer, "NULL"
    blocks = _block_sizes(stem, a)
    if blocks is None:
        return None
    return pre + blocks[0], blocks[1], blocks[2], peer, blocks[3]


# One maker per kind: ``(name, call, a, plist, row)`` -> the statements
# that record the call (and make it, as ``call``), or None.

def _send(name, call, a, plist, row):
    if not {"count", "datatype", "dest", "tag", "comm"} <= a:
        return None
    s = f"    int rc = {call};\n    rr_comm_t *ce = rr_comm(comm);\n"
    req = "-1"
    if row.kind == "isend":
        s += "    int64_t id = rc == MPI_SUCCESS ? rr_req_new(*request, 0, ce) : -1;\n"
        req = "id"
    return s + _put(row.op, peer="rr_peer(ce, dest)", tag="tag",
                    sb="rr_bytes(count, datatype)", req=req)


def _recv(name, call, a, plist, row):
    if not {"source", "tag", "comm", "status"} <= a:
        return None
    return (_STATUS_IN + f"    int rc = {call};\n    rr_comm_t *ce = rr_comm(comm);\n"
            "    int64_t p, tg, n;\n    rr_matched(ce, status, &p, &tg, &n);\n"
            + _put(row.op, peer="p", tag="tg", rb="n", flags="rr_wild(source, tag)"))


def _irecv(name, call, a, plist, row):
    if not {"count", "datatype", "source", "tag", "comm", "request"} <= a:
        return None
    return (f"    int rc = {call};\n    rr_comm_t *ce = rr_comm(comm);\n"
            "    int64_t id = rc == MPI_SUCCESS ? rr_req_new(*request, rr_wild(source, tag) != 0, "
            "ce) : -1;\n"
            + _put(row.op, peer="rr_peer(ce, source)", tag="tag", rb="rr_bytes(count, datatype)",
                   req="id", flags="rr_wild(source, tag)"))


def _sendrecv(name, call, a, plist, row):
    if not {"dest", "sendtag", "source", "recvtag", "comm", "status"} <= a:
        return None
    sb = "rr_bytes(sendcount, sendtype)" if "sendcount" in a else "rr_bytes(count, datatype)"
    return (_STATUS_IN + f"    int rc = {call};\n    rr_comm_t *ce = rr_comm(comm);\n"
            "    int64_t p, tg, n;\n    rr_matched(ce, status, &p, &tg, &n);\n"
            + _put(row.op, peer="rr_peer(ce, dest)", tag="sendtag", sb=sb, rb="n", rpeer="p",
                   rtag="tg", flags="rr_wild(source, recvtag)"))


def _probe(name, call, a, plist, row):
    if not {"source", "tag", "comm", "status"} <= a:
        return None
    s = _STATUS_IN + f"    int rc = {call};\n    rr_comm_t *ce = rr_comm(comm);\n"
    if "flag" in a:                           # Iprobe: finding nothing is folded
        s += ("    if (!*flag) {\n" + _put(row.op, peer="rr_peer(ce, source)", tag="tag",
                                             flags="RR_FLAG_NONE")
              + "        return rc;\n    }\n")
    return (s + "    int64_t p, tg, n;\n    rr_matched(ce, status, &p, &tg, &n);\n"
            + _put(row.op, peer="p", tag="tg", rb="n", flags="rr_wild(source, tag)"))


def _coll(name, call, a, plist, row):
    stem = row.op[1:] if row.kind == "icoll" else row.op
    if "comm" not in a or (row.kind == "icoll") != ("request" in a) or \
            stem.startswith("neighbor") or stem == "alltoallw":
        return None
    sizes = _coll_sizes(stem, a)
    if sizes is None:
        return None
    pre, sb, rb, peer, extra = sizes
    inplace = "recvbuf == MPI_IN_PLACE" if stem.startswith("scatter") else \
        "sendbuf == MPI_IN_PLACE" if "sendbuf" in a else "0"
    s = f"    int rc = {call};\n    rr_comm_t *ce = rr_comm(comm);\n" + pre
    req = "-1"
    if row.kind == "icoll":
        s += "    int64_t id = rc == MPI_SUCCESS ? rr_req_new(*request, 0, ce) : -1;\n"
        req = "id"
    s += _put(row.op, peer=peer, sb=sb, rb=rb, req=req, flags=f"({inplace}) ? 32 : 0",
              extra=extra)
    return s + (f"    free({extra});\n" if extra != "NULL" else "")


def _wait(name, call, a, plist, row):
    if name == "Wait":
        return (_STATUS_IN + "    rr_req_t q = rr_req_find(*request, 1);\n"
                f"    int rc = {call};\n    rr_fixup(&q, status);\n"
                + _put(row.op, comm="-1", req="q.id"))
    if name == "Test":                        # finding nothing is folded
        return (_STATUS_IN + "    MPI_Request rr_h = *request;\n"
                f"    int rc = {call};\n"
                "    if (!*flag) {\n" + _put(row.op, comm="-1", flags="RR_FLAG_NONE")
                + "        return rc;\n    }\n"
                "    rr_req_t q = rr_req_find(rr_h, 1);\n    rr_fixup(&q, status);\n"
                + _put(row.op, comm="-1", req="q.id"))
    return None


def _waitmany(name, call, a, plist, row):
    """Waitall/any/some and Testall/any/some: the completed requests' ids."""
    n = "incount" if "incount" in a else "count"
    if not {n, "array_of_requests"} <= a:
        return None
    many = row.completes in ("all", "some")
    s = _handles("array_of_requests", n)
    s += _statuses("array_of_statuses", n) if many else _STATUS_IN
    s += f"    int rc = {call};\n"
    done = {"all": "1", "some": "*outcount != MPI_UNDEFINED && *outcount > 0",
            "any": "*indx != MPI_UNDEFINED"}[row.completes]
    if "flag" in a:
        done = f"*flag && ({done})"
    empty = "RR_FLAG_NONE" if "flag" in a or row.completes == "some" else "0"
    s += f"    if (!({done})) {{\n" + _put(row.op, comm="-1", flags=empty)
    if many:
        s += "        rr_statuses_done(array_of_statuses, rr_given, rr_local);\n"
    s += _free_handles() + "        return rc;\n    }\n"
    if not many:
        return (s + "    rr_req_t q = rr_req_find(rr_h[*indx], 1);\n    rr_fixup(&q, status);\n"
                + _free_handles() + _put(row.op, comm="-1", req="q.id"))
    k = n if row.completes == "all" else "*outcount"
    idx = "i" if row.completes == "all" else "array_of_indices[i]"
    return (s + f"    int64_t *rr_ids = malloc(sizeof(int64_t) * (size_t)({k} > 0 ? {k} : 1));\n"
            f"    for (int i = 0; i < {k}; i++) {{\n"
            f"        rr_req_t q = rr_req_find(rr_h[{idx}], 1);\n"
            "        rr_ids[i] = q.id;\n"
            "        rr_fixup(&q, &array_of_statuses[i]);\n    }\n"
            f"    char *rr_x = rr_ids_json(rr_ids, {k});\n"
            + _put(row.op, comm="-1", extra="rr_x")
            + "    free(rr_x);\n    free(rr_ids);\n"
            "    rr_statuses_done(array_of_statuses, rr_given, rr_local);\n" + _free_handles())


def _pinit(name, call, a, plist, row):
    """Send_init/Recv_init family: the persistent request remembers what
    each of its starts begins (the start event carries it)."""
    recv = row.starts == "irecv"
    who = "source" if recv else "dest"
    if not {"count", "datatype", who, "tag", "comm", "request"} <= a:
        return None
    n = "rr_bytes(count, datatype)"
    sb, rb = ("0", n) if recv else (n, "0")
    flags = "rr_wild(source, tag)" if recv else "0"
    return (f"    int rc = {call};\n    rr_comm_t *ce = rr_comm(comm);\n"
            f"    if (rc == MPI_SUCCESS)\n"
            f"        rr_pers_new(*request, {ops.CODE[row.starts]}, ce, rr_peer(ce, {who}), tag, "
            f"{sb}, {rb}, {flags});\n"
            + _put(row.op, peer=f"rr_peer(ce, {who})", tag="tag", sb=sb, rb=rb, flags=flags))


def _start(name, call, a, plist, row):
    """Start/Startall: one start event per request, each with a new id
    (the first timed by the call, as the Python tracer does)."""
    if name.startswith("Startall"):
        return (_handles("array_of_requests", "count") + f"    int rc = {call};\n"
                "    for (int i = 0; i < count; i++) {\n"
                "        if (i)\n            rr_enter(&sp);\n"
                "        rr_start(&sp, ret, rr_h[i]);\n    }\n" + _free_handles())
    return ("    MPI_Request rr_h = *request;\n"
            f"    int rc = {call};\n    rr_start(&sp, ret, rr_h);\n")


def _create(name, call, a, plist, row):
    comms = [n for t, n in plist if t.replace(" ", "") == "MPI_Comm"]
    outs = [n for t, n in plist if t.replace(" ", "") == "MPI_Comm*"]
    if not comms or not outs:
        return None
    parent, out = comms[0], outs[-1]
    topo = f"rr_cart_json(*{out})" if row.op == "cart_create" else "NULL"
    return (f"    int rc = {call};\n"
            "    int64_t nid = -1;\n"
            f"    char *rr_topo = rc == MPI_SUCCESS && *{out} != MPI_COMM_NULL ? {topo} : NULL;\n"
            "    pthread_mutex_lock(&rr_mu);\n"
            f"    rr_comm_t *ce = rr_comm_locked({parent});\n"
            f"    if (rc == MPI_SUCCESS && *{out} != MPI_COMM_NULL)\n"
            f"        nid = rr_register_locked(*{out}, ce, \"{row.op}\", rr_topo)->idx;\n"
            "    pthread_mutex_unlock(&rr_mu);\n    free(rr_topo);\n"
            + _put(row.op, newcomm="nid"))


def _free(name, call, a, plist, row):
    return ("    pthread_mutex_lock(&rr_mu);\n"
            "    rr_comm_t *ce = rr_comm_locked(*comm);\n    int64_t idx = ce->idx;\n"
            "    if (ce != &rr_no_comm) ce->live = 0;\n"
            "    pthread_mutex_unlock(&rr_mu);\n"
            f"    int rc = {call};\n" + _put(row.op, comm="idx"))


_MAKERS = {"send": _send, "isend": _send, "recv": _recv, "irecv": _irecv,
           "sendrecv": _sendrecv, "probe": _probe, "coll": _coll, "icoll": _coll,
           "wait": _wait, "waitmany": _waitmany, "create": _create, "free": _free,
           "pinit": _pinit, "start": _start}


def body(name: str, params: str, row: ops.Op) -> str | None:
    """The statements of the traced wrapper ``MPI_<name>`` after its
    decision to record, or None where this module has no body for it."""
    plist = _params(params)
    a = {n for _, n in plist}
    call = f"PMPI_{name}({', '.join(n for _, n in plist)})"
    make = _MAKERS.get(row.kind)
    s = make(name, call, a, plist, row) if make is not None else None
    return None if s is None else s + "    return rc;\n"
