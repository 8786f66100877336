"""The raw trace: what each traced rank writes before the merge.

Each rank appends fixed-size binary records (``RECORD``, fields ``FIELDS``)
to ``raw/rNNNNNN.ev`` and JSON lines of everything of variable size to
``raw/rNNNNNN.side`` (instrument/writer.py); with ``--count-c-calls`` a
tab-separated count of MPI calls made below Python per rank.  The merge
(contracts/merge.py) is their one reader.  The ``FLAG_*`` bits travel on
into the merged trace's ``flags`` column (docs/TRACE.md).

Standard library only at import: every traced rank imports this module
before the application starts.
"""
from __future__ import annotations

import os
import struct

RECORD = struct.Struct("<13q6d")
# Field order of RECORD (13 integers, then 6 doubles); merge.py reads the
# file with the same layout.  ``polls``/``poll_cpu``/``poll_gap``: the empty
# polls folded into the event (_hotpath.c), the CPU seconds they took and
# the interval between the last of them and the event.
FIELDS = ["op", "comm", "peer", "tag", "sbytes", "rbytes", "req", "site",
          "rpeer", "rtag", "newcomm", "flags", "polls",
          "t_start", "t_end", "cpu_start", "cpu_end", "poll_cpu", "poll_gap"]
N_INT_FIELDS = 13
FLAG_ANY_SOURCE = 1
FLAG_ANY_TAG = 2
FLAG_NONE = 8            # a test/probe that found nothing (folded, never written)
FLAG_NONCONTIG = 16      # a v/w collective with a non-contiguous derived datatype
FLAG_INPLACE = 32        # a collective called with MPI.IN_PLACE (no local copy)
FLAG_OBJECT = 64         # a lower-case collective of Python objects (mpi4py's own algorithm)
FLAG_LOCK_SHARED = 128   # a window Lock of type MPI.LOCK_SHARED (else exclusive)

def rank_path(trace_dir: str, rank: int, ext: str) -> str:
    return os.path.join(trace_dir, "raw", f"r{rank:06d}.{ext}")


def read_counts(paths: list[str]):
    """Sum per-rank count files into one DataFrame: function, visible, invisible."""
    import pandas as pd
    frames = [pd.read_csv(p, sep="\t") for p in paths if os.path.exists(p)]
    if not frames:
        return pd.DataFrame(columns=["function", "visible", "invisible"])
    return (pd.concat(frames).groupby("function", as_index=False)[["visible", "invisible"]]
            .sum().sort_values("invisible", ascending=False))
