"""Does an exchange on virtual cores cost what the fitted network says?

    python bench/probes/vcore_alltoall_probe.py [--ranks 32] [--sizes 65536,262144,1048576]

On a cluster of N virtual cores (2 a node, 10 Gbit/s links, the share of
bench/virtual_cores.py at N), the network measured and fitted as the
table does (``calibrate measure`` at 3 ranks to 1 MiB, ``calibrate fit``),
then for each message size s, ``--reps`` times back to back, each rank
paired with rank r + N/2 (another node):

* one-way: the lower half sends s to its partner, the upper half receives;
* two-way: every rank sends s to its partner and receives s from it at once
  (MPI_Sendrecv);
* pairwise: N - 1 rounds of Sendrecv, round k to r + k and from r - k
  (the algorithm netsim prices an alltoall with);
* alltoall: MPI_Alltoall, blocks of s (fft2d at N = 32: 256 KiB).

Each case's seconds per repetition (the slowest rank, from a common
barrier) against netsim's for the same pattern written as a GOAL schedule
on the fitted platform.  fft2d at 32 was predicted 31 % low with its
computation within 10 % of its ranks' own: this says whether its
exchanges are what the platform misprices, and which part (one message,
both directions at once, many partners).

Found 2026-12-02 at 32 (0.05 CPU, a 20 ms quota period), two clusters:
every step that waits for another core costs a whole number of half
periods, whatever the bytes up to 256 KiB (their copies fit in one burst
at the real CPU's speed): one-way and two-way 20.0 ms, a pairwise round
20 ms, an Alltoall of 256 KiB blocks 610-630 ms (31 rounds), 1 MiB
blocks 0.8-0.9 s.  netsim priced the Alltoall at 423 ms on one cluster's
fitted platform and 746 ms on the other's (its pair's quota phases set
the fitted latency: 0.7x to 1.5x the measured).  In fft2d's own loop
(bench/probes/vcore_first_calls_probe.py, that day a version of this
probe timing the loop's calls untraced) its third and fourth Alltoalls
took what the back-to-back ones take (600-615 ms from the last rank's
entry), but its first took 2.3-2.4 s and its second 1.4-1.5 s: the
connections to 31 new peers opened and warmed in them, which the calibration measured only
between ranks 0 and 1 (one node's shared memory), so the fitted network
had no warm-up at all.  It now measures every peer's (calibrate measure,
``first``: the opening).

Needs root and the cgroup v1 cpu controller (as virtual cores do).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path[:0] = [str(ROOT), str(HERE.parent), str(HERE.parent / "apps")]
from run import PY, env  # noqa: E402
from virtual_cores import fit_network, network_of, share_for, virtual_cluster  # noqa: E402

from emulate.isolate import MARK, enter, isolated  # noqa: E402

CASES = ("one-way", "two-way", "pairwise", "alltoall")

EXCHANGE = r"""
import json, sys, time
import numpy as np
from mpi4py import MPI
c = MPI.COMM_WORLD
r, n = c.Get_rank(), c.Get_size()
partner = (r + n // 2) % n
reps = int(sys.argv[1])
out = {}
for s in map(int, sys.argv[2:]):
    a, b = np.ones(s, np.uint8), np.empty(s, np.uint8)
    big, got = np.ones(s * n, np.uint8), np.empty(s * n, np.uint8)
    def one(case):
        if case == "one-way":
            if r < n // 2:
                c.Send(a, partner)
            else:
                c.Recv(b, partner)
        elif case == "two-way":
            c.Sendrecv(a, partner, 0, b, partner, 0)
        elif case == "pairwise":
            for k in range(1, n):
                c.Sendrecv(a, (r + k) % n, 0, b, (r - k) % n, 0)
        else:
            c.Alltoall(big, got)
    for case in CASES:
        one(case)                                # connections made, memory touched
        c.Barrier()
        t = time.perf_counter()
        for _ in range(reps):
            one(case)
        took = c.reduce((time.perf_counter() - t) / reps, MPI.MAX)
        if r == 0:
            out[f"{case} {s}"] = took
if r == 0:
    print(json.dumps(out), flush=True)
""".replace("CASES", repr(CASES))

def goal(case: str, n: int, s: int, reps: int) -> str:
    """The case as a GOAL schedule: every op after the rank's previous one
    (a Sendrecv's two after the previous pair)."""
    lines = [f"num_ranks {n}"]
    for r in range(n):
        partner = (r + n // 2) % n
        ops, rounds = [], []                     # rounds: lists of labels done together
        for _ in range(reps):
            if case == "one-way":
                pairs = [[("send" if r < n // 2 else "recv", partner, partner)]]
            elif case == "two-way":
                pairs = [[("send", partner, 0), ("recv", partner, 0)]]
            else:
                pairs = [[("send", (r + k) % n, 0), ("recv", (r - k) % n, 0)]
                         for k in range(1, n)]
            for pair in pairs:
                labels = []
                for what, peer, _ in pair:
                    label = f"l{len(ops)}"
                    word = "to" if what == "send" else "from"
                    ops.append(f"{label}: {what} {s}b {word} {peer} tag 0")
                    labels.append(label)
                rounds.append(labels)
        lines.append(f"rank {r} {{")
        lines += ops
        for before, after in zip(rounds, rounds[1:]):
            lines += [f"{x} requires {y}" for x in after for y in before]
        lines.append("}")
    return "\n".join(lines) + "\n"


def priced(case: str, n: int, s: int, reps: int, platform: Path, work: Path) -> float:
    """netsim's seconds per repetition of the case on the platform."""
    g, out = work / f"{case}-{s}.goal", work / f"{case}-{s}.json"
    g.write_text(goal("pairwise" if case == "alltoall" else case, n, s, reps))
    subprocess.run([PY, "-m", "netsim", str(g), "--goal-in", "--platform", str(platform),
                    "-o", str(out)], check=True, capture_output=True, env=env())
    return json.loads(out.read_text())["predicted_time"] / reps


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=32)
    ap.add_argument("--sizes", default="65536,262144,1048576", help="bytes, comma-separated")
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--launches", type=int, default=2)
    a = ap.parse_args(argv)
    if os.environ.get(MARK) != "1":
        return isolated([PY, str(Path(__file__).resolve())] + argv)
    enter()
    sizes = [int(x) for x in a.sizes.split(",")]
    work = Path(tempfile.mkdtemp(prefix="vcore-alltoall-"))
    measured: dict[str, list[float]] = {}
    with virtual_cluster("vat", a.ranks, 2, 1e10, share_for(a.ranks), log=lambda s: None) as c:
        network_of({"max_bytes": max(sizes), "ranks": a.ranks}, work, c, 0.0)
        fit_network(work, c.nodes, c.cores_per_node, False)
        for launch in range(a.launches):
            p = subprocess.run([c.mpiexec, "-n", str(a.ranks), PY, "-c", EXCHANGE, str(a.reps),
                                *map(str, sizes)], env=env(), capture_output=True, text=True,
                               timeout=3600)
            if p.returncode:
                print(p.stderr[-1500:], file=sys.stderr)
                return 1
            for key, t in json.loads(p.stdout.strip().splitlines()[-1]).items():
                measured.setdefault(key, []).append(t)
            print(f"launch {launch + 1} of {a.launches} done", flush=True)
    print(f"N = {a.ranks}, {share_for(a.ranks):g} CPU a core; platform {work}/platform.yaml")
    print("| case | bytes | measured ms (each launch) | netsim ms | measured / netsim |")
    print("|---|---|---|---|---|")
    for s in sizes:
        for case in CASES:
            m = measured[f"{case} {s}"]
            p = priced(case, a.ranks, s, a.reps, work / "platform.yaml", work)
            mean = sum(m) / len(m)
            print(f"| {case} | {s} | {1e3 * mean:.1f} ({', '.join(f'{1e3 * x:.1f}' for x in m)})"
                  f" | {1e3 * p:.1f} | {mean / p:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
