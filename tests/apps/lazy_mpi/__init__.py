"""A package of an application that imports mpi4py.MPI while it is itself
being imported, by name (tests/apps/import_paths.py nested; also run as
``-m lazy_mpi.main``)."""
import importlib

MPI = importlib.import_module("mpi4py.MPI")
