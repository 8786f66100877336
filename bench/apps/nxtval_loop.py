"""Driver for mpi4py's nxtval demo (demo/nxtval/nxtval-mpi3.py): a shared
counter and a mutex over passive-target RMA (Win.Allocate, Lock,
Get_accumulate, Unlock).  The Counter and Mutex classes are the demo's;
this file loads them and uses them long enough to time: every rank draws
``--draws`` values from the counter, with some computation between draws,
and takes the mutex every ``--every`` draws.

    mpiexec -n 4 python bench/apps/nxtval_loop.py --draws 2000

Who draws which value, and how often the mutex spins, changes from run to
run; the sum of all values drawn does not.
"""
import argparse
import importlib.util
import os

import numpy as np
from mpi4py import MPI

DEMO = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                    "src", "mpi4py", "demo", "nxtval", "nxtval-mpi3.py")


def load_demo():
    spec = importlib.util.spec_from_file_location("nxtval_mpi3", DEMO)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=2000)
    ap.add_argument("--every", type=int, default=10, help="take the mutex every K draws")
    ap.add_argument("--work", type=int, default=20000, help="vector length worked on per draw")
    a = ap.parse_args()
    demo = load_demo()
    comm = MPI.COMM_WORLD
    counter, mutex = demo.Counter(comm), demo.Mutex(comm)
    x = np.linspace(0.0, 1.0, a.work) + comm.rank
    drawn = 0
    for i in range(a.draws):
        drawn += counter.next()
        x = np.sqrt(x * x + 1.0) - 0.5 * x
        if i % a.every == 0:
            with mutex:
                x = x * 0.5 + 0.25
    mutex.free()
    counter.free()
    total = comm.allreduce(drawn)
    n = a.draws * comm.size
    if comm.rank == 0:
        print(f"nxtval: {n} draws, sum {total} (expected {n * (n - 1) // 2})", flush=True)


if __name__ == "__main__":
    main()
