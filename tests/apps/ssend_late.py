"""A small send to a late receiver (found by the futures demo, whose
workers return results with issend): rank 0 sends 64 bytes with the call
named on the command line (send, ssend or issend) while rank 1 computes
0.3 s before receiving.  A standard send of that size returns at once
(eager); a synchronous one only once rank 1 has matched it."""
import sys
import time

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
call = sys.argv[1]
buf = np.arange(64, dtype=np.uint8)
if comm.rank == 0:
    t0 = time.perf_counter()
    if call == "send":
        comm.Send(buf, 1, 5)
    elif call == "ssend":
        comm.Ssend(buf, 1, 5)
    else:
        comm.Issend(buf, 1, 5).Wait()
    print(f"rank 0 {call} took {time.perf_counter() - t0:.3f} s")
else:
    t0, w0, x = time.process_time(), time.perf_counter(), 0
    while time.process_time() - t0 < 0.3:
        x += 1
    worked = time.perf_counter() - w0         # longer than 0.3 s on a busy machine
    comm.Recv(buf, 0, 5)
    print(f"rank 1 got {int(buf.sum())} after working {worked:.3f} s")
