"""A task pool in the shape of mpipool's executor: on rank 0 each task
gets a job thread that sends it to the worker (rank 1), then polls an
irecv for the result with short sleeps; rank 0's main thread meanwhile
waits for the results in a busy loop.  Every MPI call a job thread makes
gives the GIL up, the busy loop takes it, and the job thread waits for
the switch interval to get it back: the run's time is those waits, not
the worker's computation.
"""
import threading
import time

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
TASKS = 20


def job(k, results):
    comm.send(k, dest=1)
    req = comm.irecv(source=1)
    while True:
        done, value = req.test()
        if done:
            break
        time.sleep(1e-4)
    results[k] = value


if comm.rank == 0:
    results = {}
    for k in range(TASKS):
        t = threading.Thread(target=job, args=(k, results), daemon=True)
        t.start()
        while k not in results:         # the consumer's busy loop
            pass
        t.join()
    comm.send(None, dest=1)
    print(f"rank 0 sum {sum(results.values()):.6f}", flush=True)
else:
    while (k := comm.recv(source=0)) is not None:
        x = np.linspace(0.0, 1.0, 20_000 + 1000 * k)
        comm.send(float(np.sum(np.sin(x) ** 2)), dest=0)
    print("rank 1 done", flush=True)
