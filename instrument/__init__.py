"""Tracing of mpi4py applications and message logging (docs/METHODS.md: the trace and record steps).

Command line: ``mpiexec -n N python -m instrument trace -o DIR app.py [args]``
and ``python -m instrument show DIR``.  Python API: :func:`load_trace`.
The trace directory format is documented in ``docs/TRACE.md``.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import TraceError

if TYPE_CHECKING:                       # annotations only
    import pandas as pd

# pandas/pyarrow are imported where tables are read, not here: every traced
# rank imports this package before the application starts

__all__ = ["Trace", "load_trace", "TraceError"]


@dataclass
class Trace:
    """A loaded trace: ``meta`` dict and the contract's tables."""
    path: str
    meta: dict
    events: pd.DataFrame
    comms: pd.DataFrame
    sites: pd.DataFrame
    topology: pd.DataFrame

    @property
    def size(self) -> int:
        return int(self.meta["size"])

    @property
    def incomplete_ranks(self) -> list[int]:
        return list(self.meta.get("incomplete_ranks", []))


def load_trace(path: str, columns: list[str] | None = None, salvage: bool = True) -> Trace:
    """Read a trace directory.  A run that crashed before merging is merged
    first (``salvage``), with its incomplete ranks marked in ``meta``."""
    import pandas as pd

    from .merge import merge, needs_merge
    if not os.path.isdir(path):
        raise TraceError(f"{path}: no such trace directory")
    meta_path = os.path.join(path, "meta.json")
    if not os.path.exists(meta_path):
        raise TraceError(f"{path}: no meta.json; not a trace directory (written by "
                         f"`python -m instrument trace`)")
    if needs_merge(path):
        if not salvage:
            raise TraceError(f"{path}: trace was never merged (the run did not finish); "
                             f"run `python -m instrument merge {path}`")
        merge(path)
    with open(meta_path) as f:
        meta = json.load(f)
    ev_path = os.path.join(path, "events.parquet")
    if not os.path.exists(ev_path):
        raise TraceError(f"{ev_path}: missing; the trace holds no events")
    try:
        events = pd.read_parquet(ev_path, columns=columns)
        comms = pd.read_parquet(os.path.join(path, "comms.parquet"))
        sites = pd.read_parquet(os.path.join(path, "sites.parquet"))
        tp = os.path.join(path, "topology.parquet")
        topology = pd.read_parquet(tp) if os.path.exists(tp) else pd.DataFrame()
    except Exception as e:  # pyarrow raises several types for damaged files
        raise TraceError(f"{path}: cannot read trace tables: {e}") from e
    return Trace(path, meta, events, comms, sites, topology)
