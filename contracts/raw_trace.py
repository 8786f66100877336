"""The raw trace: what each traced rank writes before the merge.

Each rank appends fixed-size binary records (``RECORD``, fields ``FIELDS``)
to ``raw/rNNNNNN.ev`` and JSON lines of everything of variable size to
``raw/rNNNNNN.side`` (instrument/writer.py).  With ``--c-calls`` the PMPI
shim writes the calls made below Python the same way to ``rNNNNNN.cev``
and ``rNNNNNN.cside`` (pmpishim/ctrace.c: its own id spaces for
communicators, requests and sites), and a tab-separated count of MPI calls
per function and caller to ``ccountR.tsv``.  The merge
(contracts/merge.py) is their one reader.  The ``FLAG_*`` bits travel on
into the merged trace's ``flags`` column (docs/TRACE.md).

Standard library only at import: every traced rank imports this module
before the application starts.
"""
from __future__ import annotations

import os
import struct

RECORD = struct.Struct("<14q6d")
# Field order of RECORD (14 integers, then 6 doubles); merge.py reads the
# file with the same layout.  ``polls``/``poll_cpu``/``poll_gap``: the empty
# polls folded into the event (_hotpath.c), the CPU seconds they took and
# the interval between the last of them and the event.  ``faults``: the
# process's minor page faults in the span before the event (-1: not
# counted, as below Python).
FIELDS = ["op", "comm", "peer", "tag", "sbytes", "rbytes", "req", "site",
          "rpeer", "rtag", "newcomm", "flags", "polls", "faults",
          "t_start", "t_end", "cpu_start", "cpu_end", "poll_cpu", "poll_gap"]
N_INT_FIELDS = 14
FLAG_ANY_SOURCE = 1
FLAG_ANY_TAG = 2
FLAG_NONE = 8            # a test/probe that found nothing (folded, never written)
FLAG_NONCONTIG = 16      # a v/w collective with a non-contiguous derived datatype
FLAG_INPLACE = 32        # a collective called with MPI.IN_PLACE (no local copy)
FLAG_OBJECT = 64         # a lower-case collective of Python objects (mpi4py's own algorithm)
FLAG_LOCK_SHARED = 128   # a window Lock of type MPI.LOCK_SHARED (else exclusive)
FLAG_BELOW_PYTHON = 256  # made below Python (compiled code, ctypes), traced by the PMPI shim

def rank_path(trace_dir: str, rank: int, ext: str) -> str:
    return os.path.join(trace_dir, "raw", f"r{rank:06d}.{ext}")


COUNT_COLUMNS = ["function", "visible", "invisible", "traced"]


def read_counts(paths: list[str]):
    """Sum per-rank count files into one DataFrame: function, visible (made
    through mpi4py), invisible (made below Python, not traced), traced
    (made below Python and traced as events)."""
    import pandas as pd
    frames = [pd.read_csv(p, sep="\t") for p in paths if os.path.exists(p)]
    if not frames:
        return pd.DataFrame(columns=COUNT_COLUMNS)
    return (pd.concat(frames).groupby("function", as_index=False)[COUNT_COLUMNS[1:]]
            .sum().sort_values(["invisible", "traced"], ascending=False))
