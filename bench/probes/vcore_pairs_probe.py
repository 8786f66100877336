"""Which pairs' latency does an all-to-all on virtual cores pay: rank 0's, or every pair's?

    python bench/probes/vcore_pairs_probe.py [--ranks 32] [--clusters 3]

On each of ``--clusters`` clusters brought up anew (N virtual cores, 2 a
node, 10 Gbit/s, the share of bench/virtual_cores.py at N):

* rank 0's small ping-pongs with every other rank (the rows of rank 0 in
  ``calibrate measure --only-pingpongs``, peers1.csv): their median over
  the peers on other nodes is the latency the table's fit gave the fabric
  (``calibrate fit --peers``) when it measured rank 0's pairs alone;
* every pair's: N - 1 rounds, in round k rank r ping-pongs with r XOR k
  (each pair once; all pairs of a round at once), 8 bytes, ``--reps``
  trips; the median one-way time of each pair on different nodes;
* what an exchange with every peer costs per round: N - 1 rounds of
  Sendrecv back to back (round k to r + k, from r - k: the pairwise
  algorithm) and an MPI_Alltoall, 1 KiB a peer (bytes negligible).

Per cluster: rank 0's median, all pairs' median and mean, the two
exchanges' ms per round.  If the exchanges' cost per round stays put
between clusters while rank 0's median moves, the fitted latency is
the estimator's lottery (each cluster's cores keep their quota phase),
not the cluster's, and a sample of pairs that share no rank is the
better estimator for operations that meet every pair.

Found 2026-12-03 at N = 32 (0.05 CPU, a 20 ms period), five clusters,
waits spinning (as the runs): all pairs' median 10.00 ms one way on
every cluster (half a period: most pairs' round trip is one period),
rank 0's 9.99, 10.00, 7.42, 10.00, 10.00 (in one cluster several of its
pairs ran in phase); a pairwise exchange 19.3-19.5 ms a round on every
cluster (a whole period: each step of a chain waits for the next burst,
twice the ping-pong's one way), an MPI_Alltoall of 1 KiB blocks (MPICH
posts them all at once) 22-26 ms in all, one period.  With sleeping
waits (``--sleeping-waits``, two clusters) a pair's one way is 0.18-0.23
ms (the quota is not spent waiting), but the pairwise exchange still
7 ms a round (its calls' CPU spends the quota) and the Alltoall one
period.  So calibrate fit --peers takes every pair's median (a rank's
phase moves all its pairs together), and what no one latency per level
carries (a chain's step costs a whole period) stays a limit of the
instrument (docs/METHODS.md).

Needs root and the cgroup v1 cpu controller (as virtual cores do).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path[:0] = [str(ROOT), str(HERE.parent), str(HERE.parent / "apps")]
from run import PY, env  # noqa: E402
from virtual_cores import peers_of, share_for, virtual_cluster  # noqa: E402

from emulate.isolate import MARK, enter, isolated  # noqa: E402

PAIRS = r"""
import json, sys, time
import numpy as np
from mpi4py import MPI
c = MPI.COMM_WORLD
r, n = c.Get_rank(), c.Get_size()
reps = int(sys.argv[1])
a, b = np.ones(8, np.uint8), np.empty(8, np.uint8)
mine = {}
for k in range(1, n):
    p = r ^ k
    c.Barrier()
    for _ in range(2):                       # connection made
        if r < p:
            c.Send(a, p); c.Recv(b, p)
        else:
            c.Recv(b, p); c.Send(a, p)
    trips = []
    for _ in range(reps):
        t = time.perf_counter()
        if r < p:
            c.Send(a, p); c.Recv(b, p)
            trips.append((time.perf_counter() - t) / 2)
        else:
            c.Recv(b, p); c.Send(a, p)
    if r < p:
        mine[p] = float(np.median(trips))
s = 1024
x, y = np.ones(s, np.uint8), np.empty(s, np.uint8)
big, got = np.ones(s * n, np.uint8), np.empty(s * n, np.uint8)
def pairwise():
    for k in range(1, n):
        c.Sendrecv(x, (r + k) % n, 0, y, (r - k) % n, 0)
out = {}
for name, fn in (("pairwise", pairwise), ("alltoall", lambda: c.Alltoall(big, got))):
    fn()
    c.Barrier()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    took = c.reduce((time.perf_counter() - t) / reps, MPI.MAX)
    out[name] = took
every = c.gather(mine, 0)
if r == 0:
    out["pairs"] = {f"{i} {p}": t for i, d in enumerate(every) for p, t in d.items()}
    print(json.dumps(out), flush=True)
"""


def one_cluster(n: int, cpn: int, reps: int, work: Path, sleep: bool) -> dict:
    """The figures of one cluster brought up anew (module docstring);
    ``sleep``: waits sleep between polls (rank 0's median then from the
    pairs' own rows)."""
    with virtual_cluster("vpp", n, cpn, 1e10, share_for(n), log=lambda s: None) as c:
        peers = None if sleep else peers_of(work, c, most=8)
        p = subprocess.run([c.mpiexec, "-n", str(n), PY, "-c", PAIRS, str(reps)],
                           env={**env(), "MPIR_CVAR_ENABLE_HEAVY_YIELD": "1" if sleep else "0"},
                           capture_output=True, text=True, timeout=3600)
    if p.returncode:
        raise RuntimeError(p.stderr[-1500:])
    got = json.loads(p.stdout.strip().splitlines()[-1])
    if peers is None:
        zero_med = statistics.median(t for key, t in got["pairs"].items()
                                     if key.startswith("0 ") and int(key.split()[1]) >= cpn)
    else:
        d = pd.read_csv(peers)
        d = d[(d["what"] == "pingpong") & (d["peer"] // cpn != 0) &
              ((d["rank"] == 0) if "rank" in d.columns else True)]
        zero_med = float(d.groupby("peer")["one_way"].min().median())
    apart = [t for key, t in got["pairs"].items()
             if int(key.split()[0]) // cpn != int(key.split()[1]) // cpn]
    return {"rank0_median": zero_med, "pairs_median": statistics.median(apart),
            "pairs_mean": statistics.fmean(apart),
            "pairs_quartiles": statistics.quantiles(apart, n=4),
            "pairwise_round": got["pairwise"] / (n - 1),
            "alltoall_round": got["alltoall"] / (n - 1)}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=32)
    ap.add_argument("--clusters", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--sleeping-waits", action="store_true",
                    help="waits sleep between polls (MPIR_CVAR_ENABLE_HEAVY_YIELD=1)")
    a = ap.parse_args(argv)
    if os.environ.get(MARK) != "1":
        return isolated([PY, str(Path(__file__).resolve())] + argv)
    enter()
    print(f"N = {a.ranks}, {share_for(a.ranks):g} CPU a core, 2 a node, waits "
          f"{'sleep' if a.sleeping_waits else 'spin'}; ms one way or per round")
    print("| cluster | rank 0's peers, median | all pairs, median (quartiles) | all pairs, mean"
          " | pairwise, per round | Alltoall, per round |")
    print("|---|---|---|---|---|---|")
    for k in range(a.clusters):
        work = Path(tempfile.mkdtemp(prefix="vcore-pairs-"))
        f = one_cluster(a.ranks, 2, a.reps, work, a.sleeping_waits)
        q = f["pairs_quartiles"]
        print(f"| {k + 1} | {1e3 * f['rank0_median']:.2f} | {1e3 * f['pairs_median']:.2f} "
              f"({1e3 * q[0]:.2f}-{1e3 * q[2]:.2f}) | {1e3 * f['pairs_mean']:.2f} | "
              f"{1e3 * f['pairwise_round']:.2f} | {1e3 * f['alltoall_round']:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
