"""The record and replay bodies of the PMPI shim's wrappers, generated from
the one table of operations (mpimodel/ops.py) and the MPI library's header,
as pmpishim/cwrappers.py generates the tracing bodies.

While ``instrument record`` records a rank, a call its compiled code makes
(below Python) runs the *record* body: the real call, then its record in
the rank's C log (pmpishim/creplay.c).  While ``python -m replay``
replays it, the call runs the *replay* body: answered from that log,
never reaching MPI.  Both bodies are made from the op's kind and the
function's parameter names as the header declares them; a function the
table has no such body for stops the record or replay with its name and
caller (creplay.c: rr_unloggable) rather than let a call go unlogged.
"""
from __future__ import annotations

from mpimodel import ops

from .cwrappers import _params

# collectives whose outputs are written below (the others stop the run)
_OUTPUTS_OF = ("barrier", "bcast", "reduce", "allreduce", "scan", "exscan",
               "reduce_scatter_block", "reduce_scatter", "allgather", "alltoall", "gather",
               "scatter", "allgatherv", "gatherv", "scatterv", "alltoallv")

_STATUS_IN = ("    MPI_Status rr_st;\n"
              "    if (status == MPI_STATUS_IGNORE) status = &rr_st;\n")


def _op(row) -> str:
    return f"{ops.CODE[row.op]} /* {row.op} */"


def _outputs(stem: str, a: set) -> str | None:
    """Statements that fill ``rr_pc``/``rr_np`` with the buffers the
    collective ``stem`` writes on this rank (what its record logs)."""
    pre = ("    rr_piece rr_pcl[1] = {{0}}, *rr_pc = rr_pcl;\n    int rr_np = 0;\n"
           "    int rr_p = rr_csize_of(comm), rr_me = rr_rank_of(comm);\n"
           "    (void)rr_p; (void)rr_me;\n")
    one = "    rr_pc[0] = (rr_piece){{{}, {}, {}}};\n    rr_np = 1;\n"
    if stem == "barrier":
        return pre
    if stem == "bcast":
        return pre + one.format("buffer", "count", "datatype")
    if stem == "reduce":
        return pre + "    if (rr_me == root) {\n" + one.format("recvbuf", "count", "datatype") \
            + "    }\n"
    if stem in ("allreduce", "scan", "exscan"):
        return pre + one.format("recvbuf", "count", "datatype")
    if stem == "reduce_scatter_block":
        return pre + one.format("recvbuf", "recvcount", "datatype")
    if stem == "reduce_scatter":
        return pre + one.format("recvbuf", "recvcounts[rr_me]", "datatype")
    if stem in ("allgather", "alltoall"):
        return pre + one.format("recvbuf", "(MPI_Count)recvcount * rr_p", "recvtype")
    if stem == "gather":
        return pre + "    if (rr_me == root) {\n" \
            + one.format("recvbuf", "(MPI_Count)recvcount * rr_p", "recvtype") + "    }\n"
    if stem in ("scatter", "scatterv"):
        return pre + "    if (recvbuf != MPI_IN_PLACE) {\n" \
            + one.format("recvbuf", "recvcount", "recvtype") + "    }\n"
    displs = "rdispls" if "rdispls" in a else "displs"
    blocks = f"    rr_pc = rr_blocks(recvbuf, recvcounts, {displs}, recvtype, rr_p);\n" \
             "    rr_np = rr_p;\n"
    if stem in ("allgatherv", "alltoallv"):
        return pre + blocks
    if stem == "gatherv":
        return pre + "    if (rr_me == root) {\n" + blocks + "    }\n"
    return None


def _send(name, a, plist, row, call):
    k = row.kind
    op = _op(row)
    fn = f'"{name}"'
    if not {"count", "datatype", "dest", "tag", "comm"} <= a:
        return None
    req = "*request" if k == "isend" else "MPI_REQUEST_NULL"
    rec = (f"    int rc = {call};\n    if (rc == MPI_SUCCESS)\n"
           f"        rl_post({op}, dest, tag, comm, rr_bytes(count, datatype), {req}, "
           "NULL, 0, 0, 0);\n    return rc;\n")
    rep = (f"    return rp_send(ret, {fn}, {op}, count, datatype, dest, tag, comm, "
           f"{'request' if k == 'isend' else 'NULL'}, 0);\n")
    return rec, rep


def _recv(name, a, plist, row, call):
    op = _op(row)
    fn = f'"{name}"'
    if not {"buf", "count", "datatype", "source", "tag", "comm", "status"} <= a:
        return None
    rec = (_STATUS_IN + f"    int rc = {call};\n"
           "    rr_piece pc = {buf, count, datatype};\n"
           f"    rl_call({op}, source, tag, comm, rr_bytes(count, datatype), &pc, 1, "
           "status);\n    return rc;\n")
    rep = (f"    return rp_recv(ret, {fn}, {op}, buf, count, datatype, source, tag, comm, "
           "status);\n")
    return rec, rep


def _irecv(name, a, plist, row, call):
    op = _op(row)
    fn = f'"{name}"'
    if not {"buf", "count", "datatype", "source", "tag", "comm", "request"} <= a:
        return None
    rec = (f"    int rc = {call};\n    rr_piece pc = {{buf, count, datatype}};\n"
           "    if (rc == MPI_SUCCESS)\n"
           f"        rl_post({op}, source, tag, comm, rr_bytes(count, datatype), "
           "*request, &pc, 1, 0, 1);\n    return rc;\n")
    rep = (f"    return rp_irecv(ret, {fn}, {op}, buf, count, datatype, source, tag, comm, "
           "request, 0);\n")
    return rec, rep


def _sendrecv(name, a, plist, row, call):
    op = _op(row)
    fn = f'"{name}"'
    if not {"dest", "sendtag", "source", "recvtag", "comm", "status"} <= a:
        return None
    if "recvbuf" in a:
        s, r = ("sendcount", "sendtype"), ("recvbuf", "recvcount", "recvtype")
    else:                                 # Sendrecv_replace
        s, r = ("count", "datatype"), ("buf", "count", "datatype")
    rec = (_STATUS_IN + f"    int rc = {call};\n"
           f"    rr_piece pc = {{{', '.join(r)}}};\n"
           f"    rl_call({op}, dest, sendtag, comm, rr_bytes({', '.join(s)}), &pc, 1, "
           "status);\n    return rc;\n")
    rep = (f"    return rp_sendrecv(ret, {fn}, {op}, {', '.join(s)}, dest, sendtag, "
           f"{', '.join(r)}, source, recvtag, comm, status);\n")
    return rec, rep


def _probe(name, a, plist, row, call):
    op = _op(row)
    fn = f'"{name}"'
    if not {"source", "tag", "comm", "status"} <= a:
        return None
    flag = "flag" if "flag" in a else "NULL"
    found = "*flag" if "flag" in a else "1"
    rec = (_STATUS_IN + f"    int rc = {call};\n"
           f"    if (rc == MPI_SUCCESS && {found})\n"
           f"        rl_probe({op}, source, tag, comm, status);\n    return rc;\n")
    rep = f"    return rp_probe(ret, {fn}, {op}, source, tag, comm, {flag}, status);\n"
    return rec, rep


def _coll(name, a, plist, row, call):
    k = row.kind
    op = _op(row)
    fn = f'"{name}"'
    stem = row.op[1:] if k == "icoll" else row.op
    if "comm" not in a or (k == "icoll") != ("request" in a) or stem not in _OUTPUTS_OF:
        return None
    outs = _outputs(stem, a)
    if outs is None:
        return None
    root = "root" if "root" in a else "-1"
    done = "    if (rr_pc != rr_pcl) free(rr_pc);\n"
    if k == "icoll":
        rec = (f"    int rc = {call};\n" + outs +
               f"    if (rc == MPI_SUCCESS)\n        rl_post({op}, {root}, -1, comm, "
               "rr_pieces_bytes(rr_pc, rr_np), *request, rr_pc, rr_np, 0, 0);\n")
        rep = outs + (f"    int rc = rp_coll(ret, {fn}, {op}, {root}, "
                      "rr_pieces_bytes(rr_pc, rr_np), comm, rr_pc, rr_np, request, 0);\n")
    else:
        rec = (f"    int rc = {call};\n" + outs +
               f"    rl_call({op}, {root}, -1, comm, rr_pieces_bytes(rr_pc, rr_np), rr_pc, "
               "rr_np, NULL);\n")
        rep = outs + (f"    int rc = rp_coll(ret, {fn}, {op}, {root}, "
                      "rr_pieces_bytes(rr_pc, rr_np), comm, rr_pc, rr_np, NULL, 0);\n")
    return rec + done + "    return rc;\n", rep + done + "    return rc;\n"


def _wait(name, a, plist, row, call):
    op = _op(row)
    fn = f'"{name}"'
    if name not in ("Wait", "Test"):
        return None
    test = name == "Test"
    rec = (_STATUS_IN + "    MPI_Request rr_h = *request;\n    int rr_i = 0;\n"
           f"    int rc = {call};\n"
           f"    if (rc == MPI_SUCCESS{' && *flag' if test else ''})\n"
           f"        rl_complete({op}, 1, &rr_h, &rr_i, 1, status);\n    return rc;\n")
    rep = (f"    return rp_complete(ret, {fn}, {op}, 0, {int(test)}, 1, request, "
           f"{'flag' if test else 'NULL'}, NULL, NULL, NULL, status);\n")
    return rec, rep


def _waitmany(name, a, plist, row, call):
    op = _op(row)
    fn = f'"{name}"'
    n = "incount" if "incount" in a else "count"
    if not {n, "array_of_requests"} <= a:
        return None
    test = "flag" in a
    kind = {"all": 1, "any": 2, "some": 3}[row.completes]
    sts = "array_of_statuses" if kind != 2 else "status"
    rec = ("    MPI_Request *rr_h = malloc(sizeof(MPI_Request) * (size_t)"
           f"({n} > 0 ? {n} : 1));\n"
           f"    memcpy(rr_h, array_of_requests, sizeof(MPI_Request) * (size_t)"
           f"({n} > 0 ? {n} : 0));\n")
    if kind == 2:
        rec += _STATUS_IN
    else:
        rec += ("    MPI_Status *rr_given = array_of_statuses;\n"
                "    if (array_of_statuses == MPI_STATUSES_IGNORE)\n"
                "        array_of_statuses = malloc(sizeof(MPI_Status) * (size_t)"
                f"({n} > 0 ? {n} : 1));\n")
    rec += f"    int rc = {call};\n"
    ok = "rc == MPI_SUCCESS" + (" && *flag" if test else "")
    if kind == 1:
        rec += (f"    if ({ok}) {{\n        int *rr_d = malloc(sizeof(int) * (size_t)"
                f"({n} > 0 ? {n} : 1));\n"
                f"        for (int i = 0; i < {n}; i++) rr_d[i] = i;\n"
                f"        rl_complete({op}, {n}, rr_h, rr_d, {n}, array_of_statuses);\n"
                "        free(rr_d);\n    }\n")
    elif kind == 2:
        rec += (f"    if ({ok}) {{\n"
                "        int rr_d = *indx, rr_k = *indx == MPI_UNDEFINED ? 0 : 1;\n"
                f"        rl_complete({op}, {n}, rr_h, &rr_d, rr_k, status);\n    }}\n")
    else:
        rec += (f"    if ({ok} && *outcount != 0)\n"
                f"        rl_complete({op}, {n}, rr_h, array_of_indices, "
                "*outcount == MPI_UNDEFINED ? 0 : *outcount, array_of_statuses);\n")
    if kind != 2:
        rec += "    if (rr_given != array_of_statuses) free(array_of_statuses);\n"
    rec += "    free(rr_h);\n    return rc;\n"
    rep = (f"    return rp_complete(ret, {fn}, {op}, {kind}, {int(test)}, {n}, "
           f"array_of_requests, {'flag' if test else 'NULL'}, "
           f"{'indx' if kind == 2 else 'NULL'}, {'outcount' if kind == 3 else 'NULL'}, "
           f"{'array_of_indices' if kind == 3 else 'NULL'}, {sts});\n")
    return rec, rep


def _create(name, a, plist, row, call):
    op = _op(row)
    fn = f'"{name}"'
    comms = [n for t, n in plist if t.replace(" ", "") == "MPI_Comm"]
    outs = [n for t, n in plist if t.replace(" ", "") == "MPI_Comm*"]
    if not comms or not outs:
        return None
    rec = (f"    int rc = {call};\n    if (rc == MPI_SUCCESS)\n"
           f"        rl_create({op}, {comms[0]}, *{outs[-1]});\n    return rc;\n")
    rep = f"    return rp_create(ret, {fn}, {op}, {comms[0]}, {outs[-1]});\n"
    return rec, rep


def _free(name, a, plist, row, call):
    op = _op(row)
    fn = f'"{name}"'
    return f"    return {call};\n", f"    return rp_comm_free(ret, {fn}, {op}, comm);\n"


def _pinit(name, a, plist, row, call):
    op = _op(row)
    fn = f'"{name}"'
    recv = row.starts == "irecv"
    who = "source" if recv else "dest"
    if not {"buf", "count", "datatype", who, "tag", "comm", "request"} <= a:
        return None
    # a receive's completion delivers its buffer: the one piece it registers
    piece = "    rr_piece pc = {buf, count, datatype};\n" if recv else ""
    pcs = "&pc, 1" if recv else "NULL, 0"
    rec = (f"    int rc = {call};\n{piece}    if (rc == MPI_SUCCESS)\n"
           f"        rl_post({op}, {who}, tag, comm, rr_bytes(count, datatype), "
           f"*request, {pcs}, 1, {int(recv)});\n    return rc;\n")
    if recv:
        rep = (f"    return rp_irecv(ret, {fn}, {op}, buf, count, datatype, source, tag, "
               "comm, request, 1);\n")
    else:
        rep = (f"    return rp_send(ret, {fn}, {op}, count, datatype, dest, tag, comm, "
               "request, 1);\n")
    return rec, rep


def _start(name, a, plist, row, call):
    fn = f'"{name}"'
    if name.startswith("Startall"):
        return (f"    int rc = {call};\n"
                "    for (int i = 0; rc == MPI_SUCCESS && i < count; i++)\n"
                "        rl_start();\n    return rc;\n",
                "    for (int i = 0; i < count; i++)\n"
                f"        rp_start(ret, {fn}, &array_of_requests[i]);\n"
                "    return MPI_SUCCESS;\n")
    return (f"    int rc = {call};\n    if (rc == MPI_SUCCESS)\n        rl_start();\n"
            "    return rc;\n", f"    return rp_start(ret, {fn}, request);\n")


# One maker per kind: ``(name, params, plist, row, call)`` -> (record,
# replay) statements, or None.
_MAKERS = {"send": _send, "isend": _send, "recv": _recv, "irecv": _irecv,
           "sendrecv": _sendrecv, "probe": _probe, "coll": _coll, "icoll": _coll,
           "wait": _wait, "waitmany": _waitmany, "create": _create, "free": _free,
           "pinit": _pinit, "start": _start}


def log_bodies(name: str, params: str, row) -> tuple[str, str] | None:
    """(record, replay) statements of the wrapper MPI_<name> (its row of
    cwrappers.traced_ops: the same functions are traced, recorded and
    replayed) for a call made below Python while recording or replaying,
    or None where this module has none (the call then stops the run)."""
    plist = _params(params)
    a = {n for _, n in plist}
    call = f"PMPI_{name}({', '.join(n for _, n in plist)})"
    make = _MAKERS.get(row.kind)
    return None if make is None else make(name, a, plist, row, call)
