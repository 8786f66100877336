"""1-D heat equation with halo exchange by one-sided Put between fences.

    mpiexec -n 4 python examples/rma_halo.py [--n 200000] [--iters 200] [--halo 64]

Each rank owns n/P cells plus ``--halo`` ghost cells on each side, exposed
in one window.  Every iteration it Puts its first and last ``--halo``
cells into its neighbours' ghost cells (a fence before and after: active
target synchronisation), then updates its cells with an explicit stencil
``--halo`` times (wide halos trade messages for redundant work).  Every
rank prints its slice's checksum.
"""
import argparse

import numpy as np
from mpi4py import MPI


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200000, help="cells in all")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--halo", type=int, default=64, help="ghost cells per side")
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    r, p, h = comm.rank, comm.size, a.halo
    local = a.n // p
    u = np.zeros(local + 2 * h)
    x = (r * local + np.arange(local)) / a.n
    u[h:h + local] = np.sin(np.pi * x) ** 2
    win = MPI.Win.Create(u, disp_unit=u.itemsize, comm=comm)
    left, right = r - 1, r + 1
    for _ in range(a.iters):
        win.Fence(MPI.MODE_NOPRECEDE)
        if left >= 0:       # my first cells become the left neighbour's right ghosts
            win.Put(u[h:2 * h].copy(), left, target=local + h)
        if right < p:       # my last cells become the right neighbour's left ghosts
            win.Put(u[local:local + h].copy(), right, target=0)
        win.Fence(MPI.MODE_NOSUCCEED)
        for _ in range(h):
            u[1:-1] += 0.25 * (u[:-2] - 2 * u[1:-1] + u[2:])
    win.Free()
    # one write per line: lines that ranks print at the same moment stay whole
    print(f"rank {r} checksum {u[h:h + local].sum():.10e}\n", end="", flush=True)


if __name__ == "__main__":
    main()
