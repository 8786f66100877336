"""The trace directory: its reader, ``load_trace`` (docs/TRACE.md).

Written by ``instrument trace`` through the merge (contracts/merge.py);
read by ``instrument show``, cluster, replay.expand and netsim, all through
:func:`load_trace`, which checks the tables against the contract before
any of them sees a row.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:                       # annotations only
    import pandas as pd

# pandas/pyarrow are imported where tables are read, not here: every traced
# rank imports the merge's constants before the application starts


class TraceError(Exception):
    """A trace directory that cannot be read; the message names file and rank."""


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


def file_there(path: str, writer: str, what: str) -> bool:
    """Whether ``path`` is there as a file (False where it is missing);
    TraceError where something else, a directory, stands in its place:
    ``writer`` writes that file into ``what`` (the trace, the raw trace)."""
    if not os.path.exists(path):
        return False
    if not os.path.isfile(path):
        raise TraceError(f"{path}: not a file (a directory or another kind of entry where "
                         f"{writer} writes one); the {what} is damaged")
    return True


def load_trace(path: str, columns: list[str] | None = None, salvage: bool = True) -> Trace:
    """Read a trace directory, writing nothing into it.  A run that crashed
    before merging is merged in a temporary directory (``salvage``), with
    its incomplete ranks marked in ``meta``; ``instrument merge`` keeps it."""
    from .merge import needs_merge
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
        import tempfile

        from .merge import merge
        print(f"instrument: {path} was never merged (the run did not finish): merged in "
              f"memory; `python -m instrument merge {path}` keeps the merge", file=sys.stderr)
        with tempfile.TemporaryDirectory(prefix="merge-") as tmp:
            merge(path, quiet=True, out_dir=tmp)
            t = _read_tables(tmp, columns)
        t.path = path
        return t
    return _read_tables(path, columns)


def _read_tables(path: str, columns) -> Trace:
    """The merged tables and checked meta of a trace directory."""
    import pandas as pd

    from .trace_checks import check_comms, check_events, read_meta
    meta = read_meta(os.path.join(path, "meta.json"))
    from .merge import COMMS_COLUMNS, EVENT_SCHEMA, LATER_COLUMNS, TABLES, table_digest
    ev_path = os.path.join(path, "events.parquet")
    # every merge writes all four (topology empty without topologies): a
    # trace without one lost a file
    for name in TABLES:
        table = os.path.join(path, name)
        if not file_there(table, "the merge", "trace"):
            raise TraceError(f"{table}: missing; the trace holds no events" if table == ev_path
                             else f"{table}: missing (every merged trace has it); the trace "
                                  f"is damaged")
    digests = meta.get("digests")
    for name in TABLES:
        if not isinstance(digests, dict) or digests.get(name) != table_digest(
                os.path.join(path, name)):
            raise TraceError(f"{os.path.join(path, name)}: does not match the digest the "
                             f"merge wrote in meta.json: the file is damaged or was changed "
                             f"(or merged by an older version)")
    need = columns if columns is not None else EVENT_SCHEMA.names
    try:
        import pyarrow.parquet as pq
        have = pq.read_schema(ev_path).names
        # the pages' checksums verified where they were written (merge)
        crc = {"page_checksum_verification": True}
        events = pd.read_parquet(ev_path, columns=[c for c in need if c in have], **crc)
        comms = pd.read_parquet(os.path.join(path, "comms.parquet"), **crc)
        sites = pd.read_parquet(os.path.join(path, "sites.parquet"), **crc)
        topology = pd.read_parquet(os.path.join(path, "topology.parquet"), **crc)
    except Exception as e:  # pyarrow raises several types for damaged files
        # its first line: the rest can be the whole schema
        said = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise TraceError(f"{path}: cannot read trace tables: {said}") from e
    for c in LATER_COLUMNS:
        if c in need and c not in events.columns:
            events[c] = -1
            events[c] = events[c].astype("int64")
    lost = [c for c in need if c not in events.columns] + \
        [c for c in COMMS_COLUMNS if c not in comms.columns]
    if lost:
        raise TraceError(f"{path}: trace tables lack column(s) {', '.join(lost)} (written by "
                         f"tracer {meta.get('tracer_version', '?')}; trace again with this "
                         f"version)")
    check_events(events, meta, ev_path)
    check_comms(comms, events, meta, os.path.join(path, "comms.parquet"))
    return Trace(path, meta, events, comms, sites, topology)
