"""Side by side with LogGOPSim on the same GOAL schedules.

    python bench/loggopsim_compare.py --loggopsim PATH/TO/LogGOPSim [--txt2bin PATH]

LogGOPSim (https://github.com/spcl/LogGOPSim) is built separately (its
src/LogGOPSim Makefile: needs gengetopt, re2c, libgraphviz-dev).  For each
schedule (every decomposed collective algorithm at several sizes and rank
counts, eager and rendezvous, and real traces of the examples lowered with
decomposed collectives), the schedule is written as GOAL, run by LogGOPSim
with L, o, g, G, O, S in ns, and by ``python -m netsim --goal-in
--loggops`` with the same values; every rank's finish time is compared.
Reported: schedules, ranks compared, how many finish times agree exactly
(to the ns LogGOPSim prints), the largest difference.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

L, o, g, G, O, S = 2500, 1500, 1000, 6, 0, 65535


def ours(goal: str, tmp: Path) -> list[float]:
    out = tmp / "o.json"
    subprocess.run([sys.executable, "-m", "netsim", goal, "--goal-in", "--loggops",
                    f"{L}e-9,{o}e-9,{g}e-9,{G}e-9,{O}e-9,{S}", "-o", str(out)],
                   check=True, capture_output=True, cwd=ROOT)
    return [r["finish"] * 1e9 for r in json.loads(out.read_text())["ranks"]]


def theirs(goal: str, lgs: str, t2b: str, tmp: Path) -> list[float]:
    b = tmp / "s.bin"
    subprocess.run([t2b, "-i", goal, "-o", str(b)], check=True, capture_output=True)
    p = subprocess.run([lgs, "-f", str(b), "-L", str(L), "-o", str(o), "-g", str(g), "-G",
                        str(G), "-O", str(O), "-S", str(S)],
                       check=True, capture_output=True, text=True)
    hosts = dict((int(a), float(t)) for a, t in re.findall(r"Host (\d+): (\d+)", p.stdout))
    return [hosts[i] for i in sorted(hosts)]


def schedules(tmp: Path):
    from test_netsim import collective_schedule

    from interop.goal import write_goal
    cases = [(f, a) for f, algs in (("bcast", ["binomial", "linear"]),
                                    ("reduce", ["binomial"]),
                                    ("allreduce", ["recursive_doubling", "ring",
                                                   "rabenseifner", "binomial"]),
                                    ("allgather", ["ring", "recursive_doubling"]),
                                    ("alltoall", ["pairwise"]), ("barrier", ["dissemination"]),
                                    ("scan", ["recursive_doubling"]),
                                    ("gather", ["binomial", "linear"]))
             for a in algs]
    for fam, alg in cases:
        for p in (4, 7, 16):
            for n in (8, 4096, 200000):          # the last one: rendezvous
                path = tmp / f"{fam}-{alg}-{p}-{n}.goal"
                write_goal(str(path), collective_schedule(fam, alg, p, n))
                yield path.name, str(path)


def traced(tmp: Path):
    """Real traces of the examples, lowered with decomposed collectives."""
    from conftest import EXAMPLES, trace
    plat = tmp / "p.yaml"
    plat.write_text("nodes: 64\ncores_per_node: 1\nnetwork:\n  levels:\n"
                    "    - {latency: 2.5e-6, byte_time: 6e-9}\n"
                    "  overhead: {send: 1.5e-6, recv: 1.5e-6}\n  gap: 1e-6\n"
                    "  eager_limit: 65535\n  semantics: loggopsim\n"
                    "collectives: {default: binomial, allreduce: recursive_doubling}\n")
    for name, n, args in (("jacobi", 4, ["--n", "128", "--iters", "20"]),
                          ("cg", 4, ["--n", "4000", "--iters", "10"]),
                          ("uneven", 6, ["--iters", "5", "--work", "20000"]),
                          ("master_worker", 4, ["--tasks", "12"])):
        t = tmp / f"trace-{name}"
        trace(n, t, [EXAMPLES / f"{name}.py"] + args)
        goal = tmp / f"{name}.goal"
        subprocess.run([sys.executable, "-m", "netsim", str(t), "--platform", str(plat),
                        "-o", str(tmp / "x.json"), "--goal-out", str(goal)], check=True,
                       capture_output=True, cwd=ROOT)
        yield f"{name} trace ({n} ranks)", str(goal)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loggopsim", required=True)
    ap.add_argument("--txt2bin", help="default: next to LogGOPSim")
    a = ap.parse_args()
    t2b = a.txt2bin or os.path.join(os.path.dirname(a.loggopsim), "txt2bin")
    tmp = Path(tempfile.mkdtemp())
    n_sched = n_ranks = exact = 0
    worst = (0.0, "")
    import itertools
    for name, path in itertools.chain(schedules(tmp), traced(tmp)):
        x, y = ours(path, tmp), theirs(path, a.loggopsim, t2b, tmp)
        n_sched += 1
        for u, v in zip(x, y):
            n_ranks += 1
            d = abs(u - v)
            exact += d < 1.0
            if d > worst[0]:
                worst = (d, f"{name}: {u:.0f} vs {v:.0f} ns")
    print(f"schedules {n_sched}, rank finish times compared {n_ranks}, "
          f"equal to the ns {exact} ({exact / n_ranks:.1%})")
    print(f"largest difference: {worst[0]:.0f} ns" + (f" ({worst[1]})" if worst[1] else ""))


if __name__ == "__main__":
    main()
