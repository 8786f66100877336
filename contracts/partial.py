"""The partial-replay plan: written by ``python -m replay.loops``, read here only (by record).

``partial.csv`` (docs/FILES.md) has one row per representative:

==========  =====  ==========================================================
column      unit   meaning
==========  =====  ==========================================================
rank        -      the representative's world rank
events      -      its traced events
start       -      the first event of its main loop (-1: no loop found)
period      -      the loop's calls per iteration (-1: none)
iterations  -      the loop's full iterations in the trace (0: none)
warmup      -      the loop's first iterations replayed but not measured
replayed    -      iterations measured after the warm-up (0: whole replay)
cut         -      the last event replayed: the replay stops at this call
                   (-1: the whole run is replayed)
reason      -      why the whole run is replayed (empty for a partial one)
==========  =====  ==========================================================

``instrument record --partial PARTIAL.csv`` logs each representative's
calls up to its ``cut`` only and writes the loop into the log's header,
from which ``python -m replay`` stops there and says what ``replay.expand``
fills in (replay/loops.py).
"""
from __future__ import annotations

import pandas as pd

from contracts.tables import read_table, write_table

COLUMNS = ("rank", "events", "start", "period", "iterations", "warmup", "replayed", "cut",
           "reason")


class PartialError(ValueError):
    """The partial-replay plan is missing, damaged or inconsistent."""


def write_partial(plan: pd.DataFrame, path: str) -> None:
    """Write ``plan`` (columns COLUMNS) to ``path``, atomically."""
    write_table(plan, path, COLUMNS)


def read_partial(path: str) -> pd.DataFrame:
    """The checked plan.  Checks: every column, integer columns, one row per
    rank, and for a partial row a loop that holds the cut: ``start >= 0``,
    ``period >= 1``, ``1 <= replayed``, ``warmup >= 0`` and ``start + period <= cut < events``."""
    df = read_table(path, COLUMNS, PartialError, "partial-replay plan", "python -m replay.loops",
                    integers=COLUMNS[:-1])
    if df["rank"].duplicated().any():
        raise PartialError(f"{path}: rank {df.loc[df['rank'].duplicated(), 'rank'].iloc[0]} "
                           f"appears twice")
    part = df[df["cut"] >= 0]
    bad = part[(part["start"] < 0) | (part["period"] < 1) | (part["replayed"] < 1)
               | (part["warmup"] < 0)
               | (part["cut"] < part["start"] + part["period"]) | (part["cut"] >= part["events"])]
    if len(bad):
        raise PartialError(f"{path}: rank {bad['rank'].iloc[0]}: its cut "
                           f"{bad['cut'].iloc[0]} is not inside a loop of its events")
    df["reason"] = df["reason"].fillna("").astype(str)
    return df.sort_values("rank").reset_index(drop=True)


def cuts(path: str) -> dict[int, dict]:
    """Rank -> its plan row as a dict, for the partial rows of ``path``."""
    df = read_partial(path)
    return {int(r.rank): {k: int(getattr(r, k)) for k in COLUMNS[1:-1]}
            for r in df.itertuples() if r.cut >= 0}
