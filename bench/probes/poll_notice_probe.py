"""How late a polling loop notices what it waits for, and what that does
to a task pool's prediction.

    python bench/probes/poll_notice_probe.py [--out DIR] [--gap 0.002] [--tasks 60]

First table: at two ranks, rank 1 sends a message at a random moment
while rank 0 polls for it with ``--gap`` seconds of sleep between polls:
by Iprobe, by Improbe, by Test of a posted Irecv, and by Iprobe called
twice per poll; the median delay from the send to the poll that saw it.
Half a gap is what a loop notices late on average when the first call
after the arrival reports it; MPICH's Iprobe reports it one call later
(1.5 gaps).  Second table: a single-threaded task pool in mpi4py.futures'
pattern (the master sends a task and polls Iprobe with a backoff of 1 ms
at most; the worker computes ``--task`` seconds, Issends the result and
polls its Test), traced once, then simulated from its own trace on
config/platforms/this-machine.yaml with ``probe_late_polls`` 0 and 1,
each against the traced run's wall time.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
MPIEXEC = str(Path(PY).parent / "mpiexec")
ENV_QUIET = {"MPIR_CVAR_ENABLE_HEAVY_YIELD": "0"}

NOTICE = '''
import random, statistics, sys, time
from mpi4py import MPI
c = MPI.COMM_WORLD
gap = float(sys.argv[1])
for kind in ("iprobe", "improbe", "test of irecv", "iprobe twice"):
    delays = []
    for k in range(40):
        c.Barrier()
        if c.rank == 1:
            time.sleep(0.005 + random.random() * 0.004)
            t = MPI.Wtime()
            c.send(k, 0, 0)
            c.send(t, 0, 1)
            continue
        if kind == "test of irecv":
            r = c.irecv(source=1, tag=0)
            while not r.test()[0]:
                time.sleep(gap)
        else:
            m = None
            while True:
                if kind == "iprobe" and c.iprobe(1, 0):
                    break
                if kind == "iprobe twice" and (c.iprobe(1, 0) or c.iprobe(1, 0)):
                    break
                if kind == "improbe":
                    m = c.improbe(1, 0)
                    if m is not None:
                        break
                time.sleep(gap)
            m.recv() if m is not None else c.recv(source=1, tag=0)
        seen = MPI.Wtime()
        delays.append(seen - c.recv(source=1, tag=1))
    if c.rank == 0:
        print(f"{kind:>14s} {1e3 * statistics.median(delays):10.2f} "
              f"{statistics.median(delays) / gap:10.2f}")
'''

POOL = '''
import sys, time
from mpi4py import MPI
c = MPI.COMM_WORLD
TASK, TASKS = float(sys.argv[1]), int(sys.argv[2])


class Backoff:
    def __init__(self, most=0.001):
        self.t, self.most = 0.0, most

    def reset(self):
        self.t = 0.0

    def sleep(self):
        time.sleep(self.t)
        self.t = min(self.most, max(self.most / 1024, 2 * self.t))


b, st = Backoff(), MPI.Status()
if c.rank == 0:
    for k in range(TASKS):
        req = c.issend(k, 1, 0)
        b.reset()
        while not c.iprobe(1, 0, st):
            b.sleep()
        c.recv(None, 1, 0)
        req.Free()
    c.send(None, 1, 0)
else:
    while True:
        b.reset()
        while not c.iprobe(0, MPI.ANY_TAG, st):
            b.sleep()
        if c.recv(None, 0, MPI.ANY_TAG) is None:
            break
        t0 = time.process_time()
        while time.process_time() - t0 < TASK:
            pass
        r = c.issend(bytearray(16000), 0, 0)
        b.reset()
        while not r.test()[0]:
            b.sleep()
'''


def sh(cmd, **env) -> str:
    import os
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=ROOT,
                       env=dict(os.environ, **env))
    if p.returncode:
        raise SystemExit(f"{' '.join(map(str, cmd))}: {p.stderr[-600:]}")
    return p.stdout


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="/tmp/poll_notice_probe", help="work directory")
    ap.add_argument("--gap", type=float, default=0.002, help="sleep between polls (s)")
    ap.add_argument("--task", type=float, default=0.035, help="CPU seconds per task")
    ap.add_argument("--tasks", type=int, default=60)
    a = ap.parse_args(argv)
    d = Path(a.out)
    d.mkdir(parents=True, exist_ok=True)
    (d / "notice.py").write_text(NOTICE)
    (d / "pool.py").write_text(POOL)
    print(f"a message sent while rank 0 polls, {1e3 * a.gap:g} ms of sleep between polls")
    print(f"{'polled by':>14s} {'late ms':>10s} {'in gaps':>10s}")
    print(sh([MPIEXEC, "-n", 2, PY, d / "notice.py", a.gap], **ENV_QUIET), end="")
    from contracts.trace import load_trace
    sh([MPIEXEC, "-n", 2, PY, "-m", "instrument", "trace", "-o", d / "trace", "--force",
        d / "pool.py", a.task, a.tasks], MPIR_CVAR_ENABLE_HEAVY_YIELD="1")
    wall = float(load_trace(str(d / "trace")).events["t_end"].max())
    print(f"\na task pool of {a.tasks} tasks of {a.task:g} s, traced: {wall:.4f} s")
    print(f"{'probe_late_polls':>16s} {'simulated s':>12s} {'error':>8s}")
    plat = yaml.safe_load((ROOT / "config" / "platforms" / "this-machine.yaml").read_text())
    for late in (0, 1):
        plat["network"]["probe_late_polls"] = late
        (d / f"late{late}.yaml").write_text(yaml.safe_dump(plat))
        sh([PY, "-m", "netsim", d / "trace", "--platform", d / f"late{late}.yaml", "--vector",
            "comp", "-o", d / f"late{late}.json"])
        t = json.loads((d / f"late{late}.json").read_text())["predicted_time"]
        print(f"{late:>16d} {t:>12.4f} {100 * (t - wall) / wall:>+7.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
