"""Conjugate gradient on the 1-D Poisson matrix, rows distributed in blocks.

    mpiexec -n 4 python examples/cg.py [--n 100000] [--iters 100]

Allreduce-bound: two dot products per iteration; the matrix-vector product
needs one value from each neighbour (Sendrecv).  Every rank prints the
residual history's last value and its slice's checksum.
"""
import argparse

import numpy as np
from mpi4py import MPI


def matvec(comm, x, out):
    """y = A x for A = tridiag(-1, 2, -1), halo values from the neighbours."""
    r, s = comm.rank, comm.size
    lo = np.zeros(1)
    hi = np.zeros(1)
    left = r - 1 if r > 0 else MPI.PROC_NULL
    right = r + 1 if r < s - 1 else MPI.PROC_NULL
    comm.Sendrecv(x[:1], dest=left, sendtag=1, recvbuf=lo, source=left, recvtag=2)
    comm.Sendrecv(x[-1:], dest=right, sendtag=2, recvbuf=hi, source=right, recvtag=1)
    out[:] = 2 * x
    out[1:] -= x[:-1]
    out[:-1] -= x[1:]
    out[0] -= lo[0]
    out[-1] -= hi[0]


def dot(comm, a, b):
    local = np.array([a @ b])
    total = np.empty(1)
    comm.Allreduce(local, total, op=MPI.SUM)
    return total[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100000, help="global unknowns")
    ap.add_argument("--iters", type=int, default=100)
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    n_local = a.n // comm.size + (1 if comm.rank < a.n % comm.size else 0)
    start = comm.exscan(n_local) or 0
    i = np.arange(start, start + n_local)
    b = np.sin(i * 0.001) + 1.0
    x = np.zeros(n_local)
    r = b.copy()
    p = r.copy()
    ap_ = np.empty(n_local)
    rr = dot(comm, r, r)
    for _ in range(a.iters):
        matvec(comm, p, ap_)
        alpha = rr / dot(comm, p, ap_)
        x += alpha * p
        r -= alpha * ap_
        rr_new = dot(comm, r, r)
        p = r + (rr_new / rr) * p
        rr = rr_new
    # one write per line: lines that ranks print at the same moment stay whole
    print(f"rank {comm.rank} residual {np.sqrt(rr):.12e} checksum {x.sum():.12e}\n", end="",
          flush=True)


if __name__ == "__main__":
    main()
