"""A CPU-bound kernel and a synchronisation loop, timed in every rank.

    mpiexec -n M python bench/probes/vcore_kernel.py kernel --loops L
    mpiexec -n M python bench/probes/vcore_kernel.py sync --loops L --iters I [--op OP]

``kernel``: every rank runs a pure-Python loop of L additions and prints
its wall seconds (no MPI call in between): on a free core the loop's
speed, on a virtual core of share F 1/F times that.  ``sync``: I
iterations of {the loop of L additions; a Barrier (or, ``--op
pingpong``, an 8-byte exchange between ranks 2i and 2i+1; ``--op
uneven``, a Barrier after which odd ranks only worked L / 3, so that
they wait for the others as a lighter class of ranks does; ``--op
allreduce`` / ``allgather``, an 8-byte Allreduce / Allgather of every
rank; ``--op sendrecv``, an 8-byte Sendrecv between ranks 2i and 2i+1,
both directions at once; ``--op alltoall``, an Alltoall of ``--bytes``
to every rank)}; every rank
prints its wall seconds per iteration.  Rank 0 prints one JSON line, a
list of ``{"rank", "seconds", "cpu"}`` (CPU seconds beside wall).  Used by bench/virtual_cores.py.
"""
import argparse
import json
import time

from mpi4py import MPI


def work(loops: int) -> int:
    x = 0
    for i in range(loops):
        x += i
    return x


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("kernel", "sync"))
    ap.add_argument("--loops", type=int, default=1_000_000)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--bytes", type=int, default=8, help="alltoall: bytes to each rank")
    ap.add_argument("--op", default="barrier", choices=(
        "barrier", "pingpong", "uneven", "allreduce", "allgather", "sendrecv", "alltoall"))
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    work(a.loops // 10)                      # warm the interpreter's caches
    comm.Barrier()
    if a.mode == "kernel":
        t, c = time.perf_counter(), time.process_time()
        work(a.loops)
        seconds, cpu = time.perf_counter() - t, time.process_time() - c
    else:
        buf = bytearray(8)
        into = bytearray(8 * comm.size)
        if a.op == "alltoall":
            buf, into = bytearray(a.bytes * comm.size), bytearray(a.bytes * comm.size)
        peer = comm.rank ^ 1
        t, c = time.perf_counter(), time.process_time()
        # uneven: odd ranks work a third as long, then wait at the Barrier
        mine = a.loops // 3 if a.op == "uneven" and comm.rank % 2 else a.loops
        for _ in range(a.iters):
            work(mine)
            if a.op in ("barrier", "uneven"):
                comm.Barrier()
            elif a.op == "allreduce":
                comm.Allreduce(MPI.IN_PLACE, [buf, MPI.DOUBLE])
            elif a.op == "allgather":
                comm.Allgather([buf, MPI.BYTE], [into, MPI.BYTE])
            elif a.op == "alltoall":
                comm.Alltoall([buf, MPI.BYTE], [into, MPI.BYTE])
            elif a.op == "sendrecv" and peer < comm.size:
                comm.Sendrecv(buf, peer, recvbuf=memoryview(into)[:8], source=peer)
            elif peer < comm.size:
                if comm.rank % 2 == 0:
                    comm.Send(buf, peer)
                    comm.Recv(buf, peer)
                else:
                    comm.Recv(buf, peer)
                    comm.Send(buf, peer)
        seconds = (time.perf_counter() - t) / a.iters
        cpu = (time.process_time() - c) / a.iters
    rows = comm.gather({"rank": comm.rank, "seconds": seconds, "cpu": cpu})
    if comm.rank == 0:
        print(json.dumps(rows), flush=True)


if __name__ == "__main__":
    main()
