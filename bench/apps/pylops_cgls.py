"""Driver for pylops-mpi: its CGLS solver on a block-diagonal operator,
each rank's block a dense random matrix (pylops.MatrixMult in an
MPIBlockDiag), the vectors DistributedArrays.  Every iteration applies
the operator and its adjoint locally and reduces norms and dot products
over the ranks (Allreduce), so the work between two synchronisations is
one dense matrix-vector product of the block's size.  The package's own
example (plot_cgls.py) does the same on 20 x 15 blocks; this driver sizes
the blocks and the iterations.

    mpiexec -n 2 python bench/apps/pylops_cgls.py --rows 1500 --cols 1200 --iters 40
"""
import argparse

import numpy as np
import pylops
import pylops_mpi
from mpi4py import MPI


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1500, help="rows of each rank's block")
    ap.add_argument("--cols", type=int, default=1200, help="columns of each rank's block")
    ap.add_argument("--iters", type=int, default=40, help="CGLS iterations")
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    # the same blocks whatever the run: seeded by rank
    block = np.random.default_rng(rank).normal(0.0, 1.0, (a.rows, a.cols))
    op = pylops_mpi.MPIBlockDiag(ops=[pylops.MatrixMult(block)])
    x = pylops_mpi.DistributedArray(size * a.cols)
    x[:] = np.ones(a.cols)
    y = op @ x
    x0 = pylops_mpi.DistributedArray(op.shape[1])
    x0[:] = 0.0
    # tol=0: every run takes the same number of iterations
    xinv, _, niter, r1norm, _, _ = pylops_mpi.cgls(op, y, x0=x0, niter=a.iters, tol=0.0)
    err = xinv.asarray() - 1.0
    if rank == 0:
        print(f"cgls {niter} iterations residual {r1norm:.6e} "
              f"error {np.linalg.norm(err) / np.sqrt(err.size):.6e}", flush=True)


if __name__ == "__main__":
    main()
