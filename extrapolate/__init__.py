"""Trace extrapolation: the trace of an SPMD application at a large N,
built from its traces at several small N (docs/METHODS.md, "Trace
extrapolation").

    python -m extrapolate TRACE_N1 TRACE_N2 [TRACE_N3 ...] --ranks N -o OUT

The result is a trace directory (docs/TRACE.md) whose meta.json says
``extrapolated``: which traces it came from, the grid, the scaling the
computation showed, and per position class the computation's predicted
total with its interval.  Every later stage reads it as any trace.
"""
from .build import extrapolate
from .layout import ExtrapolationError

__all__ = ["extrapolate", "ExtrapolationError"]
