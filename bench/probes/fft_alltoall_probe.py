"""Where fft2d's Alltoalls lose time: its loop with each Alltoall timed, and
beside it, in the same run, the same Alltoall back to back with nothing,
a CPU spin of 3 ms or a memory sweep of 48 MB between calls.  Per case:
the mean time in the call per rank, the mean skew between the ranks'
entries (both ranks read the same monotonic clock: one host), the time
from the later entry, and the page faults per call.  Untraced, 6 rounds.

    python -m emulate run --nodes 2 --rate 1gbit -- \\
        sh -c '$EMULATE_MPIEXEC -n 2 .venv/bin/python bench/probes/fft_alltoall_probe.py'
    mpiexec -n 2 .venv/bin/python bench/probes/fft_alltoall_probe.py     # shared memory
"""
import resource
import time

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
n, steps = 512, 12
rows = n // comm.size
rng = np.random.default_rng(comm.rank)
field = rng.standard_normal((rows, n)) + 1j * rng.standard_normal((rows, n))
log = {"app": [], "spin": [], "sweep": [], "back-to-back": []}   # (entry, exit, faults)


def alltoall(send, recv, case):
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t0 = time.clock_gettime(time.CLOCK_MONOTONIC)
    comm.Alltoall(send, recv)
    t1 = time.clock_gettime(time.CLOCK_MONOTONIC)
    log[case].append((t0, t1, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0))


def transpose(a):
    """fft2d's transpose: fresh send and receive buffers every call."""
    p = comm.size
    send = np.ascontiguousarray(a.reshape(rows, p, rows).transpose(1, 0, 2))
    recv = np.empty_like(send)
    alltoall(send, recv, "app")
    return recv.transpose(2, 0, 1).reshape(rows, p * rows)


big = np.ones(2 << 20)
for _round in range(6):
    comm.Barrier()
    for _ in range(steps):
        spec = np.fft.fft(transpose(np.fft.fft(field, axis=1)), axis=1)
        field = np.fft.ifft(transpose(np.fft.ifft(spec, axis=1)), axis=1)
    send = np.ascontiguousarray(field.reshape(rows, comm.size, rows).transpose(1, 0, 2))
    recv = np.empty_like(send)
    for case in ("spin", "sweep", "back-to-back"):
        comm.Barrier()
        for _ in range(2 * steps):
            if case == "spin":
                until = time.perf_counter() + 0.003
                while time.perf_counter() < until:
                    pass
            elif case == "sweep":
                for _ in range(3):
                    big *= 1.0000001
            alltoall(send, recv, case)
logs = comm.gather(log, root=0)
if comm.rank == 0:
    for case in log:
        a, b = np.array(logs[0][case]), np.array(logs[1][case])
        in_call = (a[:, 1] - a[:, 0] + b[:, 1] - b[:, 0]) / 2
        skew = np.abs(a[:, 0] - b[:, 0])
        joint = np.minimum(a[:, 1], b[:, 1]) - np.maximum(a[:, 0], b[:, 0])
        print(f"{case:<13} in the call {1e3 * in_call.mean():.3f} ms  skew {1e3 * skew.mean():.3f}"
              f"  from the later entry {1e3 * joint.mean():.3f}  "
              f"page faults per call {a[:, 2].mean():.0f}")
