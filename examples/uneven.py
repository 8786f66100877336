"""Ranks with deliberately different amounts of work (clustering test case).

    mpiexec -n 8 python examples/uneven.py [--iters 20] [--work 40000] [--classes 3]
                                           [--units 1,3,9]

Rank r belongs to work class r % classes and does (class + 1) units of work
per iteration (``--units``: class k does the k-th of these, and there are
as many classes), then joins a ring exchange and an Allreduce.  The
clusters a clustering of computation vectors must find are exactly the
work classes.
"""
import argparse

import numpy as np
from mpi4py import MPI


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--work", type=int, default=40000, help="vector length of one unit")
    ap.add_argument("--classes", type=int, default=3)
    ap.add_argument("--units", help="units of work per class, comma-separated (default "
                                    "1, 2, ... --classes)")
    a = ap.parse_args()
    per_class = [int(u) for u in a.units.split(",")] if a.units else \
        list(range(1, a.classes + 1))
    comm = MPI.COMM_WORLD
    r, s = comm.rank, comm.size
    units = per_class[r % len(per_class)]
    x = np.linspace(0.0, 1.0, a.work) + r
    acc = 0.0
    buf = np.empty(16)
    for it in range(a.iters):
        for _ in range(units):
            for _ in range(10):
                x = np.sqrt(x * x + 1.0) - 0.5 * x
            acc += float(x.sum())
        out = np.full(16, acc)
        comm.Sendrecv(out, dest=(r + 1) % s, sendtag=it, recvbuf=buf,
                      source=(r - 1) % s, recvtag=it)
        total = comm.allreduce(float(buf[0]))
    # one write per line: lines that ranks print at the same moment stay whole
    print(f"rank {r} class {r % len(per_class)} acc {acc:.12e} total {total:.12e}\n",
          end="", flush=True)


if __name__ == "__main__":
    main()
