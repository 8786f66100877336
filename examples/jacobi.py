"""2-D Jacobi iteration on a Cartesian process grid with nonblocking halo exchange.

    mpiexec -n 4 python examples/jacobi.py [--n 256] [--iters 100] [--check 10] [--grid 2x2]

Each rank owns an (n/px) x (n/py) block of the unit square (fixed boundary
values), exchanges one-cell halos with its four neighbours (Irecv/Isend +
Waitall) every iteration and computes the global residual with Allreduce
every ``--check`` iterations.  Every rank prints its block's checksum.
"""
import argparse

import numpy as np
from mpi4py import MPI


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=256, help="global grid points per side")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--check", type=int, default=10, help="residual every K iterations")
    ap.add_argument("--grid", help="process grid ROWSxCOLS (default: MPI_Dims_create's)")
    a = ap.parse_args()

    world = MPI.COMM_WORLD
    dims = [int(x) for x in a.grid.split("x")] if a.grid else MPI.Compute_dims(world.size, 2)
    if len(dims) == 1:
        dims.append(1)
    if dims[0] * dims[1] != world.size:
        raise SystemExit(f"--grid {a.grid}: {dims[0] * dims[1]} processes, not {world.size}")
    cart = world.Create_cart(dims, periods=[False, False], reorder=False)
    cy, cx = cart.Get_coords(cart.rank)
    ny, nx = a.n // dims[0], a.n // dims[1]
    u = np.zeros((ny + 2, nx + 2))
    # boundary condition: the global top edge is held at 1
    if cy == 0:
        u[0, :] = 1.0
    up, down = cart.Shift(0, 1)
    left, right = cart.Shift(1, 1)
    recv = {k: np.empty(nx if k in "ud" else ny) for k in "udlr"}
    res = 0.0
    for it in range(a.iters):
        send = {"u": u[1, 1:-1].copy(), "d": u[-2, 1:-1].copy(),
                "l": u[1:-1, 1].copy(), "r": u[1:-1, -2].copy()}
        reqs = []
        for k, nb, tag in (("u", up, 0), ("d", down, 1), ("l", left, 2), ("r", right, 3)):
            # what I send up arrives as the neighbour's bottom halo (tag of "d")
            reqs.append(cart.Irecv(recv[k], source=nb, tag=tag ^ 1))
            reqs.append(cart.Isend(send[k], dest=nb, tag=tag))
        MPI.Request.Waitall(reqs)
        if up != MPI.PROC_NULL:
            u[0, 1:-1] = recv["u"]
        if down != MPI.PROC_NULL:
            u[-1, 1:-1] = recv["d"]
        if left != MPI.PROC_NULL:
            u[1:-1, 0] = recv["l"]
        if right != MPI.PROC_NULL:
            u[1:-1, -1] = recv["r"]
        new = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
        if (it + 1) % a.check == 0:
            local = np.array([np.sum((new - u[1:-1, 1:-1]) ** 2)])
            total = np.empty(1)
            cart.Allreduce(local, total, op=MPI.SUM)
            res = float(np.sqrt(total[0]))
        u[1:-1, 1:-1] = new
    print(f"rank {world.rank} coords ({cy},{cx}) checksum {u[1:-1, 1:-1].sum():.12e} "
          f"residual {res:.12e}\n", end="", flush=True)   # one write: lines stay whole


if __name__ == "__main__":
    main()
