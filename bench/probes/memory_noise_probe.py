"""Which kind of work does this host's noise slow down?

    python bench/probes/memory_noise_probe.py [--seconds 60] [--blocks 20]
        [--stop-reporting]

The replays and host traces measured here drift by -20 to +20 % within
a minute (bench/tables/partial_replay.md), where a pure-Python meter
beside the runs (host_speed_probe.py) stayed within 0.94-1.02 on a
quieter day.  Could a meter correct for the drift?  This probe times three fixed pieces of work in
turn, in CPU seconds, in one process per CPU at the same time:

- ``python``: a pure-Python loop (the interpreter's own code and data,
  all in the core's caches);
- ``cache``: a 200 x 200 matrix product (numpy, in the core's caches);
- ``memory``: a copy of 64 MiB (numpy, streamed through main memory).

Per kind and CPU: the median time of a piece, then the run cut in
``--blocks`` stretches of time and each stretch's median over the whole
run's (the drift, as least and most, CPU 0 then CPU 1), the correlation
of the two CPUs' stretches (``CPUs``; near 1: the host slows both at
once) and of each kind's stretches with the pure-Python piece's on the
same CPU (``python``; near 1: a pure-Python meter in the same process
would see the drift).  numpy's BLAS is held to one thread: two
processes' helper threads would count each other's waits as CPU time
(blas_threads_probe.py).
``--stop-reporting`` stops the host's free page reporting while it runs
(bench/apps/run.py, ``page_reporting_off``).

Found (2026-12-03, nothing else of ours running, 60 s, stretches of 3
s): every kind drifts, the pure-Python piece 0.72-1.08x of its median,
the in-cache product 0.90-1.20x, the 64 MiB copy 0.83-1.30x; the two
CPUs' stretches correlate weakly (0.03-0.59), and the copy's not at all
with the pure-Python meter's on its own CPU (-0.15; the product's 0.64).
So a meter, beside the work or inside its process, cannot take the
host's drift out of a memory-heavy replay: a quiet node, or rounds
enough to average it, is the remedy.  (Without the one-thread BLAS, the
product's stretches ranged 0.42-3.8x: the helper threads.)
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

# one BLAS thread per process: two processes' helper threads on two CPUs
# would count each other's waits as CPU time (blas_threads_probe.py)
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import numpy as np  # noqa: E402

KINDS = ("python", "cache", "memory")


def _pieces(seconds: float, out):
    """Each kind of work in turn until ``seconds`` have passed: rows of
    (wall time, kind index, CPU seconds)."""
    a = np.random.default_rng(0).random((200, 200))
    src = np.ones(8 << 20)                 # 64 MiB of float64
    dst = np.empty_like(src)

    def python():
        s = 0
        for i in range(20000):
            s += i
        return s

    def cache():
        for _ in range(4):
            a @ a

    def memory():
        np.copyto(dst, src)

    work = (python, cache, memory)
    rows = []
    stop = time.time() + seconds
    while time.time() < stop:
        for k, w in enumerate(work):
            t = time.process_time()
            w()
            rows.append((time.time(), k, time.process_time() - t))
    out.put(np.array(rows))


def drift(rows: np.ndarray, edges: np.ndarray, kind: int) -> np.ndarray:
    """Each stretch's median time of ``kind`` over the whole run's."""
    x = rows[rows[:, 1] == kind]
    whole = np.median(x[:, 2])
    return np.array([np.median(x[(x[:, 0] >= lo) & (x[:, 0] < hi), 2]) / whole
                     for lo, hi in zip(edges[:-1], edges[1:])])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--blocks", type=int, default=20)
    ap.add_argument("--stop-reporting", action="store_true")
    a = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "apps"))
    from run import page_reporting_off
    q: mp.Queue = mp.Queue()
    with page_reporting_off(not a.stop_reporting):
        procs = [mp.Process(target=_pieces, args=(a.seconds, q)) for _ in range(2)]
        for p in procs:
            p.start()
        runs = [q.get() for _ in procs]
        for p in procs:
            p.join()
    t0 = max(r[0, 0] for r in runs)
    t1 = min(r[-1, 0] for r in runs)
    edges = np.linspace(t0, t1, a.blocks + 1)
    print(f"{a.seconds:g} s, two processes at once, {a.blocks} stretches of "
          f"{(t1 - t0) / a.blocks:.1f} s")
    print(f"{'kind':<8}{'median ms':>11}{'least':>8}{'most':>8}{'least':>8}{'most':>8}"
          f"{'CPUs':>7}{'python':>8}")
    meter = [drift(r, edges, 0) for r in runs]
    for k, kind in enumerate(KINDS):
        d = [drift(r, edges, k) for r in runs]
        ms = np.median(runs[0][runs[0][:, 1] == k, 2]) * 1e3
        across = float(np.corrcoef(d[0], d[1])[0, 1])
        within = np.mean([np.corrcoef(d[c], meter[c])[0, 1] for c in range(2)])
        print(f"{kind:<8}{ms:>11.2f}{d[0].min():>8.2f}{d[0].max():>8.2f}"
              f"{d[1].min():>8.2f}{d[1].max():>8.2f}{across:>7.2f}{within:>8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
