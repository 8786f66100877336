"""Time an untraced application from MPI initialisation to its end, every rank.

    mpiexec -n N python -m validate.clock --out DIR (app.py | -m module | -c cmd) [args]

What a prediction covers is the span from MPI initialisation to the end of
the application; the wall time of the whole ``mpiexec`` command adds
process start-up and tear-down on top.  This launcher lets the
application initialise MPI itself, at its own import of ``mpi4py.MPI``,
and starts the clock there (after one barrier: the simulator starts the
ranks together): initialised by the launcher before the application
imported NumPy, the process's heap took another shape, and a NumPy loop
whose temporaries glibc then trimmed at every step ran 1.7x slower than
the same script run plainly (examples/uneven.py, bench/RESULTS.md).  It
runs the application unmodified as ``__main__`` and writes
``DIR/rank<R>.json`` with ``{rank, span, status}``.  ``python -m
validate`` uses it.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import json
import os
import sys
import time


class _StartAtInit(importlib.abc.MetaPathFinder):
    """Notes when the application's import of ``mpi4py.MPI`` (which
    initialises MPI) is done: rank and clock, after a barrier."""

    def __init__(self):
        self.rank, self.t0 = None, None

    def find_spec(self, name, path, target=None):
        if name != "mpi4py.MPI":
            return None
        sys.meta_path.remove(self)                # once; the real finders do the rest
        spec = importlib.util.find_spec(name)
        if spec is None:                          # the application's import fails as usual
            return None
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            if module.Is_initialized():
                self.rank = module.COMM_WORLD.Get_rank()
                module.COMM_WORLD.Barrier()
            self.t0 = time.perf_counter()
        spec.loader.exec_module = exec_module
        return spec


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from launch import split_command
    opts, mode, target = split_command(argv, valued=("--out",), prog="validate.clock")
    if mode is None or len(opts) != 2 or opts[0] != "--out":
        print("usage: python -m validate.clock --out DIR (app.py | -m module | -c cmd) [args]",
              file=sys.stderr)
        return 2
    out = opts[1]
    from launch import abort_job, run_app
    start = _StartAtInit()
    sys.meta_path.insert(0, start)
    t_launch = time.perf_counter()
    status, code = run_app(target, mode)
    end = time.perf_counter()
    from mpi4py import MPI
    if start.t0 is None:                          # it never imported mpi4py.MPI
        start.t0 = t_launch
    rank = start.rank if start.rank is not None else MPI.COMM_WORLD.Get_rank()
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "span": end - start.t0, "status": status}, f)
    if code:
        abort_job(MPI.COMM_WORLD, code, MPI.Comm.Abort)
    return code


if __name__ == "__main__":
    sys.exit(main())
