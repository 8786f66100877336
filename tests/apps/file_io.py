"""Each rank writes its rank into its own file with MPI-IO (replay refuses it)."""
import sys

import numpy as np
from mpi4py import MPI

r = MPI.COMM_WORLD.rank
f = MPI.File.Open(MPI.COMM_SELF, f"{sys.argv[1]}.{r}", MPI.MODE_CREATE | MPI.MODE_WRONLY)
f.Write(np.array([r], "i4"))
f.Close()
print(f"rank {r} wrote", flush=True)
