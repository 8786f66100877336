"""A NumPy loop whose 800 kB temporaries glibc either keeps in its heap or
trims and faults in again at every step, depending on what the process
loaded and allocated before (examples/uneven.py's loop): prints which, by
the minor page faults of the loop after its first iteration.  Alone and
under the launcher that times the real run (validate.clock) the answer
must be the same."""
import resource

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
r, s = comm.rank, comm.size
x = np.linspace(0.0, 1.0, 100_000) + r
buf = np.empty(16)
acc = 0.0
for it in range(20):
    if it == 1:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(10):
        x = np.sqrt(x * x + 1.0) - 0.5 * x
    acc += float(x.sum())
    comm.Sendrecv(np.full(16, acc), dest=(r + 1) % s, sendtag=it, recvbuf=buf,
                  source=(r - 1) % s, recvtag=it)
    total = comm.allreduce(float(buf[0]))
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
# kept: a few faults in all; trimmed: about 200 pages per step
print(f"rank {r} loop temporaries {'kept' if faults < 5_000 else 'faulted in again'}\n",
      end="", flush=True)
