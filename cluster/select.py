"""Hierarchical clustering of computation vectors and choice of
representatives (docs/METHODS.md: the cluster step).

Inside each group of ranks with identical communication sequences:
agglomerative clustering (scipy) on the computation vectors, Manhattan
distance and complete linkage by default, cut at an absolute distance
``threshold * mean total computation per rank``.

Why that threshold means something: with complete linkage every pair of
ranks in a cluster is within the cut distance, and the Manhattan distance
between two vectors is at least the difference of their totals.  So with
the default 5 % no member's total computation differs from its
representative's by more than 5 % of the mean rank's total: a bound on the
error the clustering can add to the prediction, checked in the report.

Scale: identical vectors are merged first (exact for complete and single
linkage).  Groups with more distinct vectors than ``max_exact`` are first
covered by "leaders" (every vector within ``r = cut/4`` of its leader),
then the leaders are clustered with the cut reduced by ``2r``; for complete
linkage the pairwise bound above still holds.  Small inputs never take
this path, so they get the exact result.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import cdist, pdist

from .vectors import ClusterError

METRICS = {"manhattan": "cityblock", "cityblock": "cityblock", "euclidean": "euclidean",
           "chebyshev": "chebyshev", "cosine": "cosine", "correlation": "correlation"}
LINKAGES = ("complete", "average", "single", "ward")
DEFAULT_THRESHOLD = 0.05
DEFAULT_MAX_EXACT = 2000
# the automatic cut: NOISE_FACTOR times the host's measured span noise
# (cluster.vectors.span_noise), within [AUTO_MIN, AUTO_MAX] of the mean total
NOISE_FACTOR = 4.0
AUTO_MIN, AUTO_MAX = 0.02, 0.5


# a gap in the dendrogram: the next merge at least this many times higher;
# gaps within TIE of the largest count as ties
GAP = 1.5
TIE = 0.8
# ranks a cluster needs before a gap may join it above the noise cut: two
# ranks alone show one merge, no slow growth to read
MIN_JOINED = 3


def gap_cut(X: np.ndarray, floor: float, metric: str = "manhattan", method: str = "complete",
            max_exact: int = DEFAULT_MAX_EXACT) -> float:
    """The automatic cut distance of one group: in the clearest gap of its
    dendrogram above ``floor`` (the noise-based cut).

    A rank slowed as a whole (a busy core for the whole run) looks like a
    rank with more work, span by span: no noise measured within ranks can
    tell them apart, but the merge heights can.  Ranks of one class merge
    at heights that grow slowly; the merge of two classes jumps.  The cut
    goes in the middle (geometric) of the largest jump of at least GAP
    times among the heights above ``floor`` (of near ties, the highest),
    and at ``floor`` when there is none.  Large groups (the approximate
    path) use ``floor``.  :func:`keep_unsupported_apart` then checks what
    the cut joined above the floor."""
    n = len(X)
    if n < 2 or n > max_exact:
        return floor
    U = np.unique(X, axis=0)
    if len(U) < 2:
        return floor
    h = np.sort(linkage(pdist(U, _metric(metric)), method=method)[:, 2])
    h = np.concatenate([[floor], h[h > floor]])
    if len(h) < 2:
        return floor
    ratio = h[1:] / np.maximum(h[:-1], 1e-300)
    if ratio.max() < GAP:
        return floor
    # a near tie goes to the higher gap: slowed ranks of one class make jumps
    # almost as large as the classes' own gap (16 ranks of the default
    # example: 1.88 inside the heavy class, 1.85 between the classes); a
    # lower gap splits a class only when it is clearly (1 / TIE) larger
    i = int(np.nonzero(ratio >= max(GAP, TIE * ratio.max()))[0][-1])
    return float(np.sqrt(h[i] * h[i + 1]))


def keep_unsupported_apart(X: np.ndarray, labels: np.ndarray, at_floor: np.ndarray,
                           max_error: float, metric: str = "manhattan") -> np.ndarray:
    """``labels`` (clusters at the gap's cut), where a cluster that joins
    several clusters of ``at_floor`` (the noise cut) without support is
    split back into them.  Supported: it holds at least MIN_JOINED ranks,
    and no member's total differs from its representative's by more than
    ``max_error`` (seconds; the workflow's is AUTO_MAX of the mean total).

    Splitting costs a replay; a wrong merge costs the prediction.  Two
    ranks show a single merge, which is itself the jump: on a noisy
    16-core virtual machine the 2- and 3-unit ranks of 4 ranks of
    examples/uneven.py came out 27 % apart and were joined (the prediction
    29 % short).  And beside a running test suite, 3 of the 8 two-unit
    ranks of the default example ran 1.2-1.4x slower still, as far from
    the other five as those were from the one-unit ranks: the clearest gap
    set the three apart and joined the five to the one-unit class, 89 %
    from their representative."""
    out = labels.copy()
    reps = representatives(X, labels, metric)
    totals = X.sum(axis=1)
    fresh = labels.max() + 1
    for c in np.unique(labels):
        inside = np.nonzero(labels == c)[0]
        parts = np.unique(at_floor[inside])
        if len(parts) == 1:
            continue
        if len(inside) >= MIN_JOINED and \
                np.abs(totals[inside] - totals[reps[c]]).max() <= max_error:
            continue
        for part in parts[1:]:
            out[inside[at_floor[inside] == part]] = fresh
            fresh += 1
    return _in_rank_order(out)


def split_by_magnitude(X: np.ndarray, labels: np.ndarray, ratio: float,
                       floor: float) -> np.ndarray:
    """``labels`` with every cluster whose members' totals differ by more
    than a factor ``ratio`` split (complete linkage on the logarithm of
    ``total + floor``, cut at ``log(ratio)``).

    The automatic cut is a fraction of the mean total over all ranks: next
    to a heavy class, light classes that differ 1.7x fall within it (12
    ranks doing 1, 3 and 9 units of work: totals 0.021, 0.036 and 0.099 s,
    the first two joined, 43 % clustering error).  Work that differs by
    half is never one class, whatever the other classes weigh; ranks of
    one class slowed 1.2-1.4x by a busy core stay together.  ``floor``
    keeps ranks that hardly compute from splitting over noise."""
    out = labels.copy()
    fresh = labels.max() + 1
    t = np.log(X.sum(axis=1) + floor)
    for c in np.unique(labels):
        inside = np.nonzero(labels == c)[0]
        if len(inside) < 2 or np.ptp(t[inside]) <= np.log(ratio):
            continue
        sub = fcluster(linkage(t[inside, None], method="complete", metric="cityblock"),
                       t=np.log(ratio), criterion="distance")
        for part in np.unique(sub)[1:]:
            out[inside[sub == part]] = fresh
            fresh += 1
    return _in_rank_order(out)


def auto_threshold(noise: float) -> float:
    """The cut, as a fraction of the mean total, for a host whose span noise
    is ``noise``.  Two ranks with identical work differ by about 1.4 x the
    noise of their totals; complete linkage keeps a cluster's *widest* pair
    within the cut, so a factor of about 3 more holds a class of hundreds
    of ranks together.  Clamped: below 2 % a cut only splits timer noise;
    above 50 % it would merge classes whose work differs by half.  With no
    repeated span to measure (NaN), the fixed default."""
    if not noise == noise:                 # NaN
        return DEFAULT_THRESHOLD
    return float(min(max(NOISE_FACTOR * noise, AUTO_MIN), AUTO_MAX))


def _metric(name: str) -> str:
    try:
        return METRICS[name]
    except KeyError:
        raise ClusterError(f"unknown metric {name!r}; choose from {sorted(METRICS)}") from None


def _leaders(X: np.ndarray, radius: float, metric: str, chunk: int = 4096):
    """Greedy leader cover: every row within ``radius`` of its leader.

    Returns (leader row indices, leader index of every row)."""
    leaders: list[int] = []
    assign = np.full(len(X), -1, dtype=np.int64)
    for lo in range(0, len(X), chunk):
        idx = np.arange(lo, min(lo + chunk, len(X)))
        if leaders:
            d = cdist(X[idx], X[leaders], metric)
            best = d.argmin(axis=1)
            ok = d[np.arange(len(idx)), best] <= radius
            assign[idx[ok]] = best[ok]
            idx = idx[~ok]
        while len(idx):
            lead = idx[0]
            leaders.append(int(lead))
            d = cdist(X[idx], X[lead:lead + 1], metric)[:, 0]
            near = d <= radius
            assign[idx[near]] = len(leaders) - 1
            idx = idx[~near]
    return np.array(leaders, dtype=np.int64), assign


def cluster_group(X: np.ndarray, cut: float, metric: str = "manhattan",
                  method: str = "complete", max_exact: int = DEFAULT_MAX_EXACT) -> np.ndarray:
    """Cluster labels (0..k-1) of the rows of X, cut at distance ``cut``."""
    metric = _metric(metric)
    if method not in LINKAGES:
        raise ClusterError(f"unknown linkage {method!r}; choose from {LINKAGES}")
    if method == "ward" and metric != "euclidean":
        raise ClusterError("ward linkage needs --metric euclidean")
    n = len(X)
    if n == 1:
        return np.zeros(1, dtype=np.int64)
    # identical vectors: cluster the distinct ones (exact for complete/single;
    # for average/ward duplicates carry weight, so keep them unless too many)
    dedupe = method in ("complete", "single") or n > max_exact
    if dedupe:
        U, inverse = np.unique(X, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
    else:
        U, inverse = X, np.arange(n)
    if len(U) == 1:
        return np.zeros(n, dtype=np.int64)
    if len(U) <= max_exact:
        Z = linkage(pdist(U, metric), method=method)
        labels = fcluster(Z, t=cut, criterion="distance") - 1
    else:
        radius = cut / 4
        while True:
            lead, assign = _leaders(U, radius, metric)
            if len(lead) <= max_exact or radius >= cut / 2:
                break
            radius *= 1.5      # too many leaders: coarser cover, smaller second cut
        if len(lead) == 1:
            return np.zeros(n, dtype=np.int64)
        Z = linkage(pdist(U[lead], metric), method=method)
        lab = fcluster(Z, t=max(cut - 2 * radius, 0.0), criterion="distance") - 1
        labels = lab[assign]
    return _in_rank_order(labels[inverse])


def _in_rank_order(labels: np.ndarray) -> np.ndarray:
    """Labels 0..k-1 (each present) renumbered by first occurrence in rank
    order, so that they are deterministic."""
    _, first = np.unique(labels, return_index=True)
    return np.argsort(np.argsort(first))[labels]


def representatives(X: np.ndarray, labels: np.ndarray, metric: str = "manhattan") -> np.ndarray:
    """Index (row of X) of each cluster's representative: the member closest
    to the cluster centroid (ties: the first row)."""
    metric = _metric(metric)
    reps = np.empty(labels.max() + 1, dtype=np.int64)
    for c in range(len(reps)):
        members = np.nonzero(labels == c)[0]
        centroid = X[members].mean(axis=0, keepdims=True)
        d = cdist(X[members], centroid, metric)[:, 0]
        reps[c] = members[int(np.argmin(d))]
    return reps


def select(table: pd.DataFrame, vectors: dict, metric: str = "manhattan",
           method: str = "complete", threshold: float | str = DEFAULT_THRESHOLD,
           max_exact: int = DEFAULT_MAX_EXACT, noise: float = float("nan")) -> pd.DataFrame:
    """Groups, clusters and representatives of all ranks.

    ``threshold``: the cut as a fraction of the mean total, or "auto": per
    group, :func:`gap_cut` above the cut that the host's ``noise`` implies
    (:func:`auto_threshold`), where what it joins has support
    (:func:`keep_unsupported_apart`; else as at the noise cut), and no
    cluster with totals more than 1 + AUTO_MAX apart
    (:func:`split_by_magnitude`).  The cut
    used, as a fraction of the mean total, is the result's ``cut`` column
    (one value per group).

    ``table`` has columns ``rank``, ``signature``, ``length`` (from
    :func:`cluster.vectors.read_rank_vectors`); ``vectors[rank]`` is a rank's
    computation vector.  Returns one row per rank: ``rank, group, cluster,
    representative, total, rep_total, error`` where ``error`` is the relative
    difference between the rank's total computation and its representative's.
    """
    if len(table) == 0:
        raise ClusterError("no ranks to cluster")
    auto = threshold == "auto"
    if not auto and not float(threshold) >= 0:
        raise ClusterError(f"threshold must be >= 0, not {threshold}")
    table = table.sort_values("rank").reset_index(drop=True)
    totals = np.array([float(np.sum(vectors[r])) for r in table["rank"]])
    mean = float(totals.mean())
    cut = (auto_threshold(noise) if auto else float(threshold)) * mean
    # groups numbered in order of their lowest rank
    members = table.groupby("signature", sort=False).indices   # signature -> rows
    order = sorted(members, key=lambda sig: members[sig][0])   # rows are rank-sorted
    all_ranks = table["rank"].to_numpy()
    out = []
    next_cluster = 0
    for g, sig in enumerate(order):
        ranks = all_ranks[members[sig]]
        lengths = {len(vectors[r]) for r in ranks}
        if len(lengths) != 1:
            raise ClusterError(
                f"ranks {list(ranks[:10])} have identical communication sequences but "
                f"computation vectors of lengths {sorted(lengths)}: this cannot happen for a "
                f"valid trace (each call ends one computation segment); the trace is damaged")
        X = np.vstack([vectors[r] for r in ranks])
        g_cut = gap_cut(X, cut, metric, method, max_exact) if auto else cut
        labels = cluster_group(X, g_cut, metric, method, max_exact)
        if auto and g_cut > cut:
            labels = keep_unsupported_apart(X, labels,
                                            cluster_group(X, cut, metric, method, max_exact),
                                            AUTO_MAX * mean, metric)
        if auto:
            labels = split_by_magnitude(X, labels, 1 + AUTO_MAX, AUTO_MIN * mean)
        reps = representatives(X, labels, metric)
        rep_rank = ranks[reps[labels]]
        tot = X.sum(axis=1)
        rep_tot = tot[reps[labels]]
        with np.errstate(divide="ignore", invalid="ignore"):
            err = np.where(rep_tot > 0, np.abs(tot - rep_tot) / rep_tot,
                           np.where(tot > 0, np.inf, 0.0))
        out.append(pd.DataFrame({"rank": ranks, "group": g,
                                 "cluster": labels + next_cluster,
                                 "representative": rep_rank, "total": tot,
                                 "rep_total": rep_tot, "error": err,
                                 "cut": g_cut / mean if mean > 0 else 0.0}))
        next_cluster += labels.max() + 1
    return pd.concat(out, ignore_index=True).sort_values("rank").reset_index(drop=True)


def summary(reps: pd.DataFrame, vectors: dict | None = None,
            metric: str = "manhattan") -> pd.DataFrame:
    """Per cluster: group, size, representative, mean total, spread, max error.

    ``spread`` is the largest distance of a member's vector to the
    representative's, relative to the representative's total (needs
    ``vectors``; else NaN)."""
    rows = []
    metric_ = _metric(metric)
    for c, g in reps.groupby("cluster", sort=True):
        rep = int(g["representative"].iloc[0])
        spread = np.nan
        if vectors is not None:
            X = np.vstack([vectors[r] for r in g["rank"]])
            d = cdist(X, vectors[rep][None, :], metric_)[:, 0]
            tot = float(np.sum(vectors[rep]))
            spread = float(d.max() / tot) if tot > 0 else 0.0
        rows.append({"cluster": int(c), "group": int(g["group"].iloc[0]), "size": len(g),
                     "representative": rep, "mean_total": float(g["total"].mean()),
                     "spread": spread, "max_error": float(g["error"].max())})
    return pd.DataFrame(rows)
