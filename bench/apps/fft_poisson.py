"""Driver for mpi4py-fft: a 3-D periodic Poisson problem solved spectrally,
again and again for right-hand sides of rising frequency, with mpi4py-fft's
PFFT on a 2-D pencil decomposition (two transposes per transform, each an
Alltoallw of subarray datatypes on a Cartesian sub-communicator), and the
error against the exact solution reduced over the ranks.

    mpiexec -n 2 python bench/apps/fft_poisson.py --n 48 --solves 12
"""
import argparse

import numpy as np
from mpi4py import MPI
from mpi4py_fft import PFFT, newDistArray


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=48, help="grid points per direction")
    ap.add_argument("--solves", type=int, default=12)
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    n = a.n
    # FFTW_ESTIMATE: plans chosen without timing them, so every run (traced,
    # replayed or not) computes with the same algorithm, to the last bit
    fft = PFFT(comm, [n, n, n], axes=(0, 1, 2), dtype=np.float64, grid=(-1, 1),
               planner_effort="FFTW_ESTIMATE")
    xs = [np.arange(n)[s] * 2 * np.pi / n for s in fft.local_slice(False)]
    X = np.meshgrid(*xs, indexing="ij", sparse=True)
    freqs = [np.fft.fftfreq(n, 1.0 / n), np.fft.fftfreq(n, 1.0 / n), np.fft.rfftfreq(n, 1.0 / n)]
    K = np.meshgrid(*[f[s] for f, s in zip(freqs, fft.local_slice(True))], indexing="ij",
                    sparse=True)
    K2 = K[0] ** 2 + K[1] ** 2 + K[2] ** 2
    K2 = np.where(K2 == 0, 1, K2)
    f = newDistArray(fft, False)
    u = newDistArray(fft, False)
    f_hat = newDistArray(fft, True)
    worst = 0.0
    for m in range(1, a.solves + 1):
        k = 1 + m % (n // 4)
        exact = np.sin(k * X[0]) * np.cos(2 * X[1]) * np.sin(X[2])
        f[:] = -(k * k + 5) * exact               # the Laplacian of exact
        f_hat = fft.forward(f, f_hat)
        f_hat /= -K2
        u = fft.backward(f_hat, u)
        err = comm.allreduce(float(np.abs(u - exact).max()), op=MPI.MAX)
        worst = max(worst, err)
    if comm.rank == 0:
        print(f"largest error {worst:.3e} over {a.solves} solves")


if __name__ == "__main__":
    main()
