"""netsim's fat tree against SimGrid's, side by side on the same traffic.

    python bench/topology_simgrid.py [--ranks 64,256] [--bytes 1048576] [--markdown]

Synthetic communication at P ranks, one per node, 8 nodes per leaf
switch, written once as a netsim schedule and once as SimGrid
time-independent traces of the same calls (every rank posts its
receives, then its sends, then waits for all): an all-to-all (rank r
sends to r+1, r+2, ... in turn), a random permutation (seed 0) and a 3-D
halo exchange (6 neighbours on the most balanced periodic grid).  Platforms: a full
fat tree (8 up links per leaf) and a 4:1 tapered one (2 up links), links
of 1.25 GB/s; SimGrid's FAT_TREE cluster with split-duplex links and its
max-min flow sharing (`smpirun -replay`, SMPI's bandwidth and latency
factors 1, every message sent eagerly), netsim's `network.topology`.
Reported: both simulated times, netsim over SimGrid, and the taper's
slow-down in each.

Goals (docs/METHODS.md, "A tapered fat tree"): within 5 % of SimGrid on
every case, the same ordering of the two trees, the taper's slow-down
about SimGrid's.  Needs Debian's libsimgrid-dev (smpirun).
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


def pattern(name: str, p: int, seed: int = 0) -> list[list[int]]:
    """Per rank, the ranks it sends one message to (each receiver receives
    one from each of its senders)."""
    if name == "alltoall":
        return [[(r + k) % p for k in range(1, p)] for r in range(p)]
    if name == "permutation":
        perm = np.random.default_rng(seed).permutation(p)
        return [[int(perm[r])] if perm[r] != r else [] for r in range(p)]
    if name == "halo3d":
        # the most balanced grid nx >= ny >= nz with nx * ny * nz = p
        nz = max(k for k in range(1, round(p ** (1 / 3)) + 1) if p % k == 0)
        ny = max(k for k in range(1, round((p // nz) ** 0.5) + 1) if (p // nz) % k == 0)
        nx = p // nz // ny
        out = []
        for r in range(p):
            x, y, z = r % nx, (r // nx) % ny, r // (nx * ny)
            nb = []
            for dx, dy, dz in ((1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1),
                               (0, 0, -1)):
                nb.append((x + dx) % nx + ((y + dy) % ny) * nx + ((z + dz) % nz) * nx * ny)
            out.append([q for q in dict.fromkeys(nb) if q != r])
        return out
    raise SystemExit(f"unknown pattern {name}")


def netsim_time(dests: list[list[int]], nbytes: int, up: int) -> float:
    from netsim import Builder, from_dict
    from netsim import run as simulate
    from netsim.engine import RECV, SEND
    p = len(dests)
    B = Builder(p)
    srcs: list[list[int]] = [[] for _ in range(p)]
    for r, ds in enumerate(dests):
        for d in ds:
            srcs[d].append(r)
    for r in range(p):
        for s in srcs[r]:
            B.op(RECV, r, [], peer=s, size=nbytes, tag=0)
        for d in dests[r]:
            B.op(SEND, r, [], peer=d, size=nbytes, tag=0)
    plat = from_dict({"nodes": p, "cores_per_node": 1, "network": {
        # a route is two node links, and between leaves two switch links
        # more; SimGrid adds their latencies, netsim has one per level (the
        # node level holds the one core: contention is between nodes)
        "levels": [{"name": "node", "span": 1, "latency": 0.0, "byte_time": 1 / BW},
                   {"name": "fabric", "latency": 2 * LAT, "byte_time": 1 / BW}],
        "overhead": {"send": 0.0, "recv": 0.0}, "gap": 0.0, "eager_limit": 2 * nbytes,
        "topology": {"kind": "fat_tree", "leaf_nodes": LEAF, "up_links": up}}}, "fat-tree")
    return simulate(B.done(), plat).predicted_time


def simgrid_time(dests: list[list[int]], nbytes: int, up: int, work: Path) -> float:
    p = len(dests)
    srcs: list[list[int]] = [[] for _ in range(p)]
    for r, ds in enumerate(dests):
        for d in ds:
            srcs[d].append(r)
    work.mkdir(parents=True, exist_ok=True)
    for r in range(p):
        lines = ["init"] + [f"irecv {s} 0 {nbytes}" for s in srcs[r]]
        lines += [f"isend {d} 0 {nbytes}" for d in dests[r]]
        lines += [f"wait {s} {r} 0" for s in srcs[r]] + [f"wait {r} {d} 0" for d in dests[r]]
        lines.append("finalize")
        (work / f"rank{r}.txt").write_text("".join(f"{r} {x}\n" for x in lines))
    (work / "index.txt").write_text("".join(f"{work / f'rank{r}.txt'}\n" for r in range(p)))
    leaves = p // LEAF
    (work / "plat.xml").write_text(
        "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
        "<platform version=\"4.1\"><zone id=\"world\" routing=\"Full\">"
        f"<cluster id=\"c\" prefix=\"node-\" suffix=\"\" radical=\"0-{p - 1}\" speed=\"1Gf\" "
        f"bw=\"{BW / 1e9}GBps\" lat=\"{LAT * 1e6}us\" sharing_policy=\"SPLITDUPLEX\" "
        f"topology=\"FAT_TREE\" topo_parameters=\"2;{LEAF},{leaves};1,{up};1,1\" "
        "loopback_bw=\"100GBps\" loopback_lat=\"0\"/>"
        "</zone></platform>\n")
    (work / "hosts").write_text("".join(f"node-{r}\n" for r in range(p)))
    cmd = ["smpirun", "-np", str(p), "-platform", "plat.xml", "-hostfile", "hosts", "-replay",
           str(work / "index.txt"), "--cfg=smpi/bw-factor:0:1", "--cfg=smpi/lat-factor:0:1",
           f"--cfg=smpi/send-is-detached-thresh:{2 * nbytes}",
           f"--cfg=smpi/async-small-thresh:{2 * nbytes}", "--cfg=smpi/host-speed:1Gf",
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
    ap.add_argument("--patterns", default="alltoall,permutation,halo3d")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args(argv)
    if shutil.which("smpirun") is None or not os.path.exists(REPLAYER):
        print("topology_simgrid: needs SimGrid (apt-get install libsimgrid-dev)", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for p in map(int, a.ranks.split(",")):
            for name in a.patterns.split(","):
                dests = pattern(name, p)
                row: dict = {"pattern": name, "ranks": p}
                for tree, up in (("full", LEAF), ("4:1", LEAF // 4)):
                    ns = netsim_time(dests, a.bytes, up)
                    sg = simgrid_time(dests, a.bytes, up, Path(tmp) / f"{name}{p}_{up}")
                    row |= {f"{tree}_netsim_s": ns, f"{tree}_simgrid_s": sg,
                            f"{tree}_ratio": ns / sg}
                row["taper_netsim"] = row["4:1_netsim_s"] / row["full_netsim_s"]
                row["taper_simgrid"] = row["4:1_simgrid_s"] / row["full_simgrid_s"]
                rows.append(row)
                print(f"topology_simgrid: {row}", file=sys.stderr, flush=True)
    df = pd.DataFrame(rows)
    print(df.to_markdown(index=False, floatfmt=".4g") if a.markdown else df.to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
