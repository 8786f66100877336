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

import os

import numpy as np
import pandas as pd

COLUMNS = ("rank", "seq", "comp")


class ComputeError(ValueError):
    """A computation table that is missing, damaged or does not fit the trace."""


def write_compute(df: pd.DataFrame, path: str) -> None:
    """Write the table (CSV, or Parquet for a ``.parquet`` path), atomically."""
    tmp = f"{path}.tmp{os.getpid()}"
    df = df.loc[:, list(COLUMNS)]
    if path.endswith(".parquet"):
        df.to_parquet(tmp)
    else:
        df.to_csv(tmp, index=False)
    os.replace(tmp, path)


def read_compute(path: str, events: pd.DataFrame | None = None) -> pd.DataFrame:
    """The checked table; with ``events`` (the trace's ``rank, seq``), its
    ``comp`` aligned to them: a 1-D array, one value per event.

    Checks: columns, integer rank and seq, no duplicate (rank, seq), comp
    finite and >= 0; with events, a time for every traced event."""
    try:
        df = pd.read_parquet(path) if path.endswith(".parquet") else pd.read_csv(path)
    except (OSError, ValueError, UnicodeDecodeError) as e:
        raise ComputeError(f"{path}: cannot read computation table ({e})") from None
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ComputeError(f"{path}: computation table lacks column(s) {missing}")
    for c in ("rank", "seq"):
        if not pd.api.types.is_integer_dtype(df[c]):
            raise ComputeError(f"{path}: column {c} must hold integers")
    dup = df.duplicated(["rank", "seq"])
    if dup.any():
        r = df.loc[dup].iloc[0]
        raise ComputeError(f"{path}: rank {int(r['rank'])}, seq {int(r['seq'])} appears twice")
    comp = pd.to_numeric(df["comp"], errors="coerce").to_numpy(dtype=float)
    bad = np.nonzero(~np.isfinite(comp) | (comp < 0))[0]
    if len(bad):
        r = df.iloc[bad[0]]
        raise ComputeError(f"{path}: rank {int(r['rank'])}, seq {int(r['seq'])}: comp must be "
                           f"a finite number of seconds >= 0, not {r['comp']!r}")
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
