"""How much one representative's computation varies on the target node.

A full-scale run waits, at every synchronisation, for the slowest of its
ranks; its ranks run on cores of unequal speed (turbo, thermal limits,
memory-bandwidth neighbours) and each span of work varies from one
iteration to the next.  ``python -m replay --load K`` runs a
representative as K concurrent copies, each bound to its own core as the
full run would place its ranks, over ``--repeats`` rounds, and keeps every
copy's span times.  This module turns them into three numbers per copy,
the distribution the simulator samples from (netsim/variability.py).

The model, in logarithms of each replay's total computation ``T[c, k]``
(copy c, round k; the span before MPI initialisation left out)::

    log T[c, k] = b[k] + a[c] + e[c, k]

``b[k]``, the round's level (the whole node faster or slower for a while:
the least disturbed round is kept, as before); ``a[c]``, the persistent
speed of copy c's core, the mean over rounds; ``e``, what is left, a
copy's run-to-run noise (``sigma_run``, its standard deviation; needs two
copies and two rounds).  ``factor`` is copy c's core relative to the kept
replay (copy 0 in its least disturbed round, whose own residual is taken
out): a member placed on that core takes ``factor`` times the kept
replay's spans.  ``sigma_span``: the standard deviation of the logarithm
of one span's share of its replay's total, around that span's mean share
over all replays (spans of at least ``MIN_SPAN`` seconds, weighted by
length): iteration-to-iteration noise, independent between ranks.

``variability_rank<R>.csv`` (written by ``python -m replay``, one per
representative) and ``variability.csv`` (every representative's rows,
written by ``python -m replay.expand`` beside compute.csv), one row per
copy; read here only (docs/FILES.md):

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

COLUMNS = ("representative", "copy", "core", "factor", "sigma_run", "sigma_span", "rounds")
# shorter spans are timer and cache noise, not the iteration-to-iteration
# variation a synchronising run pays for
MIN_SPAN = 20e-6


class VariabilityError(ValueError):
    """A variability table that is missing, damaged or inconsistent."""


def estimate(rank: int, spans: np.ndarray, kept_round: int, cores=None) -> pd.DataFrame:
    """The rows of one representative from its replays' span seconds.

    ``spans[c, k, s]``: copy c, round k, span s (the span before MPI
    initialisation left out); ``kept_round``: the round whose copy 0 is the
    kept replay; ``cores[c]``: the CPU copy c ran on (-1: not bound)."""
    spans = np.asarray(spans, dtype=float)
    K, R, _ = spans.shape
    total = spans.sum(axis=2)
    if (total <= 0).any():                  # nothing measured: nothing varies
        return _rows(rank, np.ones(K), 0.0, 0.0, R, cores)
    lt = np.log(total)
    r = lt - lt.mean(axis=0, keepdims=True)          # less the round's level b[k]
    a = r.mean(axis=1)                               # the core's persistent speed
    e = r - a[:, None]
    sigma_run = float(np.sqrt((e ** 2).sum() / ((K - 1) * (R - 1)))) if K > 1 and R > 1 else 0.0
    factor = np.exp(a - a[0] - e[0, kept_round])
    return _rows(rank, factor, sigma_run, _sigma_span(spans, total), R, cores)


def _sigma_span(spans: np.ndarray, total: np.ndarray) -> float:
    """Span-to-span noise: the weighted standard deviation of log shares."""
    K, R, S = spans.shape
    if K * R < 2:
        return 0.0
    share = spans.reshape(K * R, S) / total.reshape(K * R, 1)
    mean_len = spans.reshape(K * R, S).mean(axis=0)
    use = (mean_len >= MIN_SPAN) & (share > 0).all(axis=0)
    if not use.any():
        return 0.0
    ls = np.log(share[:, use])
    resid = ls - ls.mean(axis=0, keepdims=True)
    w = np.broadcast_to(mean_len[use], resid.shape)
    dof = (K * R - 1) / (K * R)                      # each span's own mean is fitted
    return float(np.sqrt((w * resid ** 2).sum() / w.sum() / dof))


def _rows(rank, factor, sigma_run, sigma_span, rounds, cores) -> pd.DataFrame:
    K = len(factor)
    return pd.DataFrame({"representative": rank, "copy": np.arange(K),
                         "core": -1 if cores is None else np.asarray(cores, int),
                         "factor": factor, "sigma_run": sigma_run, "sigma_span": sigma_span,
                         "rounds": rounds})


def nil(ranks) -> pd.DataFrame:
    """Rows saying that nothing was measured to vary for ``ranks``."""
    return pd.concat([_rows(r, np.ones(1), 0.0, 0.0, 1, None) for r in ranks],
                     ignore_index=True)


def write_variability(df: pd.DataFrame, path: str) -> None:
    """Write the table, atomically, with full float precision."""
    from instrument.tables import write_table
    write_table(df, path, COLUMNS)


def read_variability(path: str) -> pd.DataFrame:
    """The checked table: every column, integer ranks, copies 0..K-1 once
    each per representative, ``factor`` finite and > 0, both sigmas finite
    and >= 0 (and at most 2: a span 7x its mean one time in a hundred is
    no noise but a broken measurement), rounds >= 1."""
    from instrument.tables import read_table
    df = read_table(path, COLUMNS, VariabilityError, "variability table", "python -m replay",
                    integers=("representative", "copy", "core", "rounds"),
                    seconds=("sigma_run", "sigma_span"))
    f = pd.to_numeric(df["factor"], errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(f) | (f <= 0) | (df["sigma_run"] > 2) | (df["sigma_span"] > 2) | \
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
