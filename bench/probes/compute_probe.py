"""Is computation slower on the emulated nodes than on the host?  A fixed
NumPy stencil (rma_halo's, 8 sweeps of 500,000 cells) timed 40 times per
rank, median wall and CPU milliseconds; run it under both launchers:

    .venv/bin/mpiexec -n 2 .venv/bin/python bench/probes/compute_probe.py
    python -m emulate run --nodes 2 --rate 1gbit -- \\
        sh -c '$EMULATE_MPIEXEC -n 2 .venv/bin/python bench/probes/compute_probe.py'
"""
import time

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
u = np.random.default_rng(comm.rank).standard_normal(500000)
walls, cpus = [], []
for _ in range(40):
    comm.Barrier()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(8):
        u[1:-1] += 0.25 * (u[:-2] - 2 * u[1:-1] + u[2:])
    walls.append(time.perf_counter() - t0)
    cpus.append(time.process_time() - c0)
print(f"rank {comm.rank} wall {1e3 * np.median(walls):.2f} ms cpu {1e3 * np.median(cpus):.2f} ms",
      flush=True)
