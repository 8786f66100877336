"""What sampling the variability costs: M samples against M simulations.

    python bench/sampling_cost.py [--ranks 1024,262144] [--samples 15] [--iters 4]

The simulator lowers a trace once and re-times it per sample
(netsim/variability.py); a naive sampler would lower and simulate M
times.  Per N, a generated trace (every rank: per iteration a span, a
ring exchange with both neighbours, an 8-byte allreduce; analytic
collectives) is lowered once (``lower``), simulated once (``run``), and
sampled M times with a variability that moves every span
(``samples``, the whole of run_samples, its median sample simulated
again included).  Reported: seconds of each, and the ratio of the
sampled prediction to M times one prediction (lower + run): the goal is
well under 1.  Both sides run in the same process, one after the other.
"""
from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from contracts.trace import Trace  # noqa: E402
from netsim import from_dict, from_trace  # noqa: E402
from netsim import run as simulate  # noqa: E402
from netsim.variability import Variability, run_samples  # noqa: E402

PLATFORM = {"name": "bench", "nodes": 1 << 15, "cores_per_node": 16,
            "network": {"levels": [{"name": "node", "span": 16, "latency": 0.5e-6,
                                    "byte_time": 0.1e-9},
                                   {"name": "fabric", "latency": 1.5e-6, "byte_time": 0.1e-9}],
                        "overhead": {"send": 0.2e-6, "recv": 0.2e-6}}}


def ring_trace(n: int, iters: int) -> Trace:
    """A trace of n ranks: init, iters x (isend right, irecv left, waitall,
    allreduce), finalize; 1 ms spans."""
    per = ["isend", "irecv", "waitall", "allreduce"]
    ops = ["init"] + per * iters + ["finalize"]
    m = len(ops)
    rank = np.repeat(np.arange(n), m)
    op = np.tile(np.array(ops, dtype=object), n)
    kind = np.tile(np.array([0] + [1, 2, 3, 4] * iters + [5]), n)
    right, left = (rank + 1) % n, (rank - 1) % n
    peer = np.select([kind == 1, kind == 2], [right, left], -1)
    req = np.select([kind == 1, kind == 2], [0, 1], -1)
    reqs = [np.array([0, 1]) if k == 3 else None for k in kind]
    nbytes = np.select([kind == 1, kind == 2, kind == 4], [8192, 8192, 8], 0)
    ev = pd.DataFrame({
        "rank": rank, "seq": np.tile(np.arange(m), n), "op": op, "comm": 0, "peer": peer,
        "wildcard": False, "tag": np.where(kind <= 2, 7, -1), "sbytes":
        np.where((kind == 1) | (kind == 4), nbytes, 0), "rbytes":
        np.where((kind == 2) | (kind == 4), nbytes, 0), "req": req, "reqs": reqs,
        "comp": np.where(kind == 0, 0.0, 1e-3), "cpu": np.where(kind == 0, 0.0, 1e-3),
        "rpeer": -1, "rtag": -1, "flags": 0, "polls": 0, "poll_gap": 0.0})
    comms = pd.DataFrame({"comm": [0], "members": [np.arange(n)], "remote": [None]})
    return Trace("generated", {"size": n}, ev, comms, pd.DataFrame(), pd.DataFrame())


def measure(n: int, samples: int, iters: int) -> dict:
    plat = from_dict(PLATFORM, "bench")
    t = ring_trace(n, iters)
    comp = t.events["comp"].to_numpy()
    t0 = time.perf_counter()
    s = from_trace(t, plat, comp)
    lower = time.perf_counter() - t0
    t0 = time.perf_counter()
    one = simulate(s, plat).predicted_time
    run = time.perf_counter() - t0
    table = pd.DataFrame({"representative": 0, "copy": np.arange(4), "core": -1,
                          "factor": [1.0, 1.05, 1.1, 1.2], "sigma_run": 0.02,
                          "sigma_span": 0.05, "rounds": 3})
    var = Variability(table, samples=samples)
    t0 = time.perf_counter()
    res, times, _, _ = run_samples(s, plat, var, np.zeros(n, int), simulate,
                                   events=len(t.events))
    sampled = time.perf_counter() - t0
    return {"ranks": n, "events": len(t.events), "ops": len(s), "lower s": lower,
            "run s": run, f"{samples} samples s": sampled,
            "ratio to M predictions": sampled / (samples * (lower + run)),
            "unsampled": one, "median sample": res.predicted_time}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="1024,262144")
    ap.add_argument("--samples", type=int, default=15)
    ap.add_argument("--iters", type=int, default=4)
    a = ap.parse_args(argv)
    # the engine is compiled on its first call (cached on disk afterwards)
    measure(64, 3, 2)
    rows = [measure(int(n), a.samples, a.iters) for n in a.ranks.split(",")]
    print(f"{datetime.date.today()}, {a.samples} samples, {a.iters} iterations")
    print(pd.DataFrame(rows).to_markdown(index=False, floatfmt=".4g"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
