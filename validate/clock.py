"""Time an untraced application from MPI initialisation to its end, every rank.

    mpiexec -n N python -m validate.clock --out DIR (app.py | -m module | -c cmd) [args]

What a prediction covers is the span from MPI initialisation to the end of
the application; the wall time of the whole ``mpiexec`` command adds
process start-up and tear-down on top.  This launcher lets the
application initialise MPI itself, at its own import of ``mpi4py.MPI``,
and starts the clock there (after one barrier, away from the
application's heap: launch.AtMPIImport; the simulator starts the ranks
together): initialised by the launcher before the application imported
NumPy, the process's heap took another shape, and a NumPy loop whose
temporaries glibc then trimmed at every step ran 1.7x slower than the
same script run plainly (examples/uneven.py, bench/RESULTS.md).  It
runs the application unmodified as ``__main__`` and writes
``DIR/rank<R>.json`` with ``{rank, span, status}``.  ``python -m
validate`` uses it.
"""
from __future__ import annotations

import json
import os
import sys
import time


def _at_init(MPI):
    """Every rank at once: this rank (None if the application keeps MPI
    uninitialised at its import) and the clock after the barrier."""
    if not MPI.Is_initialized():
        return None, time.perf_counter()
    MPI.COMM_WORLD.Barrier()
    return MPI.COMM_WORLD.Get_rank(), time.perf_counter()


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from launch import split_command
    opts, mode, target = split_command(argv, valued=("--out",), prog="validate.clock")
    if {"-h", "--help"} & set(opts):
        print(__doc__)
        return 0
    if mode is None or len(opts) != 2 or opts[0] != "--out":
        print("usage: python -m validate.clock --out DIR (app.py | -m module | -c cmd) [args]",
              file=sys.stderr)
        return 2
    out = opts[1]
    from launch import AtMPIImport, abort_job, run_app
    t_launch = time.perf_counter()
    start = AtMPIImport(_at_init)
    sys.meta_path.insert(0, start)
    status, code = run_app(target, mode)
    end = time.perf_counter()
    started = start.done
    rank, t0 = start.ensure()
    if not started:                               # it never imported mpi4py.MPI
        t0 = t_launch
    from mpi4py import MPI
    if rank is None:
        rank = MPI.COMM_WORLD.Get_rank()
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "span": end - t0, "status": status}, f)
    if code:
        abort_job(MPI.COMM_WORLD, code, MPI.Comm.Abort)
    return code


if __name__ == "__main__":
    sys.exit(main())
