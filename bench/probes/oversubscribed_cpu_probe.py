"""Does the CPU time of a fixed piece of work grow with the number of
processes sharing the host's cores?  (Why real traces at 128 ranks on 2
cores make extrapolation look wrong.)

    python bench/probes/oversubscribed_cpu_probe.py [--procs 8,32,64,128] [--work 60000]

Starts P processes at once, no MPI; each repeats the same NumPy work
(uneven.py's unit: a vector of ``--work`` doubles, a few passes) 40
times with short sleeps between, as a traced rank alternates work and
waits, and reports its CPU seconds per unit.  Printed per P: the median
over processes, relative to the smallest P.  Same work, same process:
any growth is the host's (caches and TLBs cold after every switch among
more processes), not the application's.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

CHILD = r"""
import sys, time
import numpy as np
n = int(sys.argv[1])
x = np.random.default_rng(0).random(n)
cpu = []
for _ in range(40):
    c0 = time.process_time()
    y = x
    for _ in range(8):
        y = np.sqrt(y * 1.0001 + 0.5)
    cpu.append(time.process_time() - c0)
    time.sleep(0.002)
print(sorted(cpu)[len(cpu) // 2])
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", default="8,32,64,128")
    ap.add_argument("--work", type=int, default=60000)
    a = ap.parse_args()
    base = None
    for p in [int(x) for x in a.procs.split(",")]:
        ps = [subprocess.Popen([sys.executable, "-c", CHILD, str(a.work)],
                               stdout=subprocess.PIPE, text=True) for _ in range(p)]
        per = [float(q.communicate()[0]) for q in ps]
        med = statistics.median(per)
        base = base or med
        print(f"{p:5d} processes: median CPU per unit {1e3 * med:.3f} ms ({med / base:.2f}x)",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
