"""Where fft2d's Alltoalls lose time on an emulated link: its loop with
each Alltoall timed, and beside it, in the same run, the same Alltoall back
to back, with fresh buffers, and a 1 MiB Sendrecv (what the calibration
measures), all untraced, interleaved over 6 rounds.

    python -m emulate run --nodes 2 --rate 1gbit -- \
        sh -c '$EMULATE_MPIEXEC -n 2 .venv/bin/python bench/fft_alltoall_probe.py'
"""
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
n, steps = 512, 12
rows = n // comm.size
rng = np.random.default_rng(comm.rank)
field = rng.standard_normal((rows, n)) + 1j * rng.standard_normal((rows, n))
def tr(a, log):
    """fft2d's transpose, its Alltoall timed into ``log``."""
    p = comm.size
    send = np.ascontiguousarray(a.reshape(rows, p, rows).transpose(1, 0, 2))
    recv = np.empty_like(send)
    t0 = MPI.Wtime()
    comm.Alltoall(send, recv)
    log.append(MPI.Wtime() - t0)
    return recv.transpose(2, 0, 1).reshape(rows, p * rows)
app, b2b, sr, fresh = [], [], [], []   # seconds per call
for _round in range(6):
    comm.Barrier()
    for _ in range(steps):
        spec = np.fft.fft(tr(np.fft.fft(field, axis=1), app), axis=1)
        field = np.fft.ifft(tr(np.fft.ifft(spec, axis=1), app), axis=1)
    comm.Barrier()
    send = np.ascontiguousarray(field.reshape(rows, comm.size, rows).transpose(1, 0, 2))
    recv = np.empty_like(send)
    for _ in range(2 * steps):
        t0 = MPI.Wtime()
        comm.Alltoall(send, recv)
        b2b.append(MPI.Wtime() - t0)
    comm.Barrier()
    for _ in range(2 * steps):          # fresh buffers each time, no computation
        s2 = send.copy()
        r2 = np.empty_like(s2)
        t0 = MPI.Wtime()
        comm.Alltoall(s2, r2)
        fresh.append(MPI.Wtime() - t0)
    comm.Barrier()
    peer = 1 - comm.rank
    sb = np.ones(1 << 17)
    rb = np.empty(1 << 17)
    for _ in range(2 * steps):
        t0 = MPI.Wtime()
        comm.Sendrecv(sb, peer, 0, rb, peer, 0)
        sr.append(MPI.Wtime() - t0)
if comm.rank == 0:
    for name, v in (("app alltoall", app), ("back-to-back", b2b), ("fresh buffers", fresh),
                    ("sendrecv 1 MiB", sr)):
        print(f"{name:<18} median {1e3 * np.median(v):.2f} ms  mean {1e3 * np.mean(v):.2f}  "
              f"min {1e3 * np.min(v):.2f}")
