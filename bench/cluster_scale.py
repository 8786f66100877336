"""Clustering at scale: 100,000 ranks with 1,000-element computation vectors.

    python bench/cluster_scale.py [--ranks 100000] [--length 1000] [--classes 12]

Synthetic workload shaped like a real SPMD trace: a few communication
groups (interior, boundary ranks), each with several work classes, every
rank's vector = its class's per-segment times plus 1 % timing noise.  Reports
wall time and peak memory (RSS) of the selection, and checks that the classes
are recovered.  Goal: under 60 s and 8 GB on the 2-core machine.
"""
from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import pandas as pd


def workload(ranks, length, classes, groups=3, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.uniform(1e-4, 1e-3, (classes, length))
    cls = rng.integers(0, classes, ranks)
    grp = rng.choice(groups, ranks, p=[0.9] + [0.1 / (groups - 1)] * (groups - 1))
    vectors = {}
    for lo in range(0, ranks, 10000):     # generate in chunks: bounded temporaries
        hi = min(lo + 10000, ranks)
        block = base[cls[lo:hi]] * (1 + rng.normal(0, 0.01, (hi - lo, length)))
        for i, r in enumerate(range(lo, hi)):
            vectors[r] = block[i]
    table = pd.DataFrame({"rank": np.arange(ranks), "signature": [f"g{g}" for g in grp],
                          "length": length})
    return table, vectors, cls, grp


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=100000)
    ap.add_argument("--length", type=int, default=1000)
    ap.add_argument("--classes", type=int, default=12)
    a = ap.parse_args()
    from cluster import select
    t0 = time.perf_counter()
    table, vectors, cls, grp = workload(a.ranks, a.length, a.classes)
    t1 = time.perf_counter()
    reps = select(table, vectors)
    t2 = time.perf_counter()
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2
    # recovered: every cluster holds one (group, class), and every pair is split
    pairs = reps.assign(cls=cls, grp=grp).groupby("cluster")[["cls", "grp"]].nunique()
    pure = bool((pairs == 1).all().all())
    n_expected = len(set(zip(grp, cls)))
    print(f"ranks {a.ranks}, vector length {a.length}, {a.classes} work classes x 3 groups")
    print(f"  workload generation {t1 - t0:.1f} s (not counted)")
    print(f"  selection          {t2 - t1:.1f} s, peak RSS {peak_gb:.2f} GB")
    print(f"  clusters {reps['cluster'].nunique()} (expected {n_expected}), pure: {pure}, "
          f"max clustering error {reps['error'].max():.2%}")


if __name__ == "__main__":
    main()
