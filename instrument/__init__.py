"""Tracing of mpi4py applications and message logging (docs/METHODS.md: the trace and record steps).

Command line: ``mpiexec -n N python -m instrument trace -o DIR app.py [args]``,
``mpiexec -n N python -m instrument record ...`` and ``python -m instrument
show DIR``.  What they write, and its readers, are in ``contracts/``: the
trace (``contracts.trace.load_trace``, docs/TRACE.md) and the message log
(``contracts.msglog``).
"""
