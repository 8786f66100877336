"""Where uneven's real runs on virtual cores lose 20 %: page faults every other iteration.

    python bench/probes/vcore_faults_probe.py [--rounds 2] [--ranks 16]

examples/uneven.py's heaviest class alone, on every rank of the emulated
cluster of virtual cores (N = 16, F = 0.1): 6 iterations of 3 units of
its NumPy work (8 MB arrays, temporaries made and freed at every step),
with an Allreduce after each iteration (``sync``, as uneven has) or none
(``free``, as a replay's copies run: their MPI is the replay's own),
interleaved.  Per iteration, the median rank's CPU seconds per unit of
work, its minor page faults and its system seconds.

Found (2026-11-30, 2 rounds, and 5 earlier runs alike): with an
Allreduce per iteration, every other iteration (the 2nd, 4th, 6th)
faults 16,000-20,000 pages in again and spends 0.05-0.06 s of system time
doing so (0.045-0.056 s of CPU per unit against 0.029-0.036 in the
iterations between, which fault none); without it no iteration faults
(0.032-0.038 s per unit).  At 0.1 of a CPU that is 1.5-1.8 s over 6
iterations: uneven's whole gap between its real runs (8.2 s) and its
prediction (6.5 s).  Its replays' copies ran at 0.031-0.040 s per unit,
steady.  Whether glibc hands the freed temporaries back to the kernel
(heap_trim_probe.py) depends on what else the process allocated, here in
the Allreduce (mpi4py's pickled object, MPICH's own buffers), which the
replay, whose MPI is its own, does not allocate alike.  Not the
emulator's doing: the same faults cost the same CPU seconds on a real
core; the replay does not take them.  Since 2026-11-30 the tracer and
the replay count every span's faults and replay.expand charges the
difference at the node's cost per fault (docs/METHODS.md, "The
application's own heap").

Needs root and the cgroup v1 cpu controller (as virtual cores do).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path[:0] = [str(ROOT), str(HERE.parent), str(HERE.parent / "apps")]
from run import PY, env, page_reporting_off  # noqa: E402
from virtual_cores import virtual_cluster  # noqa: E402

from emulate.isolate import MARK, enter, isolated  # noqa: E402

KERNEL = r"""
import json, resource, sys, time
import numpy as np
from mpi4py import MPI
sync = sys.argv[1] == "sync"
comm = MPI.COMM_WORLD
x = np.linspace(0.0, 1.0, 1000000) + comm.rank
comm.Barrier()
rows = []
for it in range(6):
    u0, c0 = resource.getrusage(resource.RUSAGE_SELF), time.process_time()
    for _ in range(3):
        for _ in range(10):
            x = np.sqrt(x * x + 1.0) - 0.5 * x
    u1 = resource.getrusage(resource.RUSAGE_SELF)
    rows.append((time.process_time() - c0, u1.ru_minflt - u0.ru_minflt, u1.ru_stime - u0.ru_stime))
    if sync:
        comm.allreduce(float(x[0]))
rows = comm.gather(rows)
if comm.rank == 0:
    print(json.dumps(rows))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--ranks", type=int, default=16)
    a = ap.parse_args()
    if os.environ.get(MARK) != "1":
        return isolated([PY, str(Path(__file__).resolve())] + sys.argv[1:])
    enter()
    e = dict(env(), MPIR_CVAR_ENABLE_HEAVY_YIELD="0")
    with page_reporting_off(False), virtual_cluster("faults", a.ranks) as c:
        for k in range(a.rounds):
            for mode in ("sync", "free"):
                p = subprocess.run([c.mpiexec, "-n", str(a.ranks), PY, "-c", KERNEL, mode],
                                   env=e, check=True, capture_output=True, text=True,
                                   timeout=600)
                ranks = json.loads(p.stdout.strip().splitlines()[-1])

                def col(j, scale=1.0, ranks=ranks):
                    return [round(statistics.median(r[i][j] for r in ranks) * scale, 4)
                            for i in range(6)]
                print(f"round {k + 1} {mode}: CPU s per unit {col(0, 1 / 3)}, "
                      f"minor faults {col(1)}, system s {col(2)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
