"""Driver for mpipool: its MPIExecutor (a concurrent.futures executor over
MPI: rank 0 submits, the other ranks work; each job a dill pickle sent to
a worker and its result received on a thread of the main rank, polled)
mapping a numerical quadrature over 60 integrands of rising cost.

    mpiexec -n 2 python bench/apps/mpipool_tasks.py --tasks 60
"""
import argparse

import numpy as np
from mpipool import MPIExecutor


def quadrature(k: int) -> float:
    """The integral of sin(k x)^2 exp(-x) over [0, 10], by the trapezoid rule."""
    x = np.linspace(0.0, 10.0, 20_000 + 2_000 * k)
    return float(np.trapezoid(np.sin(k * x) ** 2 * np.exp(-x), x))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=60)
    a = ap.parse_args()
    with MPIExecutor() as pool:
        pool.workers_exit()                 # the workers leave here once the pool closes
        total = sum(pool.map(quadrature, range(1, a.tasks + 1)))
        print(f"sum of integrals {total:.10f}", flush=True)


if __name__ == "__main__":
    main()
