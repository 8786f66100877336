"""Choosing a model without held-out data, and prediction intervals.

A user extrapolating from small runs has no held-out large runs to judge
models by.  What the training runs do allow is *rolling origin*: cut them
at each process count q_k, fit on the runs with procs <= q_k, and predict
the larger training runs.  A model that extrapolated well inside the data
is the best bet beyond it.

* :func:`rolling_origin` gives those out-of-sample predictions as a table:
  ``cut`` (largest procs fitted), ``procs`` (predicted), ``distance``
  (log2(procs / cut), how far out), ``log_ratio`` (log(measured /
  predicted); +inf where the model predicted a non-positive or non-finite
  time, or could not be fitted).
* :class:`Auto` answers with the prior model, ``loglinear2``, unless the
  training runs hold the evidence to overturn it: two cuts or more, and
  another candidate's relative error per doubling, |log_ratio| / distance,
  smaller at the last cut (ties broken by the mean over all cuts).  One
  cut is one fit predicting one process count: a three-coefficient model
  fitted through three process counts has nothing left over to be judged
  by, so its single error says more about that fit than about the model.
  The prior is the model that extrapolated best on published measurements
  of unrelated codes (bench/RESULTS.md): whichever family of them is left
  out, it has the lowest error on the others, each family weighted alike.
  Where a model gives a non-positive or non-finite time at a requested
  point, the next candidate answers.
* :func:`interval` turns a model's rolling-origin residuals into a
  split-conformal interval: the error per doubling at the level's quantile
  (with the finite-sample correction), times the distance of the predicted
  point from the largest training run; never narrower than the spread of
  the repeats themselves.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .models import MODELS, make

COLUMNS = ["cut", "procs", "distance", "log_ratio"]
# candidates of the automatic choice; the explicit-dependence recursion is
# left out (it diverges on short series, as its source reports)
CANDIDATES = [m for m in MODELS if m != "explicit"]


def rolling_origin(factory, df: pd.DataFrame, min_configs: int) -> pd.DataFrame:
    """Out-of-sample predictions of the model ``factory()`` at every cut of
    ``df`` (reduced: one row per configuration) leaving at least
    ``min_configs`` process counts to fit."""
    qs = np.sort(df["procs"].unique())
    rows = []
    for k in range(min_configs, len(qs)):
        cut = qs[k - 1]
        train, test = df[df["procs"] <= cut], df[df["procs"] > cut]
        try:
            pred = factory().fit(train).predict(test)
        except (ValueError, np.linalg.LinAlgError, ZeroDivisionError):
            pred = np.full(len(test), np.nan)
        with np.errstate(divide="ignore", invalid="ignore"):
            lr = np.where(np.isfinite(pred) & (pred > 0),
                          np.log(test["time"].to_numpy(float) / pred), np.inf)
        rows.append(pd.DataFrame({"cut": cut, "procs": test["procs"].to_numpy(float),
                                  "distance": np.log2(test["procs"].to_numpy(float) / cut),
                                  "log_ratio": lr}))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=COLUMNS)


def score(residuals: pd.DataFrame) -> float:
    """Mean relative error per doubling (inf when any prediction failed)."""
    if residuals.empty:
        return math.inf
    return float(np.mean(_per_doubling(residuals)))


def _per_doubling(residuals: pd.DataFrame) -> np.ndarray:
    return (np.abs(residuals["log_ratio"].to_numpy(float))
            / residuals["distance"].to_numpy(float))


def interval(pred, distance, residuals: pd.DataFrame, level: float = 0.9,
             floor: float = 0.0):
    """(low, high) around ``pred`` at log2-``distance`` beyond the training
    runs; NaN where there are no finite residuals.  ``floor`` is the least
    half-width in log space (the repeats' spread)."""
    pred, distance = np.asarray(pred, float), np.asarray(distance, float)
    r = _per_doubling(residuals)
    r = np.sort(r[np.isfinite(r)])
    if len(r) == 0:
        return np.full_like(pred, np.nan), np.full_like(pred, np.nan)
    # split-conformal quantile: the ceil((n+1) level)-th smallest; beyond the
    # data (few residuals) the largest one seen
    k = min(math.ceil((len(r) + 1) * level), len(r)) - 1
    half = np.maximum(r[k] * np.maximum(distance, 0.0), floor)
    return pred * np.exp(-half), pred * np.exp(half)


def repeat_spread(raw: pd.DataFrame, keys: list[str]) -> float:
    """Median log(max/min) of the time over repeats of one configuration
    (0 without repeats)."""
    g = raw.groupby(keys)["time"]
    spread = np.log(g.max() / g.min())[g.size() > 1]
    return float(spread.median()) if len(spread) else 0.0


class Auto:
    """The prior model, or the candidate that extrapolated best within the
    training runs when they hold the evidence for it.

    Candidates are ranked by their error per doubling at the last cut (the
    one fitted to the most runs, closest to the real extrapolation), ties
    broken by the mean over all cuts.  The ``prior`` answers unless it was
    judged on at least ``min_cuts`` cuts and a candidate did better at the
    last one; without the prior (too few runs to fit it) the best-ranked
    candidate answers, the power law when nothing could be judged.  The
    interval pools the residuals of every candidate whose score is finite:
    the choice itself is uncertain, and a chosen model's own residuals are
    optimistic (it may have been chosen for having small ones).

    ``fit(df)`` on a reduced table; ``predict(df)``; ``interval(df, level)``;
    ``ranking_`` is the table of candidates (model, last, score, cuts), best
    first; ``name`` says which model answers and ``why`` why.
    """

    def __init__(self, candidates=None, params=(), sizes: int = 1, spread: float = 0.0,
                 prior: str = "loglinear2", min_cuts: int = 2):
        self.candidates = list(candidates or CANDIDATES)
        self.params, self.sizes, self.spread = params, sizes, spread
        self.prior, self.min_cuts = prior, min_cuts
        self.name = "auto"

    def fit(self, df):
        n = df["procs"].nunique()
        rows = []
        for name in self.candidates:
            try:                    # too few runs for it, or a singular fit: left out
                model, res = fit_model(name, df, self.params, self.sizes)
            except (ValueError, np.linalg.LinAlgError):
                continue
            last = res[res["cut"] == res["cut"].max()] if len(res) else res
            rows.append({"model": name, "last": score(last), "score": score(res),
                         "cuts": res["cut"].nunique(), "fitted": model, "residuals": res})
        if not rows:
            raise ValueError(f"no model can be fitted to {n} process count(s)")
        t = pd.DataFrame(rows)
        # nothing judged at all (too few runs): the power law, which needs the
        # fewest runs and extrapolates the most conservatively
        t["fallback"] = t["model"] != "loglinear"
        t = t.sort_values(["last", "score", "fallback"], kind="stable").reset_index(drop=True)
        self.ranking_ = t.drop(columns="fallback")
        best = t.iloc[0]
        mine = t[t["model"] == self.prior]
        prior = mine.iloc[0] if len(mine) else None
        if prior is None:
            chosen, self.why = best, f"best ranked ({self.prior} not fitted)"
        elif prior["cuts"] < self.min_cuts:
            chosen = prior
            self.why = (f"the prior: {prior['cuts']} cut(s), fewer than {self.min_cuts}, "
                        f"cannot overturn it")
        elif best["last"] < prior["last"]:
            chosen, self.why = best, f"extrapolated best over {best['cuts']} cuts"
        else:
            chosen, self.why = prior, "the prior, not bettered over the cuts"
        self.chosen_ = chosen
        self.name = chosen["model"]
        finite = t[np.isfinite(t["score"])]
        self.residuals_ = (pd.concat(list(finite["residuals"]), ignore_index=True)
                           if len(finite) else chosen["residuals"])
        self.cut_ = float(df["procs"].max())
        return self

    def predict(self, df):
        with np.errstate(all="ignore"):
            out = np.asarray(self.chosen_["fitted"].predict(df), float).copy()
        out[~(out > 0)] = np.nan
        # never a non-positive or non-finite time: the next candidate answers
        for m in self.ranking_["fitted"]:
            bad = ~np.isfinite(out)
            if not bad.any():
                break
            with np.errstate(all="ignore"):
                p = np.asarray(m.predict(df), float)
            ok = bad & np.isfinite(p) & (p > 0)
            out[ok] = p[ok]
        return out

    def interval(self, df, level: float = 0.9):
        d = np.log2(df["procs"].to_numpy(float) / self.cut_)
        return interval(self.predict(df), d, self.residuals_, level, self.spread)

    def describe(self):
        return f"{self.name} ({self.why}): {self.chosen_['fitted'].describe()}"


def fit_model(name: str, train: pd.DataFrame, params=(), sizes: int = 1,
              spread: float = 0.0):
    """The model ``name`` (or ``auto``) fitted to ``train``, and the
    rolling-origin residuals its interval comes from."""
    if name == "auto":
        m = Auto(params=params, sizes=sizes, spread=spread).fit(train)
        return m, m.residuals_

    def factory():
        return make(name, params, sizes)
    m = factory()
    n = train["procs"].nunique()
    if n < m.min_configs:
        raise ValueError(f"needs at least {m.min_configs} process counts, the training "
                         f"runs have {n}")
    m.fit(train)
    # every model is judged on the same cuts: from 3 runs on (2 when there
    # are only 3), unless it needs more
    return m, rolling_origin(factory, train, max(m.min_configs, min(3, n - 1)))
