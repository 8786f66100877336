"""Parallel-in-time integration (parareal) of the 1-D heat equation.

    mpiexec -n 4 python examples/parareal.py [--points 20000] [--fine 2000] [--iters 4]

The time interval is cut into one slice per rank.  Each parareal
iteration, every rank integrates its slice with the accurate (fine)
propagator, in parallel, then the correction sweeps through the slices in
order: rank r receives its new start state from rank r-1, applies the
cheap (coarse) propagator and sends the corrected end state to rank r+1.
SPMD with point-to-point messages between neighbouring time slices, the
pattern of parallel-in-time solvers.  Each slice is ``--fine`` steps long,
so more ranks integrate over a longer time; after as many iterations as
ranks, parareal gives the fine solution exactly.
"""
import argparse

import numpy as np
from mpi4py import MPI


def fine(u, steps, r):
    """Explicit Euler steps of u_t = u_xx (r = dt/dx^2 <= 1/2: stable)."""
    u = u.copy()
    for _ in range(steps):
        lap = np.empty_like(u)
        lap[1:-1] = u[:-2] - 2.0 * u[1:-1] + u[2:]
        lap[0] = lap[-1] = 0.0
        u = u + r * lap
    return u


def coarse(u, r):
    """One step of the same explicit scheme with the whole slice's time
    step, damped to stay stable: cheap and inaccurate, as a coarse
    propagator is."""
    lap = np.zeros_like(u)
    lap[1:-1] = u[:-2] - 2.0 * u[1:-1] + u[2:]
    return u + min(r, 0.5) * lap


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=20000, help="grid points")
    ap.add_argument("--fine", type=int, default=2000, help="fine steps per time slice")
    ap.add_argument("--iters", type=int, default=4, help="parareal iterations")
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size
    x = np.linspace(0.0, 1.0, a.points)
    r_fine = 0.4
    r_coarse = r_fine * a.fine
    u0 = np.exp(-200.0 * (x - 0.5) ** 2) + np.sin(np.pi * x)
    # the first coarse sweep gives every slice its start state
    start = u0.copy() if rank == 0 else np.empty(a.points)
    if rank > 0:
        comm.Recv(start, source=rank - 1, tag=0)
    g_old = coarse(start, r_coarse)
    if rank < size - 1:
        comm.Send(g_old, dest=rank + 1, tag=0)
    end = g_old
    for k in range(1, a.iters + 1):
        f = fine(start, a.fine, r_fine)
        if rank > 0:
            comm.Recv(start, source=rank - 1, tag=k)
        g_new = coarse(start, r_coarse)
        end = g_new + f - g_old
        g_old = g_new
        if rank < size - 1:
            comm.Send(end, dest=rank + 1, tag=k)
    line = (f"rank {rank} parareal {size} slices, {a.iters} iterations, norm at the end of "
            f"slice {rank} {np.linalg.norm(end):.12e}")
    # rank 0's line first and alone: the ranks end together, and lines
    # printed at the same moment by several processes can run together
    if rank == 0:
        print(line, flush=True)
    comm.Barrier()
    if rank > 0:
        print(line, flush=True)


if __name__ == "__main__":
    main()
