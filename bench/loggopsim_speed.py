"""Whole-program speed and memory, side by side with LogGOPSim, on one GOAL file.

    bench/build_loggopsim.sh                  # LogGOPSim and txt2bin, -O3
    python bench/loggopsim_speed.py --loggopsim bench/out/loggopsim [--ranks 1024,16384]
                                    [--rounds 3] [--out bench/out/goal] [--baseline DIR]

The schedule (written once per size as GOAL text under ``--out``): per
iteration a computation, a 1-D ring halo exchange (receive from both
neighbours, send to both) and an 8-byte allreduce by recursive doubling
(log2 P rounds of send + receive with the rank's partner); iterations so
that every size has a few million operations.  Each round runs, one
after the other: LogGOPSim's whole process (``txt2bin`` then
``LogGOPSim``, L=2500 o=1500 g=1000 G=6 O=0 S=65535 ns) and netsim's
(``python -m netsim FILE --goal-in --loggops ...``: start-up, reading the
text, simulating, writing the prediction).  Reported per size: the least
wall time and the largest peak RSS over the rounds for each side, their
ratios, and whether both predicted the same finish time (to the ns).
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

ROOT = Path(__file__).resolve().parent.parent
L, o, g, G, O, S = 2500, 1500, 1000, 6, 0, 65535
ITERS = {1024: 100, 16384: 10, 262144: 1}


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


def run_measured(cmd: list[str], cwd: Path = ROOT) -> tuple[float, float, str]:
    """Run ``cmd`` in ``cwd``: (wall seconds, peak RSS in MB, stdout)."""
    t = time.perf_counter()
    env = dict(os.environ, PYTHONPATH=str(cwd))       # that checkout's netsim, not ours
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd,
                         env=env)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode})")
    return wall, usage.ru_maxrss / 1024, out.decode()


def loggopsim(lgs: Path, goal: Path) -> tuple[float, float, float, float]:
    """LogGOPSim's whole process: (txt2bin s, LogGOPSim s, peak MB, finish ns)."""
    b = goal.with_suffix(".bin")
    t1, m1, _ = run_measured([str(lgs / "txt2bin"), "-i", str(goal), "-o", str(b)])
    t2, m2, out = run_measured([str(lgs / "LogGOPSim"), "-f", str(b), "-L", str(L), "-o",
                                str(o), "-g", str(g), "-G", str(G), "-O", str(O), "-S", str(S)])
    b.unlink()
    m = re.search(r"Maximum finishing time at host \d+: (\d+)", out)
    finish = float(m.group(1)) if m else max(float(x) for x in
                                             re.findall(r"Host \d+: (\d+)", out))
    return t1, t2, max(m1, m2), finish


def netsim(goal: Path, root: Path = ROOT) -> tuple[float, float, float]:
    """netsim's whole process, the code under ``root``: (seconds, peak MB,
    finish ns)."""
    pred = goal.with_suffix(".json")
    spec = ",".join(f"{v}e-9" for v in (L, o, g, G, O)) + f",{S}"
    t, m, _ = run_measured([sys.executable, "-m", "netsim", str(goal), "--goal-in",
                            "--loggops", spec, "-o", str(pred)], cwd=root)
    finish = json.loads(pred.read_text())["predicted_time"] * 1e9
    pred.unlink()
    return t, m, finish


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loggopsim", required=True, type=Path,
                    help="directory with LogGOPSim and txt2bin (bench/build_loggopsim.sh)")
    ap.add_argument("--ranks", default="1024,16384,262144")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "goal")
    ap.add_argument("--baseline", type=Path,
                    help="another checkout of this repository (e.g. `git worktree add DIR "
                         "COMMIT`) whose netsim runs too, alternated: old against new")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for p in (int(x) for x in a.ranks.split(",")):
        goal = a.out / f"ring_rd_{p}.goal"
        iters = ITERS.get(p, max(1, 2_000_000 // (p * (5 + 2 * (p.bit_length() - 1)))))
        if not goal.exists():
            print(f"writing {goal} ({iters} iterations)", flush=True)
            write_goal(goal, p, iters)
        ours, theirs, old = [], [], []
        for k in range(a.rounds):
            theirs.append(loggopsim(a.loggopsim, goal))
            ours.append(netsim(goal))
            if a.baseline:
                old.append(netsim(goal, a.baseline))
            print(f"P={p} round {k + 1}: LogGOPSim {theirs[-1][0]:.2f} + {theirs[-1][1]:.2f} s, "
                  f"{theirs[-1][2]:.0f} MB; netsim {ours[-1][0]:.2f} s, {ours[-1][1]:.0f} MB"
                  + (f"; baseline {old[-1][0]:.2f} s, {old[-1][1]:.0f} MB" if old else ""),
                  flush=True)
        lg_best = min(t1 + t2 for t1, t2, _, _ in theirs)
        lg_t2b = min(t1 for t1, _, _, _ in theirs)
        ns_best = min(t for t, _, _ in ours)
        lg_mem = max(m for _, _, m, _ in theirs)
        ns_mem = max(m for _, m, _ in ours)
        same = theirs[0][3] == round(ours[0][2])
        base = (f"{min(t for t, _, _ in old):.2f} s, {max(m for _, m, _ in old):.0f} MB"
                if old else "-")
        rows.append((p, lg_best, lg_t2b, ns_best, ns_best / lg_best, lg_mem, ns_mem,
                     ns_mem / lg_mem, same, base))
    print("\n| P | LogGOPSim whole process s (txt2bin) | netsim whole process s | netsim / "
          "LogGOPSim | peak MB LogGOPSim / netsim | RSS ratio | same finish time | baseline "
          "netsim |")
    print("|---|---|---|---|---|---|---|---|")
    for p, lg, t2b, ns, ratio, lm, nm, mr, same, base in rows:
        print(f"| {p:,} | {lg:.2f} ({t2b:.2f}) | {ns:.2f} | {ratio:.2f} | {lm:.0f} / {nm:.0f} "
              f"| {mr:.2f} | {'yes' if same else 'NO'} | {base} |")


if __name__ == "__main__":
    main()
