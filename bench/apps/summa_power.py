"""Driver for a distributed dense product: the largest singular value of a
random n x n matrix by block power iteration, every product by
pylops-mpi's SUMMA operator (MPIMatrixMult, kind="summa") on a square grid
of ranks.  A product broadcasts blocks of A along the grid's rows and
blocks of X along its columns and multiplies them locally; the adjoint
sends blocks of A point to point; the norm is an Allreduce.  The
application is pylops-mpi's; this file only chooses sizes and iterates.

    mpiexec -n 16 python bench/apps/summa_power.py --n 2700 --iters 4

Each rank's blocks come from a seed of their place in the grid, so the
printed estimate is the same at every run.
"""
import argparse
import os

# one BLAS thread per process: every rank is a process already
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pylops_mpi  # noqa: E402
from mpi4py import MPI  # noqa: E402
from pylops_mpi.basicoperators.MatrixMult import (  # noqa: E402
    MPIMatrixMult,
    active_grid_comm,
    local_block_split,
)


def block(shape: tuple, rank: int, comm, seed: int) -> np.ndarray:
    """This rank's block of a random matrix of ``shape`` (seeded by the
    block's place, so the same whatever the run)."""
    rows, cols = local_block_split(shape, rank, comm)
    rng = np.random.default_rng([seed, rows.start, cols.start])
    return rng.standard_normal((rows.stop - rows.start, cols.stop - cols.start))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=600, help="rows and columns of A (default 600)")
    ap.add_argument("--m", type=int, help="columns of the block of vectors X (default n)")
    ap.add_argument("--iters", type=int, default=4, help="power iterations (default 4)")
    a = ap.parse_args()
    m = a.m or a.n
    comm, rank, _, _, active = active_grid_comm(MPI.COMM_WORLD, a.n, m)
    if not active:
        return
    op = MPIMatrixMult(block((a.n, a.n), rank, comm, 1), m, base_comm=comm, kind="summa",
                       dtype="float64")
    x_local = block((a.n, m), rank, comm, 2)
    x = pylops_mpi.DistributedArray(global_shape=a.n * m,
                                    local_shapes=comm.allgather(x_local.size),
                                    base_comm=comm, partition=pylops_mpi.Partition.SCATTER,
                                    dtype="float64")
    x[:] = x_local.ravel()
    sigma2 = 0.0
    for _ in range(a.iters):
        y = op @ x
        x = op.H @ y                 # (A^T A) X
        sigma2 = x.norm()            # grows by sigma^2 per iteration, X normalised
        x = x * (1.0 / sigma2)
    if comm.rank == 0:
        print(f"summa power iteration: n {a.n} m {m} iters {a.iters} "
              f"sigma {np.sqrt(sigma2):.6e}", flush=True)


if __name__ == "__main__":
    main()
