"""Waiting by polling, as mpi4py.futures does (found by the futures demo):
rank 0 polls Iprobe, sleeping between polls, while rank 1 works; then rank 1
polls the Test of its synchronous send while rank 0 works.  The time
between polls that found nothing is waiting, not computation."""
import time

from mpi4py import MPI

comm = MPI.COMM_WORLD


def work(seconds):
    """Busy the CPU for ``seconds`` of CPU time."""
    t0, x = time.process_time(), 0
    while time.process_time() - t0 < seconds:
        x += 1
    return x


def wait(poll):
    polls = 0
    while not poll():
        time.sleep(0.002)
        polls += 1
    return polls


if comm.rank == 0:
    wait(lambda: comm.Iprobe(source=1, tag=1))
    x = comm.recv(source=1, tag=1)
    work(0.2)
    comm.send(x + 1, dest=1, tag=2)
else:
    work(0.3)
    req = comm.issend(41, dest=0, tag=1)
    wait(lambda: req.Test())
    x = comm.recv(source=0, tag=2)
print(f"rank {comm.rank} got {x}")
