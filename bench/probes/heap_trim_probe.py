"""Why one parareal iteration takes 0.05 s and the next 0.25 s: glibc's heap trimming.

    python bench/probes/heap_trim_probe.py [--points 20000] [--steps 2000] [--iters 5] [--runs 3]

examples/parareal.py's fine propagator, alone (no MPI), ``--iters`` times
in a fresh process per run, under three allocator settings:

* ``default``: glibc as the application has it (dynamic mmap threshold,
  the heap's top trimmed when more than the trim threshold is free);
* ``kept``: the same, but one small object allocated after the first
  iteration and kept (as a tool's own bookkeeping could be): it can sit
  at the top of the heap, below which nothing is trimmed any more;
* ``notrim``: ``MALLOC_TRIM_THRESHOLD_`` at 1 GiB.  Setting it turns
  glibc's dynamic mmap threshold off as well: every temporary above
  128 kB is then mapped and faulted in anew.

Per iteration: seconds and minor page faults.  An iteration whose
temporaries (``--points`` doubles each, 160 kB by default, a few per step)
are handed back to the kernel and faulted in again at every step is
several times slower than one that reuses them.  Which one an iteration
gets depends on the process's allocation history (the largest chunk
freed so far sets the mmap threshold, and the trim threshold follows it),
so the traced, recorded, replayed and real runs of the same program can
each fall on either side when their other allocations differ.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, "examples")
import numpy as np
from parareal import fine
points, steps, iters, keep = (int(a) for a in sys.argv[1:5])
u = np.exp(-200.0 * (np.linspace(0.0, 1.0, points) - 0.5) ** 2)
out, kept = [], None
for k in range(iters):
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t = time.perf_counter()
    u2 = fine(u, steps, 0.4)
    out.append((time.perf_counter() - t,
                resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0))
    if keep and kept is None:
        kept = bytearray(4096)
print(json.dumps(out))
"""


def run(mode: str, a) -> list:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    if mode == "notrim":
        env["MALLOC_TRIM_THRESHOLD_"] = str(1 << 30)
    p = subprocess.run([sys.executable, "-c", CHILD, str(a.points), str(a.steps), str(a.iters),
                        "1" if mode == "kept" else "0"],
                       capture_output=True, text=True, cwd=ROOT, env=env, check=True)
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=20000)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    print(f"{'mode':<8}{'run':>4}  seconds per iteration (minor page faults)")
    for r in range(a.runs):
        for mode in ("default", "kept", "notrim"):       # alternated
            it = run(mode, a)
            print(f"{mode:<8}{r:>4}  " + "  ".join(f"{s:.3f} ({f})" for s, f in it), flush=True)


if __name__ == "__main__":
    main()
