"""Driver for an MCMC run farmed out by a master-worker pool: emcee's
ensemble sampler evaluates its walkers' log-probabilities through
schwimmbad's MPIPool (the master polls ``Iprobe(ANY_SOURCE)`` without
sleeping while the workers compute).  The applications are emcee's and
schwimmbad's; this file only defines the model and calls them.

    mpiexec -n 4 python bench/apps/emcee_pool.py --walkers 16 --steps 40

The model: a linear fit with a Gaussian likelihood over a fixed synthetic
data set, made costly on purpose (``--points``) as real likelihoods are.
Fixed seeds make the chain, and the printed summary, repeatable.
"""
import argparse
import os
import sys

# one BLAS thread per process, as emcee's documentation asks of pools:
# every rank of the pool is a process already
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import emcee  # noqa: E402
import numpy as np  # noqa: E402
from schwimmbad import MPIPool  # noqa: E402

X = Y = np.zeros(0)


def data(points: int) -> tuple:
    """The synthetic data set: ``points`` noisy samples of a line."""
    x = np.linspace(0.0, 10.0, points)
    return x, 1.5 * x - 0.7 + np.random.default_rng(11).normal(0.0, 0.5, points)


def log_prob(theta):
    a, b, log_s = theta
    s2 = np.exp(2.0 * log_s)
    r = Y - (a * X + b)
    return -0.5 * float(np.dot(r, r)) / s2 - X.size * log_s


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--walkers", type=int, default=16)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--points", type=int, default=200_000,
                    help="data points: the cost of one log-probability (default 200000)")
    a = ap.parse_args()
    global X, Y
    X, Y = data(a.points)           # every rank: the workers evaluate on it
    with MPIPool() as pool:
        if not pool.is_master():
            pool.wait()
            sys.exit(0)
        np.random.seed(5)
        start = np.array([1.0, 0.0, 0.0]) + 1e-2 * np.random.randn(a.walkers, 3)
        sampler = emcee.EnsembleSampler(a.walkers, 3, log_prob, pool=pool)
        sampler.run_mcmc(start, a.steps, progress=False)
        chain = sampler.get_chain(discard=a.steps // 2, flat=True)
        print(f"emcee: {a.walkers} walkers x {a.steps} steps, posterior mean "
              f"{' '.join(f'{m:.6f}' for m in chain.mean(axis=0))}", flush=True)
    # schwimmbad closes the pool again at exit (an atexit hook), sending a
    # second stop to workers that may have finalised by then: at 16 ranks
    # over TCP one such run was killed.  Closed once is enough.
    pool.workers = set()


if __name__ == "__main__":
    main()
