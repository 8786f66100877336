"""Whole-program speed and memory, side by side with LogGOPSim, on one GOAL file.

    bench/build_loggopsim.sh                  # LogGOPSim and txt2bin, -O3
    python bench/loggopsim_speed.py --loggopsim bench/out/loggopsim [--ranks 1024,16384]
                                    [--workloads ring_rd,schedgen2_allreduce]
                                    [--rounds 3] [--out bench/out/goal] [--baseline DIR]

Two workloads (each written once per size as GOAL text under ``--out``),
iterations so that every size has a few million operations:

- ``ring_rd``, this project's: per iteration a computation, a 1-D ring
  halo exchange (receive from both neighbours, send to both) and an
  8-byte allreduce by recursive doubling (log2 P rounds of send + receive
  with the rank's partner);
- ``schedgen2_allreduce``, not ours: LogGOPSim's own schedule generator
  (Schedgen2, in its source tree, which bench/build_loggopsim.sh keeps)
  writes one 64 KiB allreduce by recursive halving and doubling
  (reduce-scatter then allgather, 4 log2 P operations per rank); this
  script repeats it, each repetition behind a computation that waits for
  the previous one.  Each round runs, one
after the other: LogGOPSim's whole process (``txt2bin`` then
``LogGOPSim``, L=2500 o=1500 g=1000 G=6 O=0 S=65535 ns) and netsim's
(``python -m netsim FILE --goal-in --loggops ...``: start-up, reading the
text, simulating, writing the prediction).  Reported per size: the least
wall time and the largest peak RSS over the rounds for each side, their
ratios, the least time each spent in its simulation loop alone (LogGOPSim:
from after reading its schedule to the end of its loop, timed by a line
that bench/build_loggopsim.sh adds; netsim: the engine's call, which
``python -m netsim`` prints), and whether both predicted the same finish
time (to the ns).
``--baseline DIR`` runs another checkout's netsim in every round too (old
against new, alternated).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
L, o, g, G, O, S = 2500, 1500, 1000, 6, 0, 65535
ITERS = {1024: 100, 16384: 10, 262144: 1}
ALLREDUCE_ITERS = {1024: 60, 16384: 4, 262144: 1}


def write_goal(path: Path, p: int, iters: int) -> int:
    """The benchmark schedule for ``p`` ranks (a power of two) as GOAL; its ops."""
    k = p.bit_length() - 1
    ops = 0
    tmp = path.with_suffix(".part")
    with open(tmp, "w") as f:
        f.write(f"num_ranks {p}\n")
        for r in range(p):
            left, right = (r - 1) % p, (r + 1) % p
            lines = [f"rank {r} {{"]
            n = 0
            last: list[int] = []
            for _ in range(iters):
                calc = n
                lines.append(f"l{calc}: calc {1000 + 50 * (r % 7)}")
                lines += [f"l{calc} requires l{x}" for x in last]
                halo = [n + 1, n + 2, n + 3, n + 4]
                lines += [f"l{n + 1}: recv 8192b from {left} tag 1",
                          f"l{n + 2}: recv 8192b from {right} tag 2",
                          f"l{n + 3}: send 8192b to {right} tag 1",
                          f"l{n + 4}: send 8192b to {left} tag 2"]
                lines += [f"l{h} requires l{calc}" for h in halo]
                n += 5
                last = halo
                for j in range(k):
                    q = r ^ (1 << j)
                    lines += [f"l{n}: send 8b to {q} tag {10 + j}",
                              f"l{n + 1}: recv 8b from {q} tag {10 + j}"]
                    lines += [f"l{a} requires l{x}" for a in (n, n + 1) for x in last]
                    last = [n, n + 1]
                    n += 2
            lines.append("}\n")
            ops += n
            f.write("\n".join(lines))
    os.replace(tmp, path)
    return ops


def write_schedgen2_allreduce(path: Path, p: int, iters: int, schedgen2: Path) -> int:
    """Schedgen2's 64 KiB recursive-doubling allreduce at ``p`` ranks,
    repeated ``iters`` times, as GOAL; its ops.  Each repetition's first
    operations wait for a computation that waits for the previous
    repetition's last ones (what Schedgen2's own ``Append`` does)."""
    if not (schedgen2 / "schedgen.py").exists():
        raise SystemExit(f"{schedgen2}: no schedgen.py (LogGOPSim's Schedgen2): give "
                         "--schedgen2 LOGGOPSIM_SOURCE/src/Schedgen2")
    one = path.with_suffix(".one")
    subprocess.run([sys.executable, "schedgen.py", "allreduce", "--ptrn", "recdoub",
                    "--comm_size", str(p), "--datasize", "65536", "--output", str(one)],
                   cwd=schedgen2, check=True)
    tmp = path.with_suffix(".part")
    ops = 0
    with open(one) as src, open(tmp, "w") as out:
        rank, block = -1, list[str]()
        for line in src:
            line = line.strip()
            if line.startswith("num_ranks"):
                out.write(line + "\n")
            elif line.startswith("rank "):
                rank, block = int(line.split()[1]), []
            elif line == "}":
                ops += _repeat_block(out, rank, block, iters)
            elif line:
                block.append(line)
    one.unlink()
    os.replace(tmp, path)
    return ops


def _repeat_block(out, rank: int, block: list[str], iters: int) -> int:
    """One rank's operations, ``iters`` times, chained by computations."""
    ops: list[tuple[int, str]] = []
    needs: list[tuple[int, int]] = []
    for line in block:
        head, _, rest = line.partition(" ")
        if rest.startswith("requires "):
            needs.append((int(head[1:]), int(rest.split()[1][1:])))
        else:
            ops.append((int(head[1:-1]), rest))
    span = max(x for x, _ in ops) + 1                    # labels per repetition
    waits = {a for a, _ in needs}
    waited_on = {b for _, b in needs}
    first = [x for x, _ in ops if x not in waits]
    last = [x for x, _ in ops if x not in waited_on]
    lines = [f"rank {rank} {{"]
    for i in range(iters):
        base = i * (span + 1)
        calc = base + span                                # the computation's label
        lines.append(f"l{calc}: calc {1000 + 50 * (rank % 7)}")
        if i:
            prev = base - (span + 1)
            lines += [f"l{calc} requires l{prev + x}" for x in last]
        lines += [f"l{base + x}: {text}" for x, text in ops]
        lines += [f"l{base + a} requires l{base + b}" for a, b in needs]
        lines += [f"l{base + x} requires l{calc}" for x in first]
    lines.append("}\n")
    out.write("\n".join(lines) + "\n")
    return iters * (len(ops) + 1)


class Run(NamedTuple):
    wall: float                     # seconds, whole process (LogGOPSim: txt2bin + run)
    mb: float                       # peak RSS, MB (LogGOPSim: the larger of its two)
    loop: float                     # seconds in the simulation loop alone
    finish: float                   # predicted finish time, ns


def run_measured(cmd: list[str], cwd: Path = ROOT) -> tuple[float, float, str]:
    """Run ``cmd`` in ``cwd``: (wall seconds, peak RSS in MB, stdout and stderr)."""
    t = time.perf_counter()
    env = dict(os.environ, PYTHONPATH=str(cwd))       # that checkout's netsim, not ours
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd,
                         env=env)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode})")
    return wall, usage.ru_maxrss / 1024, out.decode(errors="replace")


def loggopsim(lgs: Path, goal: Path) -> tuple[Run, float]:
    """LogGOPSim's whole process, and the seconds of its txt2bin step."""
    b = goal.with_suffix(".bin")
    t1, m1, _ = run_measured([str(lgs / "txt2bin"), "-i", str(goal), "-o", str(b)])
    t2, m2, out = run_measured([str(lgs / "LogGOPSim"), "-f", str(b), "-L", str(L), "-o",
                                str(o), "-g", str(g), "-G", str(G), "-O", str(O), "-S", str(S)])
    b.unlink()
    m = re.search(r"Maximum finishing time at host \d+: (\d+)", out)
    finish = float(m.group(1)) if m else max(float(x) for x in
                                             re.findall(r"Host \d+: (\d+)", out))
    loop = re.search(r"LOOP_SECONDS ([\d.]+)", out)      # bench/build_loggopsim.sh adds it
    return Run(t1 + t2, max(m1, m2), float(loop.group(1)) if loop else float("nan"),
               finish), t1


def netsim(goal: Path, root: Path = ROOT) -> Run:
    """netsim's whole process, the code under ``root``."""
    pred = goal.with_suffix(".json")
    spec = ",".join(f"{v}e-9" for v in (L, o, g, G, O)) + f",{S}"
    t, m, out = run_measured([sys.executable, "-m", "netsim", str(goal), "--goal-in",
                              "--loggops", spec, "-o", str(pred)], cwd=root)
    finish = json.loads(pred.read_text())["predicted_time"] * 1e9
    pred.unlink()
    loop = re.search(r"simulated \d+ events in ([\d.]+) s", out)
    return Run(t, m, float(loop.group(1)), finish)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loggopsim", required=True, type=Path,
                    help="directory with LogGOPSim and txt2bin (bench/build_loggopsim.sh)")
    ap.add_argument("--ranks", default="1024,16384,262144")
    ap.add_argument("--workloads", default="ring_rd,schedgen2_allreduce",
                    help="comma-separated: ring_rd (this project's), schedgen2_allreduce "
                         "(LogGOPSim's generator)")
    ap.add_argument("--schedgen2", type=Path,
                    help="LogGOPSim's src/Schedgen2 (default: under --loggopsim's src/)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "goal")
    ap.add_argument("--baseline", type=Path,
                    help="another checkout of this repository (e.g. `git worktree add DIR "
                         "COMMIT`) whose netsim runs too, alternated: old against new")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    schedgen2 = a.schedgen2 or a.loggopsim / "src" / "src" / "Schedgen2"
    rows = []
    for w, p in ((w, int(x)) for w in a.workloads.split(",") for x in a.ranks.split(",")):
        goal = a.out / f"{w}_{p}.goal"
        if w == "ring_rd":
            iters = ITERS.get(p, max(1, 2_000_000 // (p * (5 + 2 * (p.bit_length() - 1)))))
        elif w == "schedgen2_allreduce":
            iters = ALLREDUCE_ITERS.get(p, max(1, 2_500_000 // (p * 4 * (p.bit_length() - 1))))
        else:
            ap.error(f"--workloads: unknown workload {w!r}")
        if not goal.exists():
            print(f"writing {goal} ({iters} iterations)", flush=True)
            if w == "ring_rd":
                write_goal(goal, p, iters)
            else:
                write_schedgen2_allreduce(goal, p, iters, schedgen2)
        ours, theirs, t2b, old = [], [], [], []
        for k in range(a.rounds):
            lg, t1 = loggopsim(a.loggopsim, goal)
            theirs.append(lg)
            t2b.append(t1)
            ours.append(netsim(goal))
            if a.baseline:
                old.append(netsim(goal, a.baseline))
            print(f"{w} P={p} round {k + 1}: LogGOPSim {lg.wall:.2f} s (loop {lg.loop:.2f}), "
                  f"{lg.mb:.0f} MB; netsim {ours[-1].wall:.2f} s (loop {ours[-1].loop:.2f}), "
                  f"{ours[-1].mb:.0f} MB"
                  + (f"; baseline {old[-1].wall:.2f} s, {old[-1].mb:.0f} MB" if old else ""),
                  flush=True)
        lg_best, ns_best = min(r.wall for r in theirs), min(r.wall for r in ours)
        lg_loop, ns_loop = min(r.loop for r in theirs), min(r.loop for r in ours)
        lg_mem, ns_mem = max(r.mb for r in theirs), max(r.mb for r in ours)
        same = theirs[0].finish == round(ours[0].finish)
        base = (f"{min(r.wall for r in old):.2f} s (loop {min(r.loop for r in old):.2f}), "
                f"{max(r.mb for r in old):.0f} MB" if old else "-")
        rows.append(f"| {w} | {p:,} | {lg_best:.2f} ({min(t2b):.2f}) | {ns_best:.2f} | "
                    f"{ns_best / lg_best:.2f} | {lg_loop:.2f} / {ns_loop:.2f} | "
                    f"{ns_loop / lg_loop:.2f} | {lg_mem:.0f} / {ns_mem:.0f} | "
                    f"{ns_mem / lg_mem:.2f} | {'yes' if same else 'NO'} | {base} |")
    print("\n| workload | P | LogGOPSim whole process s (txt2bin) | netsim whole process s | "
          "netsim / LogGOPSim | loop s LogGOPSim / netsim | loop ratio | "
          "peak MB LogGOPSim / netsim | RSS ratio | same finish time | baseline netsim |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
