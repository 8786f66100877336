"""A task pool whose master takes results with a nonblocking receive
from any source (irecv + wait), a shape the simulator keeps as traced.

    mpiexec -n 3 python tests/apps/pool_irecv.py [--tasks 12]
"""
import argparse

import numpy as np
from mpi4py import MPI

TASK, RESULT, STOP = 1, 2, 3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=12)
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    if comm.rank == 0:
        sent, done = 0, 0
        for w in range(1, comm.size):
            comm.send(sent, dest=w, tag=TASK)
            sent += 1
        st = MPI.Status()
        while done < a.tasks:
            comm.irecv(source=MPI.ANY_SOURCE, tag=RESULT).wait(status=st)
            done += 1
            if sent < a.tasks:
                comm.send(sent, dest=st.Get_source(), tag=TASK)
                sent += 1
            else:
                comm.send(None, dest=st.Get_source(), tag=STOP)
        print(f"rank 0 tasks {done}", flush=True)
    else:
        st = MPI.Status()
        while True:
            task = comm.recv(source=0, tag=MPI.ANY_TAG, status=st)
            if st.Get_tag() == STOP:
                break
            x = np.random.default_rng(task).standard_normal((60, 60))
            comm.send(float(np.linalg.eigvalsh(x + x.T).max()), dest=0, tag=RESULT)
    comm.Barrier()


if __name__ == "__main__":
    main()
