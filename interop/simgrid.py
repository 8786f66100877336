"""Export a trace as SimGrid time-independent traces (SMPI replay input).

One file per rank, ``DIR/rank<R>.txt``, and ``DIR/index.txt`` listing them
(what ``smpirun -replay`` takes).  Actions, one per line, ``<rank> <action>
<args>``, as SimGrid's replay (3.32) parses them: ``init``, ``compute
<flops>`` (computation seconds x ``flops_per_second``: SimGrid times
computation by the host speed of its platform file), ``send|isend <dst>
<tag> <bytes>``, ``recv|irecv <src> <tag> <bytes>`` (the source and tag
that matched, for wildcards), ``wait <src> <dst> <tag>`` for every request
a completion call completed (SimGrid finds a request by that triple),
``barrier``, ``bcast <bytes> <root>``, ``reduce <bytes> 0 <root>``,
``allreduce <bytes> 0``, ``alltoall <bytes> <bytes>`` (per member),
``gather``/``allgather <bytes> <bytes> [root]``, ``reducescatter``,
``finalize``.  Sizes are bytes (``init`` without arguments selects
MPI_BYTE).  A collective of Python objects is written as mpi4py runs it
and netsim simulates it (netsim.collectives.OF_OBJECTS): each pickle
with its size, allreduce as a reduce, then a bcast.  SMPI
replays collectives on MPI_COMM_WORLD only, and has no scan or exscan:
such calls are reported and left out.

To replay as netsim simulates, give smpirun the platform's eager limit
twice: ``--cfg=smpi/send-is-detached-thresh:LIMIT`` (the sender does not
wait) and ``--cfg=smpi/async-small-thresh:LIMIT`` (the message travels
when sent, not when its receive is posted: without it, SimGrid ended a
halo exchange up to 4 % later), and the same collective algorithm
(``--cfg=smpi/allreduce:rdb`` for ``recursive_doubling``).
"""
from __future__ import annotations

import os

from contracts.raw_trace import FLAG_OBJECT
from mpimodel.ops import COMPLETIONS, TABLE, ops_of
from netsim.collectives import OBJECT_COUNT_BYTES, OF_OBJECTS

_SEND = ops_of("send")
_ISEND = ops_of("isend")


_COLLECTIVES = ("barrier", "bcast", "reduce", "allreduce", "alltoall", "gather", "allgather",
                "reduce_scatter", "reduce_scatter_block")
# calls with nothing to replay: probes, polls, communicator management
_NOTHING = ops_of("probe", "mprobe") | {o.op for o in TABLE if o.completes
                                        and o.method.lower().startswith("test")}
_COMM_MANAGEMENT = ops_of("create", "create_from", "idup", "free")
_COMPLETIONS = COMPLETIONS


class _Requests:
    """One rank's open requests: id -> the (src, dst, tag) SimGrid keys them by."""

    def __init__(self):
        self.open: dict = {}

    def started(self, req: int, key: tuple) -> None:
        if req >= 0:
            self.open[req] = key

    def waits(self, reqs) -> list[str]:
        return [f"wait {s} {d} {t}" for s, d, t in
                (self.open.pop(int(q)) for q in (reqs if reqs is not None else ())
                 if int(q) in self.open)]


def _actions(r: int, op, on_world: bool, peer: int, tag: int, sb, rb, rpeer: int, rtag: int,
             req: int, reqs, size: int, requests: _Requests,
             objects: bool = False) -> list[str] | str:
    """The SimGrid actions of rank ``r``'s traced call, or the reason it is skipped."""
    if op in ("init", "finalize"):
        return [op]
    if peer < 0 and (op in _SEND or op in _ISEND or op in ("recv", "irecv")):
        return []                                 # MPI_PROC_NULL: nothing happens
    tag = max(tag, 0)
    if op in _SEND:
        return [f"send {peer} {tag} {sb}"]
    if op in _ISEND:
        requests.started(req, (r, peer, tag))
        return [f"isend {peer} {tag} {sb}"]
    if op == "recv":
        return [f"recv {peer} {tag} {rb}"]
    if op == "irecv":
        requests.started(req, (peer, r, tag))
        return [f"irecv {peer} {tag} {rb}"]
    if op in ("sendrecv", "sendrecv_replace"):
        out = [f"isend {peer} {tag} {sb}"] if peer >= 0 else []
        out += [f"recv {rpeer} {max(rtag, 0)} {rb}"] if rpeer >= 0 else []
        return out + ([f"wait {r} {peer} {tag}"] if peer >= 0 else [])
    if op in _COMPLETIONS:
        return requests.waits(reqs)
    if op in _COLLECTIVES:
        if not on_world:
            return op + " (not on COMM_WORLD)"
        root = max(peer, 0)
        if objects:
            # mpi4py's algorithm, as netsim.collectives describes it
            k = OBJECT_COUNT_BYTES
            sb, rb = sb + k * (sb > 0), rb + k * (rb > 0)
            return [_collective(part, sb, rb, root, size) for part in OF_OBJECTS.get(op, (op,))]
        return [_collective(op, sb, rb, root, size)]
    if op in _NOTHING or op in _COMM_MANAGEMENT:
        return []
    return op


def _collective(op: str, sb, rb, root: int, size: int) -> str:
    """One collective action of a member that sends ``sb`` and receives
    ``rb`` bytes."""
    n = max(sb, rb)
    return {"barrier": "barrier", "bcast": f"bcast {n} {root}",
            "reduce": f"reduce {sb} 0 {root}", "allreduce": f"allreduce {sb} 0",
            "alltoall": f"alltoall {sb // max(size, 1)} {rb // max(size, 1)}",
            "gather": f"gather {sb} {sb} {root}", "allgather": f"allgather {sb} {sb}",
            }.get(op, "reducescatter " + " ".join([str(rb)] * size) + " 0")


def write_ti(trace, out_dir: str, flops_per_second: float = 1e9, column: str = "cpu",
             compute=None, inside=None) -> dict:
    """Write the time-independent traces; returns counts of skipped calls.
    ``inside``: per event, a call's own work between its messages (run
    between an object allreduce's reduce and its broadcast, as netsim does)."""
    os.makedirs(out_dir, exist_ok=True)
    ev = trace.events
    # communicators with every rank in world order (COMM_WORLD, its dups,
    # a non-reordered Cartesian grid) replay as MPI_COMM_WORLD
    world = {int(c) for c, m in zip(trace.comms["comm"], trace.comms["members"])
             if list(m) == list(range(trace.size))}
    comp = ev[column].to_numpy() if compute is None else compute
    skipped: dict = {}
    files = {}
    for r in range(trace.size):
        files[r] = open(os.path.join(out_dir, f"rank{r}.txt"), "w")
    cols = [ev[c].to_numpy() for c in ("rank", "op", "comm", "peer", "tag", "sbytes", "rbytes",
                                       "rpeer", "rtag", "req", "reqs", "flags")]
    requests = {r: _Requests() for r in range(trace.size)}
    for i, (r, op, comm, peer, tag, sb, rb, rpeer, rtag, req, reqs, flags) in \
            enumerate(zip(*cols)):
        f = files[int(r)]
        if op != "init" and comp[i] > 0:
            f.write(f"{r} compute {comp[i] * flops_per_second:.6g}\n")
        actions = _actions(int(r), op, int(comm) in world, int(peer), int(tag), sb, rb,
                           int(rpeer), int(rtag), int(req), reqs, trace.size,
                           requests[int(r)], bool(flags & FLAG_OBJECT))
        if isinstance(actions, str):
            skipped[actions] = skipped.get(actions, 0) + 1
            continue
        if inside is not None and inside[i] > 0 and len(actions) == 2:
            actions.insert(1, f"compute {inside[i] * flops_per_second:.6g}")
        f.writelines(f"{r} {a}\n" for a in actions)
    for f in files.values():
        f.close()
    with open(os.path.join(out_dir, "index.txt"), "w") as f:
        f.writelines(os.path.abspath(os.path.join(out_dir, f"rank{r}.txt")) + "\n"
                     for r in range(trace.size))
    return skipped
