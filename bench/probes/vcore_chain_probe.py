"""Does a chain of messages on virtual cores pay what a ping-pong says a hop costs?

    python bench/probes/vcore_chain_probe.py [--ranks 64] [--laps 5]

On a cluster of N virtual cores (2 a node, 1 Gbit/s links, the share of
bench/virtual_cores.py at N): a token passed around all N ranks,
rightwards then leftwards (``--laps`` laps each), its time per hop,
against the small-message ping-pongs of rank 0 with ranks 1 and 2 (the
same node and the next), half their round trip, which is what the
platform's latency is fitted to.  cg's Sendrecv chain at 64 is such a
token's path; the method prices cg's waits there 17-20 % high
(bench/tables/virtual_cores_x64.md).

Found 2026-12-01 at 64 (0.025 CPU, a 40 ms quota period; two clusters,
two launches each): the token took 13.6-15.0 ms a hop on one cluster,
15.5-18.1 on the other, where half a ping-pong's round trip was 19.9-20.2
ms to the next node (and 5-20 ms within one).  A round trip between two
virtual cores is about one quota period whatever their phases; a chain's
hop pays 0.7-0.9 of that half.  The platform's latency, fitted to the
ping-pongs, prices every hop of cg's chain 10-30 % high: the size of its
error at 64.  At 32 (0.05 CPU, 20 ms): 6.8-8.1 ms a hop against
8.3-10.4 ms, the same 0.7-0.8.  On real cores a hop and half a round
trip are the same.

Needs root and the cgroup v1 cpu controller (as virtual cores do).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path[:0] = [str(ROOT), str(HERE.parent), str(HERE.parent / "apps")]
from run import PY, env  # noqa: E402
from virtual_cores import share_for, virtual_cluster  # noqa: E402

from emulate.isolate import MARK, enter, isolated  # noqa: E402

CHAIN = r"""
import sys, time
from mpi4py import MPI
c = MPI.COMM_WORLD
r, n = c.Get_rank(), c.Get_size()
laps = int(sys.argv[1])
buf = bytearray(8)
out = []
for step in (1, -1):
    c.Barrier()
    t = time.perf_counter()
    for _ in range(laps):
        if r == 0:
            c.Send(buf, (r + step) % n); c.Recv(buf, (r - step) % n)
        else:
            c.Recv(buf, (r - step) % n); c.Send(buf, (r + step) % n)
    out.append((time.perf_counter() - t) / (laps * n))
for peer in (1, 2):
    c.Barrier()
    if r in (0, peer):
        t = time.perf_counter()
        for _ in range(laps * 4):
            if r == 0:
                c.Send(buf, peer); c.Recv(buf, peer)
            else:
                c.Recv(buf, 0); c.Send(buf, 0)
        out.append((time.perf_counter() - t) / (laps * 8))
if r == 0:
    print(f"token rightwards {1e3 * out[0]:.2f} ms a hop, leftwards {1e3 * out[1]:.2f}; "
          f"ping-pong half round trip, same node {1e3 * out[2]:.2f} ms, next node "
          f"{1e3 * out[3]:.2f}", flush=True)
"""


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--laps", type=int, default=5)
    ap.add_argument("--clusters", type=int, default=2, help="clusters brought up in turn")
    a = ap.parse_args(argv)
    if os.environ.get(MARK) != "1":
        return isolated([PY, str(Path(__file__).resolve())] + argv)
    enter()
    for k in range(a.clusters):
        with virtual_cluster("vch", a.ranks, 2, 1e9, share_for(a.ranks),
                             log=lambda s: None) as c:
            for launch in (1, 2):
                r = subprocess.run([c.mpiexec, "-n", str(a.ranks), PY, "-c", CHAIN,
                                    str(a.laps)], env=env(), capture_output=True, text=True,
                                   timeout=1800)
                print(f"cluster {k + 1} launch {launch}: {r.stdout.strip() or r.stderr[-500:]}",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
