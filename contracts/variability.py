"""The variability tables: ``replay/variability_rank<R>.csv`` (written by
``python -m replay``, one per representative) and ``variability.csv``
(every representative's rows, written by ``python -m replay.expand``
beside compute.csv), one row per copy.  How the figures are measured:
replay/variability.py; how the simulator samples them:
netsim/variability.py; ``python -m extrapolate --variability`` hands
each position class its representative's rows.

Read here only (docs/FILES.md):

==============  ====  =======================================================
column          unit  meaning
==============  ====  =======================================================
representative  -     the representative's world rank
copy            -     0 .. K-1; copy 0 is the measured replay
core            -     the CPU the copy was bound to (-1: not bound)
factor          -     the copy's core speed relative to the kept replay
                      (> 1: slower); 1 everywhere when nothing varied
sigma_run       -     std. dev. of log total, run to run (0: not measured)
sigma_span      -     std. dev. of log span, span to span (0: not measured)
rounds          -     rounds the figures come from
==============  ====  =======================================================
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .tables import read_table, write_table

COLUMNS = ("representative", "copy", "core", "factor", "sigma_run", "sigma_span", "rounds")
# a span 7x its mean one time in a hundred is no noise but a broken measurement
SIGMA_MAX = 2.0


class VariabilityError(ValueError):
    """A variability table that is missing, damaged or inconsistent."""


def rows(rank, factor, sigma_run, sigma_span, rounds, cores) -> pd.DataFrame:
    """One representative's rows, one per copy."""
    K = len(factor)
    return pd.DataFrame({"representative": rank, "copy": np.arange(K),
                         "core": -1 if cores is None else np.asarray(cores, int),
                         "factor": factor, "sigma_run": sigma_run, "sigma_span": sigma_span,
                         "rounds": rounds})


def nil(ranks) -> pd.DataFrame:
    """Rows saying that nothing was measured to vary for ``ranks``."""
    return pd.concat([rows(r, np.ones(1), 0.0, 0.0, 1, None) for r in ranks],
                     ignore_index=True)


def write_variability(df: pd.DataFrame, path: str) -> None:
    """Write the table, atomically, with full float precision."""
    write_table(df, path, COLUMNS)


def read_variability(path: str) -> pd.DataFrame:
    """The checked table: every column, integer ranks, copies 0..K-1 once
    each per representative, ``factor`` finite and > 0, both sigmas finite
    and >= 0 (and at most SIGMA_MAX), rounds >= 1."""
    df = read_table(path, COLUMNS, VariabilityError, "variability table", "python -m replay",
                    integers=("representative", "copy", "core", "rounds"),
                    seconds=("sigma_run", "sigma_span"))
    f = pd.to_numeric(df["factor"], errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(f) | (f <= 0) | (df["sigma_run"] > SIGMA_MAX) | \
        (df["sigma_span"] > SIGMA_MAX) | \
        (df["rounds"] < 1)
    if bad.any():
        i = int(np.argmax(bad.to_numpy()))
        raise VariabilityError(f"{path}: representative {df['representative'].iat[i]}, copy "
                               f"{df['copy'].iat[i]}: factor must be finite and > 0, sigmas "
                               f"within 0..2, rounds >= 1")
    df["factor"] = f
    for rep, g in df.groupby("representative"):
        if sorted(g["copy"]) != list(range(len(g))):
            raise VariabilityError(f"{path}: representative {rep}: copies must be 0..K-1, "
                                   f"each once, not {sorted(g['copy'])[:10]}")
        if g["sigma_run"].nunique() > 1 or g["sigma_span"].nunique() > 1:
            raise VariabilityError(f"{path}: representative {rep}: sigma_run and sigma_span "
                                   f"are one value per representative")
    return df
