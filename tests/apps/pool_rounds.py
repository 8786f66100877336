"""A task pool in rounds, shaped as schwimmbad's MPIPool runs a ``map``:
per round, one task to each worker, then each result (found by polling
Iprobe from any source, tagged with its task's number, sent back with
ssend) answered by the next task while tasks are left, the last results
collected without an answer; at the end a sentinel to every worker.

    mpiexec -n 3 python tests/apps/pool_rounds.py [--rounds 3] [--tasks 8]
"""
import argparse

import numpy as np
from mpi4py import MPI


def work(task):
    x = np.random.default_rng(task).standard_normal((40, 40))
    return float(np.linalg.eigvalsh(x + x.T).max())


def pool_map(comm, tasks):
    workers = list(range(1, comm.size))
    todo = list(enumerate(tasks))
    results, pending = {}, 0
    for w in workers:
        if todo:
            i, t = todo.pop(0)
            comm.send(t, dest=w, tag=i)
            pending += 1
    st = MPI.Status()
    while pending:
        while not comm.Iprobe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=st):
            pass
        value = comm.recv(source=st.Get_source(), tag=st.Get_tag())
        results[st.Get_tag()] = value
        pending -= 1
        if todo:
            i, t = todo.pop(0)
            comm.send(t, dest=st.Get_source(), tag=i)
            pending += 1
    return [results[i] for i in range(len(tasks))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tasks", type=int, default=8)
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    if comm.rank == 0:
        total = 0.0
        for r in range(a.rounds):
            total += sum(pool_map(comm, [r * a.tasks + k for k in range(a.tasks)]))
        for w in range(1, comm.size):
            comm.send(None, dest=w, tag=0)
        print(f"rank 0 total {total:.12e}", flush=True)
    else:
        st = MPI.Status()
        while True:
            task = comm.recv(source=0, tag=MPI.ANY_TAG, status=st)
            if task is None:
                break
            comm.ssend(work(task), dest=0, tag=st.Get_tag())
    comm.Barrier()


if __name__ == "__main__":
    main()
