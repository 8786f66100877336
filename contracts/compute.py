"""The target computation times of every rank: written by ``python -m
replay.expand``, read here only (by ``python -m netsim --compute``, and
by ``python -m extrapolate --compute``, one table per small trace).

``compute.csv`` (or ``.parquet``; docs/FILES.md), one row per traced event:

=====  ====  ===============================================================
column unit  meaning
=====  ====  ===============================================================
rank   -     world rank
seq    -     the event's index in that rank's trace
comp   s     computation before that event on the target (its
             representative's replayed time)
low    s     the least that span may have taken (replay/busy.py: a span
             disturbed by a busy node at its CPU time; with repeats, the
             least of them); optional, ``comp`` when absent
high   s     the most (with repeats, the most of them); optional
inside s     the event's own work between its messages (mpi4py's reducing
             in an allreduce of Python objects, before the broadcast of the
             result: replay/objects.py); optional, 0 when absent
mean   s     the span's mean over every copy and round of its
             representative's replays (replay/variability.py: mean_spans),
             what the simulator samples its variability around; optional,
             ``comp`` when absent
representative the rank whose replay gave these times, whose measured
             variability (replay/variability.py) the simulator samples for
             this rank; optional, the rank itself when absent
=====  ====  ===============================================================
"""
from __future__ import annotations

import pandas as pd

from contracts.tables import read_table, write_table

COLUMNS = ("rank", "seq", "comp")
BAND = ("low", "high")
INSIDE = "inside"
REP = "representative"
MEAN = "mean"


class ComputeError(ValueError):
    """A computation table that is missing, damaged or does not fit the trace."""


def write_compute(df: pd.DataFrame, path: str) -> None:
    """Write the table (CSV, or Parquet for a ``.parquet`` path), atomically."""
    write_table(df, path, COLUMNS + tuple(c for c in BAND + (INSIDE, MEAN, REP)
                                          if c in df.columns))


def read_compute(path: str, events: pd.DataFrame | None = None, band: bool = False):
    """The checked table; with ``events`` (the trace's ``rank, seq``), its
    ``comp`` aligned to them: a 1-D array, one value per event (with
    ``band``, a table of ``comp, low, high, inside, mean,
    representative`` in the events' order).

    Checks: columns, integer rank and seq, no duplicate (rank, seq), comp
    (and low, high, inside) finite and >= 0, low <= comp <= high; with
    events, a time for every traced event."""
    df = read_table(path, COLUMNS, ComputeError, "computation table", "python -m replay.expand",
                    integers=("rank", "seq"), seconds=("comp", INSIDE, MEAN))
    if INSIDE not in df.columns:
        df[INSIDE] = 0.0
    if MEAN not in df.columns:
        df[MEAN] = df["comp"]
    if REP not in df.columns:
        df[REP] = df["rank"]
    elif not pd.api.types.is_integer_dtype(df[REP]) or (df[REP] < 0).any():
        raise ComputeError(f"{path}: column {REP} must hold world ranks (integers >= 0)")
    present = [c for c in BAND if c in df.columns]
    if present:
        if len(present) == 1:
            raise ComputeError(f"{path}: columns low and high come together")
        _check_band(df, path)
    else:
        df["low"], df["high"] = df["comp"], df["comp"]
    dup = df.duplicated(["rank", "seq"])
    if dup.any():
        r = df.loc[dup].iloc[0]
        raise ComputeError(f"{path}: rank {int(r['rank'])}, seq {int(r['seq'])} appears twice")
    if events is None:
        return df
    key = events[["rank", "seq"]].merge(df[["rank", "seq", "comp", "low", "high", INSIDE, MEAN,
                                            REP]],
                                        on=["rank", "seq"], how="left")
    lost = key["comp"].isna()
    if lost.any():
        r = key.loc[lost].iloc[0]
        raise ComputeError(f"{path}: no computation time for {int(lost.sum())} trace events "
                           f"(first: rank {int(r['rank'])}, seq {int(r['seq'])})")
    if band:
        return key[["comp", "low", "high", INSIDE, MEAN, REP]].reset_index(drop=True)
    return key["comp"].to_numpy()


def _check_band(df: pd.DataFrame, path: str) -> None:
    """low and high: finite seconds, low <= comp <= high on every row."""
    import numpy as np
    lo = pd.to_numeric(df["low"], errors="coerce").to_numpy(dtype=float)
    hi = pd.to_numeric(df["high"], errors="coerce").to_numpy(dtype=float)
    comp = df["comp"].to_numpy(dtype=float)
    # a few ulps of slack: the band's ends are written as the same floats
    bad = ~np.isfinite(lo) | ~np.isfinite(hi) | (lo < 0) | (lo > comp * (1 + 1e-12)) | \
        (hi < comp * (1 - 1e-12))
    if bad.any():
        i = int(np.argmax(bad))
        raise ComputeError(f"{path}: rank {df['rank'].iat[i]}, seq {df['seq'].iat[i]}: low "
                           f"{float(lo[i])!r} <= comp {float(comp[i])!r} <= high "
                           f"{float(hi[i])!r} does not hold")
    df["low"], df["high"] = lo, hi
