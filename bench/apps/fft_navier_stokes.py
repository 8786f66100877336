"""Driver for mpi4py-fft: a pseudo-spectral Navier-Stokes solver (Taylor-Green
vortex, rotational form, RK2) on a periodic cube.  The distributed FFTs are
mpi4py-fft's PFFT: pencil/slab redistribution by Alltoallw with subarray
datatypes on Cartesian sub-communicators.

    mpiexec -n 4 python bench/apps/fft_navier_stokes.py --n 48 --steps 20
"""
import argparse

import numpy as np
from mpi4py import MPI
from mpi4py_fft import PFFT, newDistArray


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=48, help="grid points per direction")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--nu", type=float, default=0.01)
    ap.add_argument("--dt", type=float, default=0.01)
    ap.add_argument("--grid", choices=("slab", "pencil"), default="slab",
                    help="decomposition of the ranks (default: slab)")
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    n = a.n
    # slabs: one Alltoallw over all ranks per transform; pencils: two, each
    # over a row or a column of a 2-D grid of ranks (sub-communicators)
    grid = (-1,) if a.grid == "slab" else (-1, -1)
    # FFTW_ESTIMATE: plans chosen without timing them, so every run computes
    # with the same algorithm
    fft = PFFT(comm, [n, n, n], axes=(0, 1, 2), dtype=np.float64, grid=grid,
               planner_effort="FFTW_ESTIMATE")
    # local physical coordinates and spectral wavenumbers
    xs = [np.arange(n)[s] * 2 * np.pi / n for s in fft.local_slice(False)]
    X = np.meshgrid(*xs, indexing="ij", sparse=True)
    freqs = [np.fft.fftfreq(n, 1.0 / n), np.fft.fftfreq(n, 1.0 / n), np.fft.rfftfreq(n, 1.0 / n)]
    K = np.meshgrid(*[f[s] for f, s in zip(freqs, fft.local_slice(True))], indexing="ij",
                    sparse=False)
    K = np.array(K)
    K2 = (K * K).sum(0)
    K2_safe = np.where(K2 == 0, 1, K2)
    dealias = (np.abs(K) < 2.0 / 3.0 * (n // 2)).all(0)

    U = newDistArray(fft, False, rank=1)
    U_hat = newDistArray(fft, True, rank=1)
    curl = np.empty_like(U)
    U[0] = np.sin(X[0]) * np.cos(X[1]) * np.cos(X[2])
    U[1] = -np.cos(X[0]) * np.sin(X[1]) * np.cos(X[2])
    U[2] = 0
    for i in range(3):
        U_hat[i] = fft.forward(U[i], U_hat[i])

    def rhs(u_hat):
        for i in range(3):
            U[i] = fft.backward(u_hat[i], U[i])
        w_hat = 1j * np.cross(K, u_hat, axis=0)
        for i in range(3):
            curl[i] = fft.backward(w_hat[i], curl[i])
        nonlin = np.cross(U, curl, axis=0)
        n_hat = np.empty_like(u_hat)
        for i in range(3):
            n_hat[i] = fft.forward(nonlin[i], n_hat[i])
        n_hat *= dealias
        n_hat -= (K * n_hat).sum(0) / K2_safe * K      # pressure: keep it solenoidal
        return n_hat - a.nu * K2 * u_hat

    for _ in range(a.steps):
        k1 = rhs(U_hat)
        k2 = rhs(U_hat + a.dt * k1)
        U_hat = U_hat + 0.5 * a.dt * (k1 + k2)
    for i in range(3):
        U[i] = fft.backward(U_hat[i], U[i])
    energy = comm.allreduce(0.5 * float((U * U).sum()) / n ** 3)
    if comm.rank == 0:
        print(f"Taylor-Green {n}^3, {a.steps} RK2 steps: kinetic energy {energy:.10f}")


if __name__ == "__main__":
    main()
