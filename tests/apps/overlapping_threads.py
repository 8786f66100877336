"""Two threads of rank 0 inside MPI at once, as a task pool's result
threads are: a helper thread waits in a receive that rank 1 answers
last, while the main thread sends and receives.  The helper's call
begins first and returns last (rank 1 answers it only after the main
thread's last send)."""
import threading
import time

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
if comm.Get_size() != 2:
    raise SystemExit("run with 2 ranks")
late, early, out = np.zeros(4), np.zeros(4), np.arange(4.0)
if comm.rank == 0:
    helper = threading.Thread(target=comm.Recv, args=(late,), kwargs={"source": 1, "tag": 1})
    helper.start()
    time.sleep(0.05)                             # the helper is inside its receive by now
    comm.Send(out, dest=1, tag=0)
    comm.Recv(early, source=1, tag=2)
    comm.Send(early, dest=1, tag=3)              # only then does rank 1 answer the helper
    helper.join()
    print(f"rank 0 got {early.sum():g} then {late.sum():g}")
else:
    comm.Recv(early, source=0, tag=0)
    x = sum(i * i for i in range(200_000))       # the helper waits meanwhile
    comm.Send(early + 1, dest=0, tag=2)
    comm.Recv(out, source=0, tag=3)
    comm.Send(early + 2 + x % 2, dest=0, tag=1)
