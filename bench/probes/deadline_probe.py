"""Virtual cores by CPU quota or by SCHED_DEADLINE: what each adds per synchronisation.

    python bench/probes/deadline_probe.py [--share 0.1] [--iters 60]   # root, cgroup v1 cpu

Two processes, each confined to a share F of a CPU, either by a CPU-quota
group of its own (what `emulate --core-share` does: cfs_quota_us = F x
period) or by SCHED_DEADLINE (runtime F x period, the flag that lets it
fork).  They exchange a token through a pipe (microseconds) after each
piece of work (about 1.4 ms on a free core): "exchange", both work then
swap tokens (ideal: w / F per iteration); "pingpong", one works while the
other waits (ideal: 2 w / F).  Prints the time per iteration against the
ideal, and the virtual time each synchronisation adds beyond it.

2026-11-29, F = 0.1, 1.34 ms of work, 40 iterations: quota (period 10
ms) +0.70 / -5.70 ms per sync (exchange / pingpong), deadline (period 10
ms) +0.85 / -6.65, deadline (period 1 ms) +0.53 / -6.34.  A ping-pong runs
*faster* than on a real slow core under both: each piece of work runs in
one burst at full speed at the start of its process's period, and the
waiting process's period has run out meanwhile.  SCHED_DEADLINE forks with
SCHED_FLAG_RESET_ON_FORK (its children then run unthrottled) and refuses
an affinity narrower than all CPUs, but its runtime is enforced at the
scheduler's tick here as the quota is (bursts of 1.3-2.4 ms at a 0.1 ms
runtime): it quantises no finer, so virtual cores stay on quotas.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import struct
import time
from multiprocessing import Pipe, Process

CG = "/sys/fs/cgroup/cpu/deadline-probe"


def work(n: int) -> None:
    s = 0
    for i in range(n):
        s += i


def calibrate() -> int:
    n = 20000
    while True:
        t = time.perf_counter()
        work(n)
        if time.perf_counter() - t > 0.02:
            return int(n * 0.0014 / (time.perf_counter() - t))
        n *= 2


def deadline(share: float, period_us: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    p = period_us * 1000
    attr = struct.pack("IIQiIQQQ", 48, 6, 1, 0, 0, int(share * p), p, p)   # SCHED_DEADLINE,
    if libc.syscall(314, 0, ctypes.create_string_buffer(attr), 0):        # RESET_ON_FORK
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def quota(name: str, share: float, period_us: int) -> None:
    d = os.path.join(CG, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "cpu.cfs_period_us"), "w") as f:
        f.write(str(period_us))
    with open(os.path.join(d, "cpu.cfs_quota_us"), "w") as f:
        f.write(str(int(share * period_us)))
    with open(os.path.join(d, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))


def rank(me, conn, how, share, period_us, n, iters, pattern, out):
    if how == "quota":
        quota(f"core{me}", share, period_us)
    else:
        deadline(share, period_us)
    conn.send(0)
    conn.recv()                       # both confined before the clock starts
    t = time.perf_counter()
    for _ in range(iters):
        if pattern == "exchange":
            work(n)
            conn.send(1)
            conn.recv()
        elif me == 0:
            work(n)
            conn.send(1)
            conn.recv()
        else:
            conn.recv()
            work(n)
            conn.send(1)
    out.send(time.perf_counter() - t)


def one(how, share, period_us, n, iters, pattern) -> float:
    a, b = Pipe()
    outs = [Pipe() for _ in range(2)]
    ps = [Process(target=rank, args=(i, c, how, share, period_us, n, iters, pattern, o[1]))
          for i, (c, o) in enumerate(zip((a, b), outs))]
    for p in ps:
        p.start()
    secs = [o[0].recv() for o in outs]
    for p in ps:
        p.join()
    return max(secs) / iters


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--share", type=float, default=0.1)
    ap.add_argument("--iters", type=int, default=60)
    a = ap.parse_args()
    n = calibrate()
    t = time.perf_counter()
    work(n)
    w = time.perf_counter() - t
    print(f"work {w * 1e3:.2f} ms on a free core; share {a.share}")
    print("| how | period ms | pattern | ms per iteration | ideal | added per sync, ms |")
    print("|---|---|---|---|---|---|")
    try:
        for how, period in (("quota", max(10000, int(1000 / a.share))), ("deadline", 10000),
                            ("deadline", 1000)):
            for pattern, k in (("exchange", 1), ("pingpong", 2)):
                per = one(how, a.share, period, n, a.iters, pattern)
                ideal = k * w / a.share
                print(f"| {how} | {period / 1000:g} | {pattern} | {per * 1e3:.2f} | "
                      f"{ideal * 1e3:.2f} | {(per - ideal) * 1e3 / k:+.2f} |", flush=True)
    finally:
        for d in ("core0", "core1"):
            if os.path.isdir(os.path.join(CG, d)):
                os.rmdir(os.path.join(CG, d))
        if os.path.isdir(CG):
            os.rmdir(CG)


if __name__ == "__main__":
    main()
