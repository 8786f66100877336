"""The target computation times of every rank: written by ``python -m
replay.expand``, read here only (by ``python -m netsim --compute``).

``compute.csv`` (or ``.parquet``; docs/FILES.md), one row per traced event:

=====  ====  ===============================================================
column unit  meaning
=====  ====  ===============================================================
rank   -     world rank
seq    -     the event's index in that rank's trace
comp   s     computation before that event on the target (its
             representative's replayed time)
=====  ====  ===============================================================
"""
from __future__ import annotations

import pandas as pd

from instrument.tables import read_table, write_table

COLUMNS = ("rank", "seq", "comp")


class ComputeError(ValueError):
    """A computation table that is missing, damaged or does not fit the trace."""


def write_compute(df: pd.DataFrame, path: str) -> None:
    """Write the table (CSV, or Parquet for a ``.parquet`` path), atomically."""
    write_table(df, path, COLUMNS)


def read_compute(path: str, events: pd.DataFrame | None = None):
    """The checked table; with ``events`` (the trace's ``rank, seq``), its
    ``comp`` aligned to them: a 1-D array, one value per event.

    Checks: columns, integer rank and seq, no duplicate (rank, seq), comp
    finite and >= 0; with events, a time for every traced event."""
    df = read_table(path, COLUMNS, ComputeError, "computation table", "python -m replay.expand",
                    integers=("rank", "seq"), seconds=("comp",))
    dup = df.duplicated(["rank", "seq"])
    if dup.any():
        r = df.loc[dup].iloc[0]
        raise ComputeError(f"{path}: rank {int(r['rank'])}, seq {int(r['seq'])} appears twice")
    if events is None:
        return df
    key = events[["rank", "seq"]].merge(df[["rank", "seq", "comp"]], on=["rank", "seq"],
                                        how="left")
    lost = key["comp"].isna()
    if lost.any():
        r = key.loc[lost].iloc[0]
        raise ComputeError(f"{path}: no computation time for {int(lost.sum())} trace events "
                           f"(first: rank {int(r['rank'])}, seq {int(r['seq'])})")
    return key["comp"].to_numpy()
