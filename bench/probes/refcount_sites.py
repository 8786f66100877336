"""Where numba counts array references in the simulator, counted call by call.

perf shows how much time goes to NRT_incref and NRT_decref, numba's
reference counting, but not who calls them: numba's machine code has no
frame information.  This probe runs one of bench/netsim_speed.py's
workloads on the 4:1 fat tree (``sharing`` as perf_numba_map.py takes
it).  Once compiled, it writes /tmp/refcount_funcs.txt, a list of every
function numba compiled for netsim.engine and netsim.flows (``START SIZE
NAME``, hexadecimal, NRT_incref and NRT_decref among them).  It then
writes its pid to /tmp/refcount_ready and waits 8 s before the timed run.
Attach gdb with this file's companion script in that time::

    python bench/probes/refcount_sites.py halo+allreduce 16384 4000000 rtt_flows &
    while [ ! -f /tmp/refcount_ready ]; do sleep 1; done
    gdb -q -batch -p $(cat /tmp/refcount_ready) -x bench/probes/refcount_gdb.py
    sort -rn /tmp/refcount_sites.txt | head

The script stops at every reference count and reads its return address
off the stack: the function and offset of each site.  It counts the first
100,000 calls and then lets the run go on.  To find a site's line, a
NUMBA_DEBUGINFO=1 build's ``inspect_asm`` assembled with ``as`` gives the
offsets' lines (after matching its instructions to the running code's,
which differ slightly).

2026-12-03, halo + allreduce at 16,384 ranks, rtt_flows: 3 increfs and 6
decrefs at every event.  They came from the notification arrays, which
the loop could replace (grown by concatenation).  After them came one
pair per notification, from a name bound to one successor array or the
other.  With both gone, the remaining sites are in the inlined heap
pushes and pops and in the flows' per-link helpers.  Plain (not inlined)
helpers count references in their own calls instead
(bench/tables/topology_simgrid.md, "Cost").
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("NUMBA_CACHE_DIR", tempfile.mkdtemp(prefix="refcount_numba_"))
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent), str(HERE)]

from perf_numba_map import compiled_functions, tree_workload, write_map  # noqa: E402

import netsim.engine  # noqa: E402
import netsim.flows  # noqa: E402
from netsim import run  # noqa: E402


def main() -> None:
    label, s, plat = tree_workload(sys.argv[1:])
    write_map(compiled_functions((netsim.engine, netsim.flows)), "/tmp/refcount_funcs.txt")
    Path("/tmp/refcount_ready").write_text(str(os.getpid()))
    time.sleep(8)                            # for gdb to attach
    res = run(s, plat)
    print(f"{label}: events {res.events}, engine {res.seconds:.2f} s "
          "(slowed by gdb while it counts)", flush=True)


if __name__ == "__main__":
    main()
