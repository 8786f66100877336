"""Reading the CSV tables that stages pass each other, checked.

Each file between stages has its own reader in its producer's package
(docs/FILES.md); they share these checks, so that every bad file gets the
same kind of message: the file, the column, and the rank where it applies.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .output import write_atomic

# at most this many seconds in one value: 1e300 s of computation in a
# replay went into the computation table and the prediction as it was
MAX_SECONDS = 1e7


def read_table(path: str, columns, error, what: str, producer: str,
               integers=(), seconds=()) -> pd.DataFrame:
    """The table at ``path`` (CSV, or Parquet for a ``.parquet`` name).

    Raises ``error`` (an exception class) if it cannot be read, lacks one
    of ``columns``, is empty, has a non-integer value in ``integers``, or
    a value in ``seconds`` that is not a finite number >= 0 and at most
    MAX_SECONDS (named by the
    row's ``rank`` and ``seq`` where the table has them; a column of
    ``seconds`` not in ``columns`` is optional, checked where present).  ``what`` names
    the table and ``producer`` the command that writes it, for messages."""
    try:
        df = pd.read_parquet(path) if path.endswith(".parquet") else pd.read_csv(path)
    except (OSError, ValueError, UnicodeDecodeError) as e:
        raise error(f"{path}: cannot read {what} ({e})") from None
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise error(f"{path}: missing column(s) {', '.join(missing)} (write it with "
                    f"`{producer}`)")
    if df.empty:
        raise error(f"{path}: no rows")
    for c in integers:
        if not pd.api.types.is_integer_dtype(df[c]):
            raise error(f"{path}: column {c} must hold integers")
    for c in (c for c in seconds if c in df.columns):
        v = pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=float)
        bad = np.nonzero(~np.isfinite(v) | (v < 0) | (v > MAX_SECONDS))[0]
        if len(bad):
            i = bad[0]
            where = ", ".join(f"{k} {df[k].iloc[i]}" for k in ("rank", "seq") if k in df.columns)
            raise error(f"{path}: {where + ': ' if where else f'row {i}: '}{c} must be a "
                        f"finite number >= 0 (and at most {MAX_SECONDS:g} s), not "
                        f"{df[c].iloc[i]}")
    return df


def write_table(df: pd.DataFrame, path: str, columns) -> None:
    """Write ``df``'s ``columns`` to ``path`` (CSV, or Parquet for a
    ``.parquet`` name), atomically (:func:`write_atomic`)."""
    out = df.loc[:, list(columns)]
    if path.endswith(".parquet"):
        write_atomic(path, lambda tmp: out.to_parquet(tmp))
    else:
        write_atomic(path, lambda tmp: out.to_csv(tmp, index=False))
