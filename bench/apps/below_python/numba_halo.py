"""A 1-D heat equation: halo exchange and residual in numba-jitted code (numba-mpi)."""
import numba
import numba_mpi as mpi
import numpy as np

N, STEPS = 200_000, 200


@numba.njit
def run(u, steps):
    rank, size = mpi.rank(), mpi.size()
    left, right = (rank - 1) % size, (rank + 1) % size
    new = np.empty_like(u)
    res = np.zeros(1)
    tot = np.zeros(1)
    for s in range(steps):
        mpi.sendrecv(u[1:2], left, u[-1:], right, 1, 1)
        mpi.sendrecv(u[-2:-1], right, u[0:1], left, 2, 2)
        for i in range(1, u.size - 1):
            new[i] = u[i] + 0.25 * (u[i - 1] - 2 * u[i] + u[i + 1])
        u[1:-1] = new[1:-1]
        if s % 20 == 0:
            res[0] = np.abs(u).sum()
            mpi.allreduce(res, tot, mpi.Operator.SUM)
    return tot[0]


u = np.zeros(N + 2)
u[N // 2] = float(mpi.rank() + 1)
t = run(u, STEPS)
if mpi.rank() == 0:
    print(f"total {t:.6f}")
