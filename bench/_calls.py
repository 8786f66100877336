"""Micro-benchmark application: a ping-pong, a collective loop, polls.

    python bench/_calls.py pingpong|allreduce|isend|rma|iprobe|test CALLS
    python bench/_calls.py c-pingpong|c-isend|c-test CALLS

The ``c-`` kinds make the same calls from C (bench/_c_calls.c, compiled
with the MPI library's mpicc on first use): calls below Python.

``iprobe`` and ``test`` poll for something that never comes (Iprobe for a
tag nobody sends, Test of a receive nobody matches): the cost of a poll
that finds nothing.  ``rma`` is a shared counter's draw on the rank's own
window: Lock, Get_accumulate, Unlock.
Prints ``CALLS <n> SECONDS <s>`` on rank 0 (n = MPI calls made by rank 0)."""
import sys
import time

import numpy as np
from mpi4py import MPI

kind, n = sys.argv[1], int(sys.argv[2])
w = MPI.COMM_WORLD
r = w.rank
buf = np.zeros(1)
out = np.zeros(1)
c_lib = None
if kind.startswith("c-"):
    import ctypes
    import hashlib
    import os
    import subprocess
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_c_calls.c")
    with open(src, "rb") as f:
        key = hashlib.sha1(f.read()).hexdigest()[:12]
    so = os.path.join(os.path.expanduser("~"), ".cache", "repreplay", f"bench_c_calls-{key}.so")
    if r == 0 and not os.path.exists(so):
        os.makedirs(os.path.dirname(so), exist_ok=True)
        subprocess.run([os.path.join(os.path.dirname(sys.executable), "mpicc"), "-O2", "-shared",
                        "-fPIC", "-o", so + ".tmp", src], check=True)
        os.replace(so + ".tmp", so)
    w.Barrier()
    c_lib = ctypes.CDLL(so)
w.Barrier()
t0 = time.perf_counter()
if c_lib is not None:
    c_lib.c_loop({"c-pingpong": 0, "c-isend": 1, "c-test": 2}[kind], MPI._handleof(w), n)
elif kind == "pingpong":
    peer = 1 - r
    for _ in range(n // 2):
        if r == 0:
            w.Send(buf, peer, 0)
            w.Recv(buf, peer, 0)
        else:
            w.Recv(buf, peer, 0)
            w.Send(buf, peer, 0)
elif kind == "allreduce":
    for _ in range(n):
        w.Allreduce(buf, out)
elif kind == "isend":
    me = w.rank
    for _ in range(n // 3):
        a = w.Irecv(out, me, 0)
        b = w.Isend(buf, me, 0)
        MPI.Request.Waitall([a, b])
elif kind == "rma":
    me = w.rank
    win = MPI.Win.Allocate(8, 8, comm=MPI.COMM_SELF)
    one = np.ones(1, dtype="i8")
    got = np.zeros(1, dtype="i8")
    for _ in range(n // 3):
        win.Lock(0)
        win.Get_accumulate(one, got, 0, op=MPI.SUM)
        win.Unlock(0)
elif kind == "iprobe":
    for _ in range(n):
        w.Iprobe(MPI.ANY_SOURCE, 99)
elif kind == "test":
    req = w.Irecv(out, MPI.ANY_SOURCE, 98)
    for _ in range(n):
        req.Test()
t = time.perf_counter() - t0
if kind == "test":
    req.Cancel()
    req.Wait()
if kind == "rma":
    win.Free()
if r == 0:
    print(f"CALLS {n} SECONDS {t:.6f}", flush=True)
