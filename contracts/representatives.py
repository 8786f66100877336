"""The representatives file: written by ``python -m cluster``, read here only.

``representatives.csv`` (docs/FILES.md) has one row per world rank:

==============  =======  ==================================================
column          unit     meaning
==============  =======  ==================================================
rank            -        world rank, 0..N-1, each exactly once
group           -        ranks with identical communication sequences
cluster         -        cluster id, unique across groups
representative  -        the world rank replayed for this cluster
total           s        the rank's total computation (CPU seconds)
rep_total       s        its representative's total
error           ratio    abs(total - rep_total) / rep_total
==============  =======  ==================================================

Every consumer (record, replay, expand, the report, the Snakefile) reads
it through :func:`read_representatives`, which checks it first.
"""
from __future__ import annotations

import pandas as pd

from contracts.tables import read_table, write_table

COLUMNS = ("rank", "group", "cluster", "representative", "total", "rep_total", "error")


class RepresentativesError(ValueError):
    """The representatives file is missing, damaged or inconsistent."""


def write_representatives(reps: pd.DataFrame, path: str) -> None:
    """Write ``reps`` (columns COLUMNS) to ``path``, atomically."""
    write_table(reps, path, COLUMNS)


def read_representatives(path: str, size: int | None = None) -> pd.DataFrame:
    """The checked representatives table (columns COLUMNS, sorted by rank).

    Checks: every column present, integer ids, ranks 0..N-1 each once (N =
    ``size`` when given), every cluster has exactly one representative,
    which is one of its members; totals and errors >= 0.  Raises
    RepresentativesError naming the file and the offending rank."""
    df = read_table(path, COLUMNS, RepresentativesError, "representatives", "python -m cluster",
                    integers=("rank", "group", "cluster", "representative"),
                    seconds=("total", "rep_total"))
    err = pd.to_numeric(df["error"], errors="coerce")
    bad = df.loc[err.isna() | (err < 0), "rank"]
    if len(bad):
        raise RepresentativesError(f"{path}: rank {bad.iloc[0]}: error must be a number >= 0")
    df = df.sort_values("rank").reset_index(drop=True)
    n = size if size is not None else len(df)
    if df["rank"].duplicated().any():
        raise RepresentativesError(f"{path}: rank {df.loc[df['rank'].duplicated(), 'rank'].iloc[0]}"
                                   f" appears twice")
    if len(df) != n or df["rank"].min() != 0 or df["rank"].max() != n - 1:
        raise RepresentativesError(f"{path}: ranks must be 0..{n - 1} each once "
                                   f"(found {len(df)} ranks, {df['rank'].min()}.."
                                   f"{df['rank'].max()})")
    per_cluster = df.groupby("cluster")["representative"].nunique()
    if (per_cluster != 1).any():
        c = per_cluster.index[per_cluster != 1][0]
        raise RepresentativesError(f"{path}: cluster {c} names more than one representative")
    members = set(zip(df["cluster"], df["rank"]))
    for c, r in df.groupby("cluster")["representative"].first().items():
        if (c, r) not in members:
            raise RepresentativesError(f"{path}: cluster {c}: representative {r} is not "
                                       f"one of its members")
    return df


def representative_ranks(path: str, size: int | None = None) -> list[int]:
    """The sorted world ranks to record and replay (N = ``size`` when known)."""
    return sorted(int(r) for r in read_representatives(path, size)["representative"].unique())
