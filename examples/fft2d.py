"""2-D FFT of an n x n complex field by row FFTs and Alltoall transposes.

    mpiexec -n 4 python examples/fft2d.py [--n 512] [--steps 10]

Each rank owns n/P rows.  A forward transform is: FFT along the local
rows, a global transpose (one Alltoall of n*n/P complex numbers per rank),
FFT along the new local rows (the spectrum stays transposed, as spectral
codes keep it); the inverse undoes it the same way.  Every
step does a forward and an inverse transform, so the field comes back to
itself: bandwidth-bound, the classic pattern of spectral codes.  Every
rank prints its slice's checksum, rank 0 also the field's relative
change after all steps.
"""
import argparse

import numpy as np
from mpi4py import MPI


def transpose(comm, a):
    """The global transpose of a row-distributed square matrix: block (r, c)
    of rank r goes to rank c, which transposes each block it receives."""
    p = comm.size
    rows, n = a.shape
    send = np.ascontiguousarray(a.reshape(rows, p, rows).transpose(1, 0, 2))
    recv = np.empty_like(send)
    comm.Alltoall(send, recv)
    return recv.transpose(2, 0, 1).reshape(rows, p * rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=512, help="points per side (a multiple of P)")
    ap.add_argument("--steps", type=int, default=10, help="forward + inverse transforms")
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    if a.n % comm.size:
        raise SystemExit(f"--n {a.n} must be a multiple of the {comm.size} ranks")
    rows = a.n // comm.size
    rng = np.random.default_rng(comm.rank)
    field = rng.standard_normal((rows, a.n)) + 1j * rng.standard_normal((rows, a.n))
    start = field.copy()
    for _ in range(a.steps):
        spectrum = np.fft.fft(transpose(comm, np.fft.fft(field, axis=1)), axis=1)
        field = np.fft.ifft(transpose(comm, np.fft.ifft(spectrum, axis=1)), axis=1)
    change = comm.allreduce(float(np.abs(field - start).sum()))
    norm = comm.allreduce(float(np.abs(start).sum()))
    line = f"rank {comm.rank} checksum {float(np.abs(field).sum()):.10e}"
    if comm.rank == 0:
        line += f" relative change {change / norm:.1e}"
    # one write per line: lines that ranks print at the same moment stay whole
    print(line + "\n", end="", flush=True)


if __name__ == "__main__":
    main()
