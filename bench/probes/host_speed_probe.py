"""What makes the virtual cores' untraced runs differ from each other?

    python bench/probes/host_speed_probe.py [--app jacobi] [--runs 6] [--ranks 16]
        [--first RECIPE] [--flush] [--stop-reporting]

The untraced runs of one application on the emulated cluster of virtual
cores differ by 8-26 % at N = 16 (bench/RESULTS.md, "Virtual cores").
Two suspects, measured side by side:

- the host's own speed: a *meter* beside the runs, two processes, one
  per CPU, each in a CPU-quota group of its own (a share of 0.025),
  timing a fixed piece of pure-Python work in CPU seconds.  Per run: the
  meter's speed over the run (work per CPU second, over its median) and
  the CPU it got against its quota (below 1: the CPUs were oversubscribed);
- the first run: per run, the kernel's page faults (/proc/vmstat);
  ``--first RECIPE`` runs another application once before, ``--flush``
  empties every node's TCP metrics cache before each run.

Found (2026-11-29, jacobi, cg, uneven at N = 16): the meter's speed stays
within 0.94-1.02 and its CPU within 0.94-0.98 of its quota on a quiet
host, while the first run of jacobi and cg takes 1.4-1.7x the next ones
(uneven's, with little memory, does not); another application before it
does not help, neither do emptied neighbour or TCP metrics tables, and
the page faults are the same in number.  The host is a virtual machine
that hands free memory back to its hypervisor (virtio-balloon free page
reporting, /sys/module/page_reporting): the first run to touch that
memory again pays a fault in the hypervisor per page, which the guest
sees as the rank's CPU time, dilated 1/F on a virtual core.  A second
probe right after the first (its memory not yet handed back) has no slow
first run, and with the reporting stopped (``--stop-reporting``) only the
very first run after the stop is slow.  Hence bench/virtual_cores.py
stops it, writes the free memory once (2.7 s a GiB the first time, 0.2
s after), and runs each application once before its rounds.

Needs root and the cgroup v1 cpu controller (as virtual cores do).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path[:0] = [str(ROOT), str(HERE.parent), str(HERE.parent / "apps")]
from run import PY, app_args, env, load_recipes, page_reporting_off  # noqa: E402
from virtual_cores import virtual_cluster  # noqa: E402

from emulate.cores import CPU_CONTROLLER  # noqa: E402
from emulate.isolate import MARK, enter, isolated  # noqa: E402
from validate import measure  # noqa: E402

METER = r"""
import os, sys, time, json, signal
out, cpu = sys.argv[1], int(sys.argv[2])
os.sched_setaffinity(0, {cpu})
rows = []
def stop(*_):
    with open(out, "w") as f:
        json.dump(rows, f)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
while True:
    c0, w0 = time.thread_time(), time.time()
    x = 0
    for i in range(20000):
        x += i
    rows.append((time.time(), time.thread_time() - c0, w0))
"""


VMSTAT = ("pgmajfault", "pgfault", "pswpin", "pgsteal_kswapd", "pgsteal_direct")


def vmstat() -> dict:
    """The kernel's memory counters of interest (/proc/vmstat)."""
    out = {}
    for line in Path("/proc/vmstat").read_text().splitlines():
        key, value = line.split()
        if key in VMSTAT:
            out[key] = int(value)
    return {k: out.get(k, 0) for k in VMSTAT}


def meters(folder: str, share: float, work: Path) -> list:
    """Start one meter per CPU in a quota group of its own; their processes."""
    os.makedirs(folder, exist_ok=True)
    procs = []
    for cpu in sorted(os.sched_getaffinity(0)):
        group = os.path.join(folder, f"meter{cpu}")
        os.makedirs(group, exist_ok=True)
        Path(group, "cpu.cfs_period_us").write_text("40000")
        Path(group, "cpu.cfs_quota_us").write_text(str(round(share * 40000)))
        p = subprocess.Popen([sys.executable, "-c", METER, str(work / f"meter{cpu}.json"),
                              str(cpu)])
        Path(group, "cgroup.procs").write_text(str(p.pid))
        procs.append(p)
    return procs


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--app", default="jacobi")
    ap.add_argument("--recipes", default=str(HERE.parent / "apps" / "virtual.yaml"))
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--meter-share", type=float, default=0.025)
    ap.add_argument("--flush", action="store_true",
                    help="flush every node's neighbour (ARP) table before each run")
    ap.add_argument("--stop-reporting", action="store_true",
                    help="stop free page reporting for the probe (restored after)")
    ap.add_argument("--first", help="run this recipe once before the measured runs (a warm-up)")
    a = ap.parse_args(argv)
    if os.environ.get(MARK) != "1":
        return isolated([PY, str(Path(__file__).resolve())] + argv)
    enter()
    with page_reporting_off(not a.stop_reporting):
        return probe(a)


def probe(a) -> int:
    """The runs with the meters on, and what they show."""
    recipe = dict(load_recipes(a.recipes)[a.app], ranks=a.ranks)
    app = app_args(recipe)
    work = Path(f"/tmp/host_speed_probe.{os.getpid()}")
    work.mkdir()
    folder = os.path.join(CPU_CONTROLLER, f"repreplay-meter-{os.getpid()}")
    windows = []
    with virtual_cluster("hsp", a.ranks, log=lambda s: None) as c:
        procs = meters(folder, a.meter_share, work)
        try:
            if a.first:
                first = app_args(dict(load_recipes(a.recipes)[a.first], ranks=a.ranks))
                s = measure(first, a.ranks, 1, c.mpiexec, env=env(), log=lambda s: None,
                            timeout=1800)["measured"]
                print(f"{a.first} first: {s:.3f} s", flush=True)
            for k in range(a.runs):
                if a.flush:
                    for n in range(c.nodes):
                        subprocess.run(["ip", "-n", c.namespace(n), "tcp_metrics", "flush", "all"],
                                       check=True)
                t0, v0 = time.time(), vmstat()
                s = measure(app, a.ranks, 1, c.mpiexec, env=env(), log=lambda s: None,
                            timeout=1800)["measured"]
                windows.append((t0, time.time(), s))
                v1 = vmstat()
                print(f"run {k + 1}: {s:.3f} s; " + ", ".join(
                    f"{key} {v1[key] - v0[key]}" for key in VMSTAT), flush=True)
        finally:
            for p in procs:
                p.send_signal(signal.SIGTERM)
                p.wait()
            for g in os.listdir(folder) if os.path.isdir(folder) else []:
                if os.path.isdir(os.path.join(folder, g)):
                    os.rmdir(os.path.join(folder, g))
            os.rmdir(folder)
    samples = [r for f in work.glob("meter*.json") for r in json.loads(f.read_text())]
    speed_all = statistics.median(1 / u for _, u, _ in samples)
    rows = []
    for t0, t1, s in windows:
        inside = [1 / u for t, u, _ in samples if t0 <= t <= t1]
        v = statistics.mean(inside) / speed_all if inside else float("nan")
        # the CPU the meters got over the run, against their quota
        cpu = sum(u for t, u, _ in samples if t0 <= t <= t1)
        got = cpu / ((t1 - t0) * a.meter_share * len(procs))
        rows.append((s, v, s * v))
        print(f"{s:8.3f} s  meter speed {v:6.3f}, CPU got / quota {got:5.3f} "
              f"({len(inside)} samples)  at median speed {s * v:8.3f} s")
    for i, label in ((0, "seconds"), (2, "seconds x speed")):
        vals = [r[i] for r in rows]
        print(f"{label}: spread (max/min - 1) {max(vals) / min(vals) - 1:.1%}, "
              f"cv {statistics.stdev(vals) / statistics.mean(vals):.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
