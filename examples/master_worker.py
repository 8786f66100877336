"""Master-worker task farm with ANY_SOURCE receives (non-deterministic order).

    mpiexec -n 4 python examples/master_worker.py [--tasks 40] [--size 200]

Rank 0 hands out tasks (matrix sizes) one at a time to whichever worker
answers first; workers compute a dense eigenvalue problem and return a
number.  The printed total is independent of the arrival order.
"""
import argparse

import numpy as np
from mpi4py import MPI

TASK, RESULT, STOP = 1, 2, 3


def work(task, size):
    rng = np.random.default_rng(task)
    m = rng.standard_normal((size, size))
    return float(np.linalg.eigvalsh(m + m.T).max())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=40)
    ap.add_argument("--size", type=int, default=200, help="matrix size of one task")
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    if comm.size < 2:
        raise SystemExit("master_worker needs at least 2 ranks")
    if comm.rank == 0:
        results = {}
        next_task = 0
        for w in range(1, comm.size):
            if next_task < a.tasks:
                comm.send(next_task, dest=w, tag=TASK)
                next_task += 1
            else:
                comm.send(None, dest=w, tag=STOP)
        st = MPI.Status()
        while len(results) < a.tasks:
            task, value = comm.recv(source=MPI.ANY_SOURCE, tag=RESULT, status=st)
            results[task] = value
            w = st.Get_source()
            if next_task < a.tasks:
                comm.send(next_task, dest=w, tag=TASK)
                next_task += 1
            else:
                comm.send(None, dest=w, tag=STOP)
        total = sum(results[t] for t in sorted(results))
        print(f"rank 0 tasks {len(results)} total {total:.12e}", flush=True)
    else:
        done = 0
        while True:
            st = MPI.Status()
            task = comm.recv(source=0, tag=MPI.ANY_TAG, status=st)
            if st.Get_tag() == STOP:
                break
            comm.send((task, work(task, a.size)), dest=0, tag=RESULT)
            done += 1
        print(f"rank {comm.rank} finished", flush=True)
    comm.Barrier()


if __name__ == "__main__":
    main()
