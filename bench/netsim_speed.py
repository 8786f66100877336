"""Simulator speed and memory on generated workloads.

    python bench/netsim_speed.py [--ranks 1024,16384,262144] [--ops 4000000] [--million]
        [--workloads halo+allreduce,...] [--topology [--flows [--exact]]]

Workloads (every rank the same pattern, generated straight into schedule
arrays; ``iters`` chosen so that each run has about ``--ops`` operations):

* ``halo+allreduce``: per iteration a computation, a 2-D periodic halo
  exchange (4 Irecv + 4 Isend, waited together), then an 8-byte allreduce
  by recursive doubling (log2 p exchange rounds);
* ``dissemination``: per iteration a computation then a dissemination
  barrier (log2 p rounds);
* ``recursive doubling``: per iteration a 64 KiB allreduce by recursive
  doubling on a 2-level platform with rendezvous above 16 KiB.

Reported per run: operations, events processed by the engine, engine
seconds, events per second, and the peak RSS of the process.  ``--million``
adds the 1,048,576-rank halo+allreduce (one iteration) to check that 1M
ranks fit in memory.  ``--topology`` runs the same on a 4:1 tapered fat
tree of 16 nodes per leaf (its links contended) and on the same platform
without it (NIC contention only), side by side: the lowering's and the
links' cost, as a ratio of whole-run seconds; ``--flows`` adds the same
tree with ``sharing: rtt_flows`` (max-min flows, netsim/flows.py, at
its default reach), and ``--exact`` that with ``reach: 0`` (every flow a
change can move solved again) beside it, with the two predictions'
difference.  The
first call compiles the engine (numba, cached on disk afterwards); a
warm-up run keeps that out of the figures.
Goal: >= 1M events/s on one core; 1M ranks within 24 GB.
"""
from __future__ import annotations

import argparse
import resource

import numpy as np

from netsim import from_dict, run
from netsim.engine import CALC, RECV, SEND
from netsim.schedule import Schedule, constant, index_type

PLATFORM = {"name": "bench", "nodes": 1 << 16, "cores_per_node": 32,
            "network": {"levels": [{"name": "node", "span": 32, "latency": 0.5e-6,
                                    "byte_time": 0.1e-9},
                                   {"name": "fabric", "latency": 1.5e-6, "byte_time": 0.08e-9}],
                        "overhead": {"send": 0.2e-6, "recv": 0.2e-6}, "gap": 0.05e-6,
                        "eager_limit": 16384, "contention": False}}


def _pattern(p, iters, block):
    """Tile a per-rank, per-iteration block of ops over ranks and iterations.

    ``block(r)`` returns (kind, peer, size, tag, ctx, dur, edges) for all ranks r
    (arrays of shape (p, m) and an edge list [(src, dst, isstart)] of local
    op indices, negative src = op of the previous iteration counted from its end)."""
    r = np.arange(p)
    kind, peer, size, tag, ctx, dur, edges = block(r)
    m = kind.shape[1]
    n = p * iters * m
    per = iters * m

    def tile(a):
        return np.repeat(a[:, None, :], iters, axis=1).reshape(-1)
    src, dst, st = [], [], []
    base = (np.arange(p)[:, None] * per + np.arange(iters)[None, :] * m).reshape(-1)
    first = np.repeat(np.arange(iters)[None, :] == 0, p, axis=0).reshape(-1)
    for s_, d_, i_ in edges:
        if s_ < 0:                       # from the previous iteration: skip the first
            b = base[~first]
            src.append(b + s_)
            dst.append(b + d_)
            st.append(np.full(len(b), i_))
        else:
            src.append(base + s_)
            dst.append(base + d_)
            st.append(np.full(len(base), i_))
    index = index_type(n)
    return Schedule(kind=tile(kind).astype(np.int8), rank=np.repeat(r, per).astype(np.int32),
                    peer=tile(peer).astype(np.int32), size=tile(size).astype(np.int64),
                    tag=tile(tag).astype(np.int32), ctx=tile(ctx).astype(np.int32),
                    dur=tile(dur).astype(np.float64), coll=constant(-1, n, np.int32),
                    event=constant(-1, n, np.int64), sync=np.zeros(n, bool),
                    dep_src=np.concatenate(src).astype(index),
                    dep_dst=np.concatenate(dst).astype(index),
                    dep_start=np.concatenate(st).astype(bool),
                    coll_need=np.zeros(0, np.int32), nranks=p)


def _rd_rounds(r, p, nbytes, first_ctx=1):
    k = int(np.log2(p))
    cols = []
    for j in range(k):
        partner = r ^ (1 << j)
        cols.append((SEND, partner, nbytes, j, first_ctx))
        cols.append((RECV, partner, nbytes, j, first_ctx))
    return cols, k


def halo_allreduce(p, iters):
    px = 1 << (int(np.log2(p)) // 2)
    py = p // px

    def block(r):
        x, y = r % px, r // px
        nb = [((x + 1) % px) + y * px, ((x - 1) % px) + y * px,
              x + ((y + 1) % py) * px, x + ((y - 1) % py) * px]
        cols = [(CALC, -1, 0, -1, 0)]
        for d, q in enumerate(nb):
            cols.append((RECV, q, 8192, d ^ 1, 0))
        for d, q in enumerate(nb):
            cols.append((SEND, q, 8192, d, 0))
        rd, k = _rd_rounds(r, p, 8)
        cols += rd
        m = len(cols)
        arr = lambda i: np.stack([np.broadcast_to(np.asarray(c[i]), r.shape) for c in cols], 1)
        dur = np.zeros((p, m))
        dur[:, 0] = 1e-4 * (1 + 0.05 * (r % 7))
        edges = [(-2, 0, False), (-1, 0, False)] if k else [(-1, 0, False)]
        edges += [(0, i, False) for i in range(1, 9)]
        prev = list(range(1, 9))
        for j in range(k):
            a, b = 9 + 2 * j, 10 + 2 * j
            edges += [(s, a, False) for s in prev] + [(s, b, False) for s in prev]
            prev = [a, b]
        return arr(0), arr(1), arr(2), arr(3), arr(4), dur, edges
    return _pattern(p, iters, block)


def dissemination(p, iters):
    def block(r):
        k = int(np.ceil(np.log2(p)))
        cols = [(CALC, -1, 0, -1, 0)]
        for j in range(k):
            cols.append((SEND, (r + (1 << j)) % p, 0, j, 1))
            cols.append((RECV, (r - (1 << j)) % p, 0, j, 1))
        m = len(cols)
        arr = lambda i: np.stack([np.broadcast_to(np.asarray(c[i]), r.shape) for c in cols], 1)
        dur = np.zeros((p, m))
        dur[:, 0] = 5e-5
        edges = [(-2, 0, False), (-1, 0, False)]
        prev = [0]
        for j in range(k):
            a, b = 1 + 2 * j, 2 + 2 * j
            edges += [(s, a, False) for s in prev] + [(s, b, False) for s in prev]
            prev = [a, b]
        return arr(0), arr(1), arr(2), arr(3), arr(4), dur, edges
    return _pattern(p, iters, block)


def rd_allreduce(p, iters):
    def block(r):
        rd, k = _rd_rounds(r, p, 65536)
        cols = [(CALC, -1, 0, -1, 0)] + rd
        m = len(cols)
        arr = lambda i: np.stack([np.broadcast_to(np.asarray(c[i]), r.shape) for c in cols], 1)
        dur = np.zeros((p, m))
        dur[:, 0] = 2e-5
        edges = [(-2, 0, False), (-1, 0, False)]
        prev = [0]
        for j in range(k):
            a, b = 1 + 2 * j, 2 + 2 * j
            edges += [(s, a, False) for s in prev] + [(s, b, False) for s in prev]
            prev = [a, b]
        return arr(0), arr(1), arr(2), arr(3), arr(4), dur, edges
    return _pattern(p, iters, block)


WORKLOADS = {"halo+allreduce": (halo_allreduce, lambda p: 9 + 2 * int(np.log2(p))),
             "dissemination": (dissemination, lambda p: 1 + 2 * int(np.ceil(np.log2(p)))),
             "recursive doubling": (rd_allreduce, lambda p: 1 + 2 * int(np.log2(p)))}


def peak_gb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="1024,16384,262144")
    ap.add_argument("--ops", type=int, default=4_000_000, help="about this many ops per run")
    ap.add_argument("--million", action="store_true", help="also 1,048,576 ranks (memory)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS),
                    help="comma-separated, of " + ", ".join(WORKLOADS))
    ap.add_argument("--flows", action="store_true",
                    help="with --topology: the fat tree with sharing: rtt_flows too")
    ap.add_argument("--exact", action="store_true",
                    help="with --flows: the exact solve (reach 0) too, and its prediction "
                         "against the default reach's")
    ap.add_argument("--topology", action="store_true",
                    help="each case also on a tapered fat tree, against NIC contention alone")
    a = ap.parse_args()
    if a.topology:
        return topology_ratio(a)
    plat = from_dict(dict(PLATFORM), "bench-platform")
    run(halo_allreduce(16, 2), plat)                   # compile / load the engine
    print(f"{'workload':<20}{'ranks':>9}{'iters':>6}{'ops':>12}{'events':>12}"
          f"{'engine s':>10}{'Mevents/s':>11}{'peak GB':>9}")
    for name, p, iters, s in cases(a):
        res = run(s, plat)
        print(f"{name:<20}{p:>9}{iters:>6}{len(s):>12}{res.events:>12}{res.seconds:>10.2f}"
              f"{res.events / res.seconds / 1e6:>11.2f}{peak_gb():>9.2f}", flush=True)
        del s, res


def cases(a):
    """(workload, ranks, iterations, schedule) per case asked for, each
    schedule generated only when its turn comes."""
    wanted = a.workloads.split(",")
    unknown = set(wanted) - set(WORKLOADS)
    if unknown:
        raise SystemExit(f"netsim_speed: no workload {sorted(unknown)}; "
                         f"there are {', '.join(WORKLOADS)}")
    asked = [(name, int(p)) for p in a.ranks.split(",") for name in WORKLOADS
             if name in wanted]
    if a.million:
        asked.append(("halo+allreduce", 1 << 20))
    for name, p in asked:
        gen, per_iter = WORKLOADS[name]
        iters = max(1, a.ops // (p * per_iter(p))) if p < (1 << 20) else 1
        yield name, p, iters, gen(p, iters)


def topology_ratio(a) -> None:
    """Each case with NIC contention alone and on a tapered fat tree,
    alternated, best of 3 whole runs (lowering included)."""
    import time
    net = dict(PLATFORM["network"], contention=True)
    plain = from_dict(dict(PLATFORM, network=net), "contention")
    fat_tree = {"kind": "fat_tree", "leaf_nodes": 16, "up_links": 4}
    tree = from_dict(dict(PLATFORM, network=dict(net, topology=fat_tree)), "fat-tree")
    flows = from_dict(dict(PLATFORM, network=dict(net, topology=dict(
        fat_tree, sharing="rtt_flows"))), "fat-tree-flows")
    exact = from_dict(dict(PLATFORM, network=dict(net, topology=dict(
        fat_tree, sharing="rtt_flows", reach=0))), "fat-tree-exact")
    platforms = (("plain", plain), ("tree", tree)) + ((("flows", flows),) if a.flows else ()) \
        + ((("exact", exact),) if a.flows and a.exact else ())
    for _, plat in platforms:
        run(halo_allreduce(64, 2), plat)
    print(f"{'workload':<20}{'ranks':>9}{'ops':>12}{'NIC only s':>12}{'fat tree s':>12}"
          f"{'ratio':>7}" + (f"{'flows s':>10}{'ratio':>7}" if a.flows else "")
          + (f"{'exact s':>10}{'ratio':>7}{'pred':>9}" if a.flows and a.exact else "")
          + f"{'peak GB':>9}")
    for name, p, _, s in cases(a):
        best = {key: float("inf") for key, _ in platforms}
        predicted = {}
        # the exact solve takes minutes a run from 8,192 ranks: once there
        for k in range(1 if p >= (1 << 20) else 3):
            for key, plat in platforms:
                if key in ("flows", "exact") and p >= (1 << 20) or \
                        key == "exact" and p >= 8192 and k:
                    continue
                t0 = time.perf_counter()
                predicted[key] = run(s, plat).predicted_time
                best[key] = min(best[key], time.perf_counter() - t0)
        flowing = (f"{best['flows']:>10.2f}{best['flows'] / best['plain']:>7.2f}"
                   if a.flows else "")
        if a.flows and a.exact:
            flowing += (f"{best['exact']:>10.2f}{best['exact'] / best['plain']:>7.2f}"
                        f"{predicted['flows'] / predicted['exact'] - 1:>+9.4%}")
        print(f"{name:<20}{p:>9}{len(s):>12}{best['plain']:>12.2f}{best['tree']:>12.2f}"
              f"{best['tree'] / best['plain']:>7.2f}{flowing}{peak_gb():>9.2f}", flush=True)
        del s


if __name__ == "__main__":
    main()
