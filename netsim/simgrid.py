"""Export a trace as SimGrid time-independent traces (SMPI replay input).

One file per rank, ``DIR/rank<R>.txt``, and ``DIR/index.txt`` listing them
(what ``smpirun -replay`` takes).  Actions, one per line, ``<rank> <action>
<args>``: ``init``, ``compute <flops>`` (computation seconds x
``flops_per_second``: SimGrid times computation by the host speed of its
platform file), ``send|Isend <dst> <bytes>``, ``recv|Irecv <src> <bytes>``,
``wait``, ``waitall``, ``barrier``, ``bcast <bytes> <root>``,
``reduce <bytes> 0 <root>``, ``allreduce <bytes> 0``, ``alltoall <bytes>
<bytes>``, ``gather``/``allgather <bytes> <bytes> [root]``,
``reducescatter``, ``finalize``.  SMPI replays collectives on
MPI_COMM_WORLD only: a collective on a communicator that is not all ranks
in world order is reported and left out.
"""
from __future__ import annotations

import os

from instrument.ops import ops_of

_SEND = ops_of("send")
_ISEND = ops_of("isend")


_COLLECTIVES = ("barrier", "bcast", "reduce", "allreduce", "alltoall", "gather", "allgather",
                "reduce_scatter", "reduce_scatter_block")
# calls with nothing to replay: probes, polls, communicator management
_NOTHING = ("probe", "iprobe", "mprobe", "improbe", "test", "testall", "testany", "testsome")
_COMM_MANAGEMENT = ("comm_", "cart_", "graph_", "dist_graph", "intercomm")


def _actions(op, on_world: bool, peer: int, sb, rb, rpeer: int, completes: bool,
             size: int) -> list[str] | str:
    """The SimGrid actions of one traced call, or the reason it is skipped."""
    if op in ("init", "finalize"):
        return [op]
    if peer < 0 and (op in _SEND or op in _ISEND or op in ("recv", "irecv")):
        return []                                 # MPI_PROC_NULL: nothing happens
    if op in _SEND:
        return [f"send {peer} {sb}"]
    if op in _ISEND:
        return [f"Isend {peer} {sb}"]
    if op in ("recv", "irecv"):
        return [f"{'recv' if op == 'recv' else 'Irecv'} {peer} {rb}"]
    if op in ("sendrecv", "sendrecv_replace"):
        return ([f"Isend {peer} {sb}"] if peer >= 0 else []) + \
            ([f"recv {rpeer} {rb}"] if rpeer >= 0 else []) + (["wait"] if peer >= 0 else [])
    if op in ("wait", "test") and completes:
        return ["wait"]
    if op in ("waitall", "testall", "waitsome", "testsome", "waitany", "testany") and completes:
        return ["waitall"]
    if op in _COLLECTIVES:
        if not on_world:
            return op + " (not on COMM_WORLD)"
        n, root = max(sb, rb), max(peer, 0)
        return [{"barrier": "barrier", "bcast": f"bcast {n} {root}",
                 "reduce": f"reduce {sb} 0 {root}", "allreduce": f"allreduce {sb} 0",
                 "alltoall": f"alltoall {sb // max(size, 1)} {rb // max(size, 1)}",
                 "gather": f"gather {sb} {sb} {root}", "allgather": f"allgather {sb} {sb}",
                 }.get(op, f"reducescatter {sb} 0")]
    if op in _NOTHING or op.startswith(_COMM_MANAGEMENT):
        return []
    return op


def write_ti(trace, out_dir: str, flops_per_second: float = 1e9, column: str = "cpu",
             compute=None) -> dict:
    """Write the time-independent traces; returns counts of skipped calls."""
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
    cols = [ev[c].to_numpy() for c in ("rank", "op", "comm", "peer", "sbytes", "rbytes",
                                       "rpeer", "reqs")]
    for i, (r, op, comm, peer, sb, rb, rpeer, reqs) in enumerate(zip(*cols)):
        f = files[int(r)]
        if op != "init" and comp[i] > 0:
            f.write(f"{r} compute {comp[i] * flops_per_second:.6g}\n")
        actions = _actions(op, int(comm) in world, int(peer), sb, rb, int(rpeer),
                           reqs is not None and len(reqs) > 0, trace.size)
        if isinstance(actions, str):
            skipped[actions] = skipped.get(actions, 0) + 1
            continue
        f.writelines(f"{r} {a}\n" for a in actions)
    for f in files.values():
        f.close()
    with open(os.path.join(out_dir, "index.txt"), "w") as f:
        f.writelines(os.path.abspath(os.path.join(out_dir, f"rank{r}.txt")) + "\n"
                     for r in range(trace.size))
    return skipped
