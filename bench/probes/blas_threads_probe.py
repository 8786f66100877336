"""Do a threaded BLAS's helper threads inflate a process's CPU seconds when
processes share the cores?  (Why cg's trace at 8 ranks on 2 cores had
5x the CPU seconds of its replay alone.)

    python bench/probes/blas_threads_probe.py [--procs 1,2,8] [--n 184320]

Starts P processes at once, no MPI; each repeats a dot product of two
vectors of ``--n`` doubles (cg's at 8 ranks) with elementwise work
between, once with the BLAS's default threads and once with
OPENBLAS_NUM_THREADS=1.  Printed per P and setting: the median process's
CPU seconds (what the tracer's CPU clock counts), its main thread's, and
its wall seconds.  Same work: any excess of the process over the main
thread is helper threads, working or spinning for a turn.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

CHILD = r"""
import sys, time
import numpy as np
n = int(sys.argv[1])
a, b = np.random.default_rng(0).random((2, n))
c0, t0, w0 = time.process_time(), time.thread_time(), time.perf_counter()
for _ in range(300):
    x = a @ b
    y = a * 1.0001 + b
print(time.process_time() - c0, time.thread_time() - t0, time.perf_counter() - w0)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", default="1,2,8")
    ap.add_argument("--n", type=int, default=184320)
    a = ap.parse_args()
    for p in [int(x) for x in a.procs.split(",")]:
        for threads in (None, "1"):
            env = dict(os.environ)
            for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
                env.pop(v, None)
                if threads:
                    env[v] = threads
            ps = [subprocess.Popen([sys.executable, "-c", CHILD, str(a.n)], env=env,
                                   stdout=subprocess.PIPE, text=True) for _ in range(p)]
            rows = [tuple(map(float, q.communicate()[0].split())) for q in ps]
            proc, main_thread, wall = (statistics.median(r[i] for r in rows) for i in range(3))
            print(f"{p:3d} processes, BLAS threads {threads or 'default'}: process CPU "
                  f"{proc:.3f} s, main thread {main_thread:.3f} s, wall {wall:.3f} s",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
