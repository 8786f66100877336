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
        w = lambda s: f.write(f"{r} {s}\n")
        if op == "init":
            w("init")
            continue
        if comp[i] > 0:
            w(f"compute {comp[i] * flops_per_second:.6g}")
        if op in _SEND and peer >= 0:
            w(f"send {peer} {sb}")
        elif op in _ISEND and peer >= 0:
            w(f"Isend {peer} {sb}")
        elif op == "recv" and peer >= 0:
            w(f"recv {peer} {rb}")
        elif op == "irecv" and peer >= 0:
            w(f"Irecv {peer} {rb}")
        elif op in ("sendrecv", "sendrecv_replace"):
            if peer >= 0:
                w(f"Isend {peer} {sb}")
            if rpeer >= 0:
                w(f"recv {rpeer} {rb}")
            if peer >= 0:
                w("wait")
        elif op in ("wait", "test") and (reqs is not None and len(reqs)):
            w("wait")
        elif op in ("waitall", "testall", "waitsome", "testsome", "waitany", "testany") \
                and reqs is not None and len(reqs):
            w("waitall")
        elif op in ("barrier", "bcast", "reduce", "allreduce", "alltoall", "gather",
                    "allgather", "reduce_scatter", "reduce_scatter_block"):
            if int(comm) not in world:
                skipped[op + " (not on COMM_WORLD)"] = skipped.get(op + " (not on COMM_WORLD)",
                                                                   0) + 1
                continue
            n = max(sb, rb)
            root = max(int(peer), 0)
            w({"barrier": "barrier", "bcast": f"bcast {n} {root}",
               "reduce": f"reduce {sb} 0 {root}", "allreduce": f"allreduce {sb} 0",
               "alltoall": f"alltoall {sb // max(trace.size, 1)} {rb // max(trace.size, 1)}",
               "gather": f"gather {sb} {sb} {root}", "allgather": f"allgather {sb} {sb}",
               }.get(op, f"reducescatter {sb} 0"))
        elif op == "finalize":
            w("finalize")
        elif peer < 0 and (op in _SEND or op in _ISEND or op in ("recv", "irecv")):
            pass                                  # MPI_PROC_NULL: nothing happens
        elif op not in ("probe", "iprobe", "mprobe", "improbe", "test", "testall",
                        "testany", "testsome", "comm_free") and not op.startswith(
                            ("comm_", "cart_", "graph_", "dist_graph", "intercomm")):
            skipped[op] = skipped.get(op, 0) + 1
    for f in files.values():
        f.close()
    with open(os.path.join(out_dir, "index.txt"), "w") as f:
        f.writelines(os.path.abspath(os.path.join(out_dir, f"rank{r}.txt")) + "\n"
                     for r in range(trace.size))
    return skipped
