"""mpi4py.MPI imported in the ways third-party codes import it, then one
allreduce and one barrier (a tool must trace, record and replay them all).

    mpiexec -n 2 python tests/apps/import_paths.py MODE

MODE:
  plain      ``from mpi4py import MPI`` at the top of the script;
  nested     from inside the import of a package of the application
             (tests/apps/lazy_mpi), by ``importlib.import_module``;
  deferred   as Pyomo's deferred imports do it: a finder wraps the loader of
             the ``mpi4py`` package and imports ``mpi4py.MPI`` from inside
             the package's own import, while the package is still
             initialising (mpi-sppy hung every tool this way);
  pyomo      through Pyomo's own deferred import (``pyomo.common.
             dependencies`` registers one for mpi4py), as mpi-sppy does.
"""
import importlib
import importlib.abc
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


class _ImportSubmoduleAfter(importlib.abc.MetaPathFinder):
    """Wraps the ``mpi4py`` package's loader: after the package has run,
    and before its import returns, import ``mpi4py.MPI``."""

    def find_spec(self, name, path, target=None):
        if name != "mpi4py":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            import mpi4py.MPI  # noqa: F401  (the package still initialising)
        spec.loader.exec_module = exec_module
        return spec


def main():
    mode = sys.argv[1]
    if mode == "plain":
        from mpi4py import MPI
    elif mode == "nested":
        import lazy_mpi
        MPI = lazy_mpi.MPI
    elif mode == "deferred":
        sys.meta_path.insert(0, _ImportSubmoduleAfter())
        import mpi4py
        MPI = mpi4py.MPI
    elif mode == "pyomo":
        import pyomo.common.dependencies  # noqa: F401  (registers its deferred mpi4py)
        from mpi4py import MPI
    else:
        raise SystemExit(f"unknown mode {mode}")
    comm = MPI.COMM_WORLD
    total = comm.allreduce(comm.rank + 1)
    comm.Barrier()
    print(f"rank {comm.rank} {mode} total {total}", flush=True)


if __name__ == "__main__":
    main()
