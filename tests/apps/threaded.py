"""A rank whose helper thread does most of the work, as a threaded BLAS or
OpenMP region does: the trace's CPU seconds are the process's, so the
tracer says how many of them ran on threads besides the main one."""
import threading
import time

from mpi4py import MPI

comm = MPI.COMM_WORLD
done = []


def helper():
    x, t0 = 0, time.process_time()
    while time.thread_time() < 0.4 and time.process_time() - t0 < 5:
        x += 1
    done.append(x > 0)


t = threading.Thread(target=helper)
t.start()
t.join()
total = comm.allreduce(len(done))
if comm.rank == 0:
    print(f"helpers done: {total}")
