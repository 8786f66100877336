"""A 2-D block code that talks along rows and columns of its process
grid, as SUMMA-style matrix codes and pencil FFTs do: a Cartesian grid
from MPI_Dims_create, its rows and columns by Cart_sub, the rows once
more by Split on the row coordinate; each step a halo exchange with the
grid neighbours, an Allreduce along each row, a Bcast down each column
from its first rank and a Reduce along each row to its first rank (roots at the grid's
edge: a rank's calls follow from its place in the grid).

    mpiexec -n 12 python tests/apps/grid_slices.py --n 240 --iters 3
"""
import argparse

import numpy as np
from mpi4py import MPI

ap = argparse.ArgumentParser()
ap.add_argument("--n", type=int, default=240)
ap.add_argument("--iters", type=int, default=3)
a = ap.parse_args()

world = MPI.COMM_WORLD
dims = MPI.Compute_dims(world.size, 2)
grid = world.Create_cart(dims, periods=[False, False])
row = grid.Sub([False, True])        # the ranks of my row: axis 1 kept
col = grid.Sub([True, False])        # of my column
i, j = grid.Get_coords(grid.rank)
row2 = world.Split(color=i, key=world.rank)
ny, nx = a.n // dims[0], a.n // dims[1]
block = np.random.default_rng(world.rank).random((ny, nx))
total = 0.0
for _ in range(a.iters):
    for axis in (0, 1):
        src, dst = grid.Shift(axis, 1)
        edge = np.ascontiguousarray(block[-1] if axis == 0 else block[:, -1])
        ghost = np.empty_like(edge)
        grid.Sendrecv(edge, dst, 7 + axis, ghost, src, 7 + axis)
    block = 0.5 * block + 0.25 * np.sqrt(block + 1.0)
    sums = np.empty(ny)
    row.Allreduce(block.sum(axis=1), sums)
    top = block[0].copy() if i == 0 else np.empty(nx)
    col.Bcast(top, root=0)
    part = np.empty(ny) if row2.rank == 0 else None
    row2.Reduce(block[:, 0].copy(), part, root=0)
    total += float(sums.sum() + top.sum())
print(f"rank {world.rank} total {total:.6f}", flush=True)
