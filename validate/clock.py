"""Time an untraced application from MPI initialisation to its end, every rank.

    mpiexec -n N python -m validate.clock --out DIR (app.py | -m module | -c cmd) [args]

What a prediction covers is the span from MPI initialisation (which the
tracer performs before the application imports anything) to the end of the
application; the wall time of the whole ``mpiexec`` command adds process
start-up and tear-down on top.  This launcher initialises MPI the same way,
synchronises the ranks once (the simulator starts them together), runs the
application unmodified as ``__main__`` and writes ``DIR/rank<R>.json`` with
``{rank, span, status}``.  ``python -m validate`` uses it.
"""
from __future__ import annotations

import json
import os
import sys
import time


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from launch import split_command
    opts, mode, target = split_command(argv, valued=("--out",), prog="validate.clock")
    if mode is None or len(opts) != 2 or opts[0] != "--out":
        print("usage: python -m validate.clock --out DIR (app.py | -m module | -c cmd) [args]",
              file=sys.stderr)
        return 2
    out = opts[1]
    from mpi4py import MPI

    from launch import abort_job, run_app
    rank = MPI.COMM_WORLD.Get_rank()
    MPI.COMM_WORLD.Barrier()
    t0 = time.perf_counter()
    status, code = run_app(target, mode)
    span = time.perf_counter() - t0
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "span": span, "status": status}, f)
    if code:
        abort_job(MPI.COMM_WORLD, code, MPI.Comm.Abort)
    return code


if __name__ == "__main__":
    sys.exit(main())
