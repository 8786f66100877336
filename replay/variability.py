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
copies and two rounds).  ``factor``, copy c's core relative to copy 0's:
``exp(a'[c] - a[0])``, where ``a'`` is ``a`` drawn towards the mean core
by what the rounds cannot tell from noise: a mean over R rounds carries
``sigma_run**2 / R`` of run-to-run noise, so of the spread of the ``a[c]``
only what exceeds it is the cores' own (a random-effects estimate).
Copy 0's own factor is then not 1 where its level was partly noise: the
replays the prediction starts from are copy 0's.  Unshrunk, 16 copies
over 3 rounds with 14 % run-to-run noise made a "slowest core" 24 % slow
out of noise alone, which every sample then paid at every
synchronisation on top of the run noise drawn again.  ``sigma_span``: the robust standard deviation
(1.4826 x the median absolute deviation) of the logarithm of a span
around that span's centre, each replay's level taken out (spans whose
median is at least ``MIN_SPAN`` seconds, weighted by length):
iteration-to-iteration noise of the rank's own, independent between
ranks.  Noise the concurrent copies share at the same moment (the node
busy for a while) slows every rank of a real run alike and makes none
wait for another: it is left out (with one copy, the spread over the
rounds is all there is).

What is sampled around is each span's *mean* over every copy and round,
each replay first brought to copy 0's level in the kept round (divided by
its fitted ``exp(b[k] + a[c])``): :func:`mean_spans`.  The kept replay's
own spans are one draw of that noise already; sampling noise around them
would count it twice (at N=2, where each rank is its own representative,
the prediction came out high by the expected maximum of two such draws).

The files it writes, and their one reader: contracts/variability.py.
"""
from __future__ import annotations

import glob
import os

import numpy as np
import pandas as pd

from contracts.variability import SIGMA_MAX, rows

# shorter spans are timer and cache noise, not the iteration-to-iteration
# variation a synchronising run pays for
MIN_SPAN = 20e-6
def _fit(spans: np.ndarray):
    """(a, b, e, sigma_run, a') of the model above from ``spans[c, k,
    s]``, ``a'`` the ``a`` drawn in (:func:`shrink_cores`); None when a
    replay measured no computation at all."""
    total = spans.sum(axis=2)
    if (total <= 0).any():
        return None
    K, R = total.shape
    lt = np.log(total)
    b = lt.mean(axis=0)                              # the round's level
    a = (lt - b).mean(axis=1)                        # the core's persistent speed
    e = lt - b - a[:, None]
    sigma_run = float(np.sqrt((e ** 2).sum() / ((K - 1) * (R - 1)))) if K > 1 and R > 1 else 0.0
    return a, b, e, sigma_run, shrink_cores(a, sigma_run, R)


def estimate(rank: int, spans: np.ndarray, cores=None) -> pd.DataFrame:
    """The rows of one representative from its replays' span seconds.

    ``spans[c, k, s]``: copy c, round k, span s (the span before MPI
    initialisation left out); ``cores[c]``: the CPU copy c ran on (-1:
    not bound)."""
    spans = np.asarray(spans, dtype=float)
    K, R, _ = spans.shape
    fit = _fit(spans)
    if fit is None:                         # nothing measured: nothing varies
        return rows(rank, np.ones(K), 0.0, 0.0, R, cores)
    a, _, _, sigma_run, drawn_in = fit
    # beyond SIGMA_MAX a measurement is broken, not noisy: capped, so that
    # what is written is always what read_variability takes
    return rows(rank, np.exp(drawn_in - a[0]), min(sigma_run, SIGMA_MAX),
                 min(_sigma_span(spans), SIGMA_MAX), R, cores)


def shrink_cores(a: np.ndarray, sigma_run: float, rounds: int) -> np.ndarray:
    """The copies' log core speeds ``a`` (each a mean over ``rounds``
    rounds) drawn towards their mean until their spread is the cores' own:
    ``a`` is a core's speed plus noise of variance ``sigma_run**2 /
    rounds``, so the cores' variance is what the spread has beyond that
    (none: every core alike).  Scaled so that the variance is that, not
    less (a posterior mean would shrink further): the samples deal these
    cores, and the slowest of them sets the pace."""
    if len(a) < 2 or sigma_run <= 0:
        return a
    noise = sigma_run ** 2 / rounds
    spread = float(np.var(a, ddof=1))
    if spread <= 0:
        return a
    own = max(spread - noise, 0.0)
    return a.mean() + (a - a.mean()) * np.sqrt(own / spread)


def mean_spans(spans: np.ndarray, kept_round: int) -> np.ndarray:
    """Each span's mean over every copy and round, each replay brought to
    copy 0's level in round ``kept_round``: what the sampled noise is
    around.  With one replay, or replays that differ by a factor only, the
    kept replay's own spans."""
    spans = np.asarray(spans, dtype=float)
    fit = _fit(spans)
    if fit is None:
        return spans[0, kept_round]
    a, b = fit[:2]
    level = np.exp(b[None, :] + a[:, None])          # each replay's fitted total
    return (spans / level[:, :, None]).mean(axis=(0, 1)) * level[0, kept_round]


def _sigma_span(spans: np.ndarray) -> float:
    """Span-to-span noise of one rank's own: the (robust, weighted)
    standard deviation of log spans around each span's centre, each
    replay's level taken out.  With two copies or
    more, only what differs between copies *at the same moment* counts:
    they ran at the same time, and what slowed them alike (the node busy
    for a while) slows every rank of a real run alike and makes none wait
    for another.  Copies drift apart as they run, so each span of copy 0
    is compared with the span another copy was running at its start, not
    with the one of the same index."""
    K, R, S = spans.shape
    if K * R < 2:
        return 0.0
    mean_len = spans.reshape(K * R, S).mean(axis=0)
    # by the median length: one replay's hiccup makes no 0.1 us span long
    use = (np.median(spans.reshape(K * R, S), axis=0) >= MIN_SPAN) & (spans > 0).all(axis=(0, 1))
    if not use.any():
        return 0.0
    with np.errstate(divide="ignore"):
        ls = np.log(spans)
    w = np.where(use, mean_len, 0.0)
    # each span's own centre over the replays, then each replay's level (a
    # median: a replay that lost a time slice is not slower everywhere)
    resid = np.where(use, ls - np.median(np.where(use, ls, 0), axis=(0, 1)), 0.0)
    for c in range(K):
        for k in range(R):
            resid[c, k] -= _weighted_median(resid[c, k][use], w[use])
    resid = np.where(use, resid, 0.0)
    if K == 1:
        # each span's own mean is fitted over the R rounds
        return float(_robust_sd(resid[0][:, use], np.tile(w[use], (R, 1))) * np.sqrt(R / (R - 1)))
    diffs, weights = [], []
    for k in range(R):
        start0 = np.cumsum(spans[0, k]) - spans[0, k]
        for c in range(1, K):
            ends = np.cumsum(spans[c, k])
            at = np.minimum(np.searchsorted(ends, start0, side="right"), S - 1)
            both = use & use[at]
            diffs.append((resid[0, k] - resid[c, k, at])[both])
            weights.append(w[both])
    if not sum(len(d) for d in diffs):
        return 0.0
    # a difference of two independent draws has twice their variance
    return float(_robust_sd(np.concatenate(diffs), np.concatenate(weights)) / np.sqrt(2))


def _weighted_median(x: np.ndarray, w: np.ndarray) -> float:
    order = np.argsort(x)
    cum = np.cumsum(w[order])
    return float(x[order][np.searchsorted(cum, cum[-1] / 2)])


def _robust_sd(x: np.ndarray, w: np.ndarray) -> float:
    """The standard deviation of ``x`` (weights ``w``) from its weighted
    median absolute value (1.4826 times it, exact for normal draws): a few
    spans stretched 3-30x by a time slice lost to another process (seen
    on the shared development machine) are the host's disturbance, like a
    disturbed repeat, not the target node's own noise, and a squared
    deviation let them set the noise of every span (+10 % at N=2)."""
    return 1.4826 * _weighted_median(np.abs(np.ravel(x)), np.ravel(w))


def round_dirs(replay_dir: str) -> list[str]:
    """The round directories of a replay: its repeat<k>/ in order, or the
    directory itself when it was replayed once."""
    found = glob.glob(os.path.join(replay_dir, "repeat[0-9]*"))
    found = [d for d in found if os.path.basename(d)[len("repeat"):].isdigit()]
    return sorted(found, key=lambda d: int(os.path.basename(d)[len("repeat"):])) or [replay_dir]


def copy_path(round_dir: str, copy: int, rank: int) -> str:
    """Where copy ``copy`` of rank ``rank``'s replay in a round is written
    (copy 0, the measured one, as a replay without copies)."""
    if copy == 0:
        return os.path.join(round_dir, f"rank{rank}.csv")
    return os.path.join(round_dir, "copies", f"copy{copy}", f"rank{rank}.csv")


def copies_in(round_dir: str, rank: int) -> int:
    """How many copies of ``rank`` a round replayed (1: no copies)."""
    return 1 + len(glob.glob(os.path.join(round_dir, "copies", "copy*", f"rank{rank}.csv")))


def collect(rank: int, rounds: list[str], copies: int, warn=None):
    """Rank ``rank``'s replays in every round and copy: ``(spans[c, k, s],
    ops, kept_round, copies kept)``, the spans in seconds (replayed.
    target_seconds) with the span before MPI initialisation left out,
    ``ops`` the calls of the kept replay (copy 0's least disturbed round).
    A copy whose replay made other calls than the kept one (a
    non-deterministic application) is left out, said through ``warn``."""
    from contracts.replayed import read_replayed, target_seconds
    reps = [[read_replayed(copy_path(d, c, rank), rank) for d in rounds] for c in range(copies)]
    kept = int(np.argmin([target_seconds(df).sum() for df in reps[0]]))
    ops = reps[0][kept]["op"].to_numpy()
    same = [c for c in range(copies)
            if all(len(df) == len(ops) and (df["op"].to_numpy() == ops).all() for df in reps[c])]
    if len(same) < copies and warn:
        warn(f"rank {rank}: copies {sorted(set(range(copies)) - set(same))} made other calls "
             f"than the kept replay and are left out of its variability")
    spans = np.array([[target_seconds(df)[ops != "init"] for df in reps[c]] for c in same])
    return spans, ops, kept, same
