"""netsim's topologies against SimGrid's, side by side on the same traffic.

    python bench/topology_simgrid.py [--ranks 64,256] [--bytes 1048576]
        [--patterns alltoall,allreduce,permutation,halo3d]
        [--platforms full,4:1,3-level,torus,dragonfly]
        [--sharing queues,rtt_flows] [--markdown]

Synthetic communication at P ranks, one per node, written once as a
netsim schedule and once as SimGrid time-independent traces of the same
calls, in phases (in each, every rank posts its receives, then its sends,
then waits for all): an all-to-all (rank r sends to r+1, r+2, ... in
turn), an allreduce decomposed as MPICH does large ones (a reduce-scatter
by recursive halving, then an allgather by recursive doubling: 2 log2 P
phases of halving, then doubling, sizes), a random permutation (seed 0)
and a 3-D halo exchange (6 neighbours on the most balanced periodic grid).

Platforms, links of 1.25 GB/s and 1 us each way, SimGrid's max-min flow
sharing (`smpirun -replay`, SMPI's bandwidth and latency factors 1, every
message sent eagerly, no cross-traffic): a full fat tree (8 nodes per
leaf, 8 up links), a 4:1 tapered one (2 up links) and a 3-level one (2:1
at the leaves and at the level above), SimGrid's FAT_TREE cluster; a
dragonfly of routers with 4 nodes each (``dragonfly_shape``), SimGrid's
DRAGONFLY cluster (one chassis per group), whose routing netsim's
mirrors (``--platforms dragonfly-2x``: its global links twice as fast);
a 3-D torus, written for SimGrid as a Full zone with netsim's
own routes (dimension order) and a NIC link each way per node, because
SimGrid's TORUS cluster has no NIC: a node there sends on its six links
at once, where netsim's LogGP node injects one message at a time.
Every link carries the same 1 us in both (netsim: the fabric level's 2 us
for the two NIC links, ``hop_latency`` per switch link), so that routes
of more links are slower to share in both (SimGrid's flows share a
bottleneck in inverse proportion to their route's latency; netsim's
``sharing: rtt_flows`` does the same).  Reported: SimGrid's simulated
time, netsim's over it for each link sharing model (``--sharing``), and
per model whether both order the platforms alike.

Goals (docs/METHODS.md, "Topologies"): within 5 % of SimGrid on every
case, the same ordering of platforms, the taper's slow-down about
SimGrid's.  Needs Debian's libsimgrid-dev (smpirun).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
REPLAYER = "/usr/lib/x86_64-linux-gnu/simgrid/smpireplaymain"
LEAF = 8                       # nodes per leaf switch
BW = 1.25e9                    # bytes per second per link
LAT = 1e-6                     # seconds per link (messages are bandwidth-bound)
ROUTER_NODES = 4               # dragonfly: nodes per router
PLATFORMS = ("full", "4:1", "3-level", "torus", "dragonfly")

# a phase: per rank, the ranks it sends one message to, and the bytes of
# each (each receiver receives one from each of its senders)
Phase = tuple[list[list[int]], int]


def grid3(p: int) -> tuple[int, int, int]:
    """The most balanced nx >= ny >= nz with nx * ny * nz = p."""
    nz = max(k for k in range(1, round(p ** (1 / 3)) + 1) if p % k == 0)
    ny = max(k for k in range(1, round((p // nz) ** 0.5) + 1) if (p // nz) % k == 0)
    return p // nz // ny, ny, nz


def pattern(name: str, p: int, nbytes: int, seed: int = 0) -> list[Phase]:
    """The phases of a pattern at ``p`` ranks, ``nbytes`` per message
    (allreduce: the vector's bytes)."""
    if name == "alltoall":
        return [([[(r + k) % p for k in range(1, p)] for r in range(p)], nbytes)]
    if name == "allreduce":
        assert p & (p - 1) == 0, "allreduce: a power of two of ranks"
        steps = [1 << k for k in reversed(range(p.bit_length() - 1))]   # p/2 ... 1
        halving = [([[r ^ d] for r in range(p)], nbytes * d // p) for d in steps]
        return halving + halving[::-1]
    if name == "permutation":
        perm = np.random.default_rng(seed).permutation(p)
        return [([[int(perm[r])] if perm[r] != r else [] for r in range(p)], nbytes)]
    if name == "halo3d":
        nx, ny, nz = grid3(p)
        out = []
        for r in range(p):
            x, y, z = r % nx, (r // nx) % ny, r // (nx * ny)
            nb = []
            for dx, dy, dz in ((1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1),
                               (0, 0, -1)):
                nb.append((x + dx) % nx + ((y + dy) % ny) * nx + ((z + dz) % nz) * nx * ny)
            out.append([q for q in dict.fromkeys(nb) if q != r])
        return [(out, nbytes)]
    raise SystemExit(f"unknown pattern {name}")


def senders(dests: list[list[int]]) -> list[list[int]]:
    srcs: list[list[int]] = [[] for _ in dests]
    for r, ds in enumerate(dests):
        for d in ds:
            srcs[d].append(r)
    return srcs


def dragonfly_shape(p: int) -> tuple[int, int]:
    """(groups, routers per group) for p nodes of ROUTER_NODES per router,
    as many groups as routers where it divides (SimGrid's convention needs
    routers >= groups)."""
    routers = p // ROUTER_NODES
    g = 1 << ((routers.bit_length() - 1) // 2)
    return g, routers // g


def topology(platform: str, p: int, sharing: str = "queues") -> dict:
    """netsim's ``network.topology`` for a platform of the bench."""
    if platform in ("full", "4:1"):
        return {"kind": "fat_tree", "leaf_nodes": LEAF,
                "up_links": LEAF if platform == "full" else LEAF // 4, "hop_latency": LAT,
                "sharing": sharing}
    if platform == "3-level":
        # 8 nodes per leaf, 4 leaves per level-2 switch: 2:1 at both levels
        return {"kind": "fat_tree", "down": [LEAF, 4, p // (4 * LEAF)], "up": [LEAF // 2, 2],
                "hop_latency": LAT, "sharing": sharing}
    if platform == "torus":
        # a route is two NIC links, a fat tree's two switch links more
        return {"kind": "torus", "dims": list(grid3(p)), "hop_latency": LAT, "sharing": sharing}
    g, r = dragonfly_shape(p)
    fly = {"kind": "dragonfly", "groups": g, "routers": r, "nodes_per_router": ROUTER_NODES,
           "hop_latency": LAT, "sharing": sharing}
    if platform == "dragonfly-2x":            # global links twice as fast
        fly["global_byte_time"] = 1 / (2 * BW)
    return fly


def netsim_time(phases: list[Phase], platform: str, sharing: str = "queues") -> float:
    from netsim import Builder, from_dict
    from netsim import run as simulate
    from netsim.engine import RECV, SEND
    p = len(phases[0][0])
    B = Builder(p)
    prev: list[list] = [[] for _ in range(p)]
    for dests, nbytes in phases:
        srcs = senders(dests)
        now: list[list] = [[] for _ in range(p)]
        for r in range(p):
            for q in srcs[r]:
                now[r].append(B.op(RECV, r, prev[r], peer=q, size=nbytes, tag=0))
            for d in dests[r]:
                now[r].append(B.op(SEND, r, prev[r], peer=d, size=nbytes, tag=0))
        prev = [[(x, False) for x in ops] if ops else prev[r] for r, ops in enumerate(now)]
    most = max(n for _, n in phases)
    topo = topology(platform, p, sharing)
    # SimGrid adds the latencies of a route's links: two NIC links, and a
    # fat tree's two switch links between leaves (the messages are
    # bandwidth-bound: 1 us either way is noise); netsim: the fabric
    # level's latency, plus hop_latency per link crossed
    plat = from_dict({"nodes": p, "cores_per_node": 1, "network": {
        "levels": [{"name": "node", "span": 1, "latency": 0.0, "byte_time": 1 / BW},
                   {"name": "fabric", "latency": 2 * LAT, "byte_time": 1 / BW}],
        "overhead": {"send": 0.0, "recv": 0.0}, "gap": 0.0, "eager_limit": 2 * most,
        "topology": topo}}, platform)
    return simulate(B.done(), plat).predicted_time


def platform_xml(platform: str, p: int, pairs: set) -> str:
    """SimGrid's platform for a platform of the bench (``pairs``: the
    ordered pairs of nodes that exchange a message, for explicit routes)."""
    head = ("<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
            "<platform version=\"4.1\">")
    link = (f'bw="{BW / 1e9}GBps" lat="{LAT * 1e6}us"')
    if platform != "torus":
        if platform.startswith("dragonfly"):
            g, r = dragonfly_shape(p)
            blue = 2 if platform == "dragonfly-2x" else 1      # SimGrid: one link, 2x
            topo = f'topology="DRAGONFLY" topo_parameters="{g},{blue};1,1;{r},1;{ROUTER_NODES}"'
        elif platform == "3-level":
            t = topology(platform, p)
            down, up = ",".join(map(str, t["down"])), ",".join(map(str, [1] + t["up"]))
            topo = f'topology="FAT_TREE" topo_parameters="3;{down};{up};1,1,1"'
        else:
            up = topology(platform, p)["up_links"]
            topo = f'topology="FAT_TREE" topo_parameters="2;{LEAF},{p // LEAF};1,{up};1,1"'
        return (head + '<zone id="world" routing="Full">'
                f'<cluster id="c" prefix="node-" suffix="" radical="0-{p - 1}" speed="1Gf" '
                f'{link} sharing_policy="SPLITDUPLEX" {topo} '
                'loopback_bw="100GBps" loopback_lat="0"/></zone></platform>\n')
    # the torus as a Full zone: netsim's routes, a NIC link each way per node
    from netsim.topology import Topology
    topo_ = Topology.from_dict(topology("torus", p))
    src = np.array([a for a, _ in sorted(pairs)], dtype=np.int64)
    dst = np.array([b for _, b in sorted(pairs)], dtype=np.int64)
    ptr, links = topo_.routes(src, dst, p)
    out = [head, '<zone id="world" routing="Full">']
    out += [f'<host id="node-{n}" speed="1Gf"/>' for n in range(p)]
    one = f'bandwidth="{BW / 1e9}GBps" latency="{LAT * 1e6}us"'
    out += [f'<link id="nic{n}{w}" {one}/>' for n in range(p) for w in ("up", "down")]
    out += [f'<link id="t{i}" {one}/>' for i in range(topo_.nlinks(p))]
    for k, (a, b) in enumerate(zip(src, dst)):
        hops = "".join(f'<link_ctn id="t{i}"/>' for i in links[ptr[k]:ptr[k + 1]])
        out.append(f'<route src="node-{a}" dst="node-{b}" symmetrical="NO">'
                   f'<link_ctn id="nic{a}up"/>{hops}<link_ctn id="nic{b}down"/></route>')
    out.append("</zone></platform>\n")
    return "\n".join(out)


def simgrid_time(phases: list[Phase], platform: str, work: Path) -> float:
    p = len(phases[0][0])
    work.mkdir(parents=True, exist_ok=True)
    lines: list[list[str]] = [["init"] for _ in range(p)]
    pairs = set()
    for dests, nbytes in phases:
        srcs = senders(dests)
        for r in range(p):
            lines[r] += [f"irecv {q} 0 {nbytes}" for q in srcs[r]]
            lines[r] += [f"isend {d} 0 {nbytes}" for d in dests[r]]
            lines[r] += [f"wait {q} {r} 0" for q in srcs[r]] + [f"wait {r} {d} 0" for d in dests[r]]
            pairs.update((r, d) for d in dests[r])
    for r in range(p):
        lines[r].append("finalize")
        (work / f"rank{r}.txt").write_text("".join(f"{r} {x}\n" for x in lines[r]))
    (work / "index.txt").write_text("".join(f"{work / f'rank{r}.txt'}\n" for r in range(p)))
    (work / "plat.xml").write_text(platform_xml(platform, p, pairs))
    (work / "hosts").write_text("".join(f"node-{r}\n" for r in range(p)))
    most = max(n for _, n in phases)
    cmd = ["smpirun", "-np", str(p), "-platform", "plat.xml", "-hostfile", "hosts", "-replay",
           str(work / "index.txt"), "--cfg=smpi/bw-factor:0:1", "--cfg=smpi/lat-factor:0:1",
           f"--cfg=smpi/send-is-detached-thresh:{2 * most}",
           f"--cfg=smpi/async-small-thresh:{2 * most}", "--cfg=smpi/host-speed:1Gf",
           # no reverse flow for acknowledgements (5 % of a link by default):
           # netsim models none
           "--cfg=network/crosstraffic:0",
           REPLAYER]
    r = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
    m = re.search(r"Simulation time ([0-9.eE+-]+)", r.stdout + r.stderr)
    if r.returncode or not m:
        raise SystemExit(f"smpirun failed:\n{(r.stdout + r.stderr)[-3000:]}")
    return float(m.group(1))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="64,256")
    ap.add_argument("--bytes", type=int, default=1 << 20, help="bytes per message")
    ap.add_argument("--patterns", default="alltoall,allreduce,permutation,halo3d")
    ap.add_argument("--platforms", default=",".join(PLATFORMS))
    ap.add_argument("--sharing", default="queues,rtt_flows",
                    help="netsim's link sharing models to compare (queues, flows, rtt_flows)")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args(argv)
    if shutil.which("smpirun") is None or not os.path.exists(REPLAYER):
        print("topology_simgrid: needs SimGrid (apt-get install libsimgrid-dev)", file=sys.stderr)
        return 2
    rows = []
    sharings = a.sharing.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        for p in map(int, a.ranks.split(",")):
            for name in a.patterns.split(","):
                phases = pattern(name, p, a.bytes)
                for plat in a.platforms.split(","):
                    work = Path(tmp) / f"{name}{p}_{plat.replace(':', '')}"
                    sg = simgrid_time(phases, plat, work)
                    row = {"pattern": name, "ranks": p, "platform": plat, "simgrid_s": sg}
                    for sharing in sharings:
                        row[sharing] = netsim_time(phases, plat, sharing) / sg
                    rows.append(row)
                    print(f"topology_simgrid: {row}", file=sys.stderr, flush=True)
    df = pd.DataFrame(rows)
    # the same ordering of platforms per case, in both simulators: every pair
    # SimGrid tells apart (by more than 1 %) netsim orders alike
    def alike(g, sharing):
        ns, sg = list(g[sharing] * g.simgrid_s), list(g.simgrid_s)
        return all((ns[i] < ns[j]) == (sg[i] < sg[j]) for i in range(len(g))
                   for j in range(len(g)) if abs(sg[i] / sg[j] - 1) > 0.01)
    cases = df.groupby(["pattern", "ranks"])
    print("netsim / SimGrid per link sharing model:\n")
    print(df.to_markdown(index=False, floatfmt=".4g") if a.markdown else df.to_string())
    print()
    for sharing in sharings:
        off = np.abs(df[sharing] - 1)
        order = cases.apply(lambda g, s=sharing: alike(g, s), include_groups=False)
        print(f"- {sharing}: |netsim / SimGrid - 1| mean {off.mean():.1%}, max {off.max():.1%}; "
              f"within 5 %: {int((off <= 0.05).sum())} of {len(df)}; platforms ordered alike "
              f"in {int(order.sum())} of {len(order)} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
