"""Driver for heat's distributed FFT (heat.fft.fft2 and ifft2 on a square
array split along its rows): the application is heat's.  A transform
along the split axis redistributes the array to columns and back, each
time by an Alltoallw of subarray datatypes (heat's resplit), with torch's
FFTs of the local rows and columns between.  This file only makes data
and calls it.

    mpiexec -n 4 python bench/apps/heat_fft.py --n 1024 --rounds 3

Each round transforms forward and back and adds a little of the result
to the field, so every round moves new data; the data come from a fixed
seed, so runs are repeatable.
"""
import argparse

import heat as ht


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1024, help="rows and columns")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    ht.random.seed(5)
    field = ht.random.randn(a.n, a.n, split=0, dtype=ht.float64).astype(ht.complex128)
    for _ in range(a.rounds):
        spectrum = ht.fft.fft2(field)
        field = field + 0.5 * ht.fft.ifft2(spectrum * 0.5)
    total = float(ht.abs(field).sum())
    if field.comm.rank == 0:
        print(f"heat.fft: {a.rounds} rounds of {a.n}^2, field norm {total:.9g}")


if __name__ == "__main__":
    main()
