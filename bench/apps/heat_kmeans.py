"""Driver for heat's distributed k-means (heat.cluster.KMeans): the
application is heat's; this file only makes data and calls it.

    mpiexec -n 4 python bench/apps/heat_kmeans.py --samples 200000 --features 8 --k 6

Samples are split over the ranks (split=0); every rank draws its own share
from a fixed seed, so runs are repeatable.
"""
import argparse

import heat as ht


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=200000)
    ap.add_argument("--features", type=int, default=8)
    ap.add_argument("--k", type=int, default=6)
    ap.add_argument("--iters", type=int, default=30)
    a = ap.parse_args()
    ht.random.seed(7)
    # k blobs along the diagonal, 4 standard deviations apart
    labels = ht.random.randint(0, a.k, (a.samples, 1), split=0).astype(ht.float32)
    x = ht.random.randn(a.samples, a.features, split=0) + 4.0 * labels
    km = ht.cluster.KMeans(n_clusters=a.k, init="random", max_iter=a.iters, tol=None,
                           random_state=3)
    km.fit(x)
    inertia = km.inertia_
    if x.comm.rank == 0:
        print(f"k-means: {a.samples} x {a.features}, k={a.k}, {km.n_iter_} iterations, "
              f"last centroid shift {float(inertia):.3g}")


if __name__ == "__main__":
    main()
