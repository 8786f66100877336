"""Measured runs as a tidy table, and their reduction over repeats.

Columns: ``procs`` (processes), ``time`` (seconds unless a ``unit``
column or ``--unit`` says otherwise), optional ``size`` and other launch
parameters, optional ``efficiency``, optional ``program``, optional
components of the time (``comp``, ``comm``: computation and communication,
extrapolated one by one with ``fit --components``).
One row per run; identical configurations may repeat.  Repeats scatter
wildly on shared machines (up to 40x), so they are reduced
to one row per configuration: the minimum time (extrapolation) or the maximum
efficiency (the metric).
"""
from __future__ import annotations

import pandas as pd


class DataError(Exception):
    """A measurement table that cannot be used (file and column named)."""


def load(path: str) -> pd.DataFrame:
    try:
        df = pd.read_parquet(path) if path.endswith(".parquet") else pd.read_csv(path)
    except (OSError, ValueError) as e:
        raise DataError(f"{path}: cannot read: {e}") from None
    if "procs" not in df:
        raise DataError(f"{path}: no 'procs' column (columns: {list(df.columns)})")
    if "time" not in df and "efficiency" not in df:
        raise DataError(f"{path}: needs a 'time' or an 'efficiency' column")
    for c in ["procs", "time", "efficiency", "size", "comp", "comm"]:
        if c in df:
            v = pd.to_numeric(df[c], errors="coerce")
            bad = v.isna() | ~v.abs().lt(float("inf"))
            if bad.any():
                i = df.index[bad][0]
                said = "an empty cell" if pd.isna(df[c].iloc[i]) else repr(df[c].iloc[i])
                raise DataError(f"{path}: row {i}: {c} is {said}, not a finite number")
            df[c] = v
    if (df["procs"] <= 0).any():
        raise DataError(f"{path}: 'procs' must be positive")
    if "time" in df and (df["time"] <= 0).any():
        bad = df.index[df["time"] <= 0][0]
        raise DataError(f"{path}: row {bad}: 'time' must be positive")
    return df


MEASURED = ("procs", "time", "efficiency", "program", "unit", "comp", "comm")


def parameters(df: pd.DataFrame) -> list[str]:
    """Launch parameters besides procs (everything but the measured columns)."""
    return [c for c in df.columns if c not in MEASURED]


def reduce(df: pd.DataFrame, how: str = "min") -> pd.DataFrame:
    """One row per configuration: ``min`` time or ``maxeff`` (max efficiency)."""
    keys = [c for c in ["program", "procs"] + parameters(df) if c in df]
    if how == "min":
        if "time" not in df:
            raise DataError("reduce by minimum time needs a 'time' column")
        return df.loc[df.groupby(keys)["time"].idxmin()].reset_index(drop=True)
    if how == "maxeff":
        if "efficiency" not in df:
            raise DataError("reduce by maximum efficiency needs an 'efficiency' column")
        return df.loc[df.groupby(keys)["efficiency"].idxmax()].reset_index(drop=True)
    raise DataError(f"unknown reduction {how!r}: min or maxeff")


def select(df: pd.DataFrame, expr: str | None) -> pd.DataFrame:
    """Rows matching a pandas query such as ``procs<=128`` (all when None)."""
    if not expr:
        return df
    try:
        return df.query(expr)
    except Exception as e:
        raise DataError(f"bad selection {expr!r}: {e}") from None
