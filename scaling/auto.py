"""Choosing a model without held-out data, and prediction intervals.

A user extrapolating from small runs has no held-out large runs to judge
models by.  What the training runs do allow is *rolling origin*: cut them
at each process count q_k, fit on the runs with procs <= q_k, and predict
the larger training runs.  A model that extrapolated well inside the data
is the best bet beyond it, at the same distance out.

* :func:`rolling_origin` gives those out-of-sample predictions as a table:
  ``cut`` (largest procs fitted), ``procs`` (predicted), ``distance``
  (log2(procs / cut), how far out), ``log_ratio`` (log(measured /
  predicted); +inf where the model predicted a non-positive or non-finite
  time, or could not be fitted).
* :class:`Auto` answers with the prior, the curvature-shrunk log-log
  model (``shrunk``), which needs two process counts, never bends more
  than the data demand and carries its own predictive interval.  At a
  distance out (whole doublings past the largest training run) another
  candidate answers only where rolling origin judged it at that distance
  on ``min_cuts`` cuts or more and it missed by at most ``margin`` times
  what the prior missed.  Few runs leave no such evidence: the prior
  answers.  A fitted model's extrapolation two doublings out from three
  points is otherwise the change of slope between them, mostly noise.
  The prior's interval is then recalibrated on the series itself: its
  rolling-origin misses, each over the standard deviation the prior gave
  it (``z``), say whether the series extrapolates more or less smoothly
  than the prior assumes; the interval's width is scaled by their root
  mean square, pooled with ``CALIBRATION_WEIGHT`` cuts' worth of the
  prior's own belief (a scale of 1), so that three runs move it a little
  and a long series as much as it shows.
* :func:`interval` turns a single model's rolling-origin residuals into a
  split-conformal interval (used for the models that have no predictive
  interval of their own): the error per doubling at the level's quantile
  (with the finite-sample correction), times the distance of the predicted
  point from the largest training run; never narrower than the spread of
  the repeats themselves.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .models import MODELS, make

COLUMNS = ["cut", "procs", "distance", "log_ratio", "z"]
# how many rolling-origin cuts the prior's own interval width counts as,
# against the series' measured misses (chosen on the four families the
# prior was tuned on; bench/scaling_models.py)
CALIBRATION_WEIGHT = 4.0
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
        sd = np.full(len(test), np.nan)
        try:
            m = factory().fit(train)
            pred = m.predict(test)
            if hasattr(m, "log_sd"):
                sd = m.log_sd(test)
        except (ValueError, np.linalg.LinAlgError, ZeroDivisionError):
            pred = np.full(len(test), np.nan)
        with np.errstate(divide="ignore", invalid="ignore"):
            lr = np.where(np.isfinite(pred) & (pred > 0),
                          np.log(test["time"].to_numpy(float) / pred), np.inf)
            z = lr / sd
        rows.append(pd.DataFrame({"cut": cut, "procs": test["procs"].to_numpy(float),
                                  "distance": np.log2(test["procs"].to_numpy(float) / cut),
                                  "log_ratio": lr, "z": z}))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=COLUMNS)


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


def interval_of(model, residuals: pd.DataFrame, df: pd.DataFrame, cut: float,
                level: float = 0.9, floor: float = 0.0):
    """(low, high) of a fitted model at ``df``: its own predictive interval
    where it has one (``shrunk``, ``auto``), else split-conformal from its
    rolling-origin ``residuals`` (:func:`interval`) at the distance past
    ``cut``, the largest training process count; never narrower than
    ``floor`` in log space."""
    with np.errstate(all="ignore"):
        pred = np.asarray(model.predict(df), float)
        if not hasattr(model, "interval"):
            return interval(pred, np.log2(df["procs"].to_numpy(float) / cut), residuals,
                            level, floor)
        _, hi = model.interval(df, level)
        half = np.maximum(np.log(hi / pred), floor)
        return pred * np.exp(-half), pred * np.exp(half)


def calibration(residuals: pd.DataFrame, weight: float = CALIBRATION_WEIGHT) -> float:
    """The factor on a model's predictive interval from its rolling-origin
    ``residuals``: the root mean square of ``z`` (each cut's points
    averaged first: they share one fit), pooled with ``weight`` cuts at 1."""
    z = residuals[np.isfinite(residuals["z"])] if len(residuals) else residuals
    per_cut = (z["z"] ** 2).groupby(z["cut"]).mean() if len(z) else pd.Series(dtype=float)
    return float(np.sqrt((weight + per_cut.sum()) / (weight + len(per_cut))))


def repeat_spread(raw: pd.DataFrame, keys: list[str]) -> float:
    """Median log(max/min) of the time over repeats of one configuration
    (0 without repeats)."""
    g = raw.groupby(keys)["time"]
    spread = np.log(g.max() / g.min())[g.size() > 1]
    return float(spread.median()) if len(spread) else 0.0


class Auto:
    """The shrunk log-log prior, or per distance out a candidate that
    extrapolated that far clearly better within the training runs.

    ``fit(df)`` on a reduced table; ``predict(df)``; ``interval(df,
    level)``: the prior's posterior predictive interval (widening with the
    distance and with the curvature the data leave free), moved to the
    answer where a candidate answers, never narrower than the repeats'
    spread and scaled by the series' own rolling-origin misses
    (:func:`calibration`, ``scale_``).  ``ranking_`` is the table of rolling-origin evidence:
    ``model``, ``distance`` (whole doublings), ``error`` (mean |log ratio|
    there), ``cuts``; ``overrides_`` maps a distance to the candidate that
    answers there; ``name`` is the prior's and ``why`` says what answers
    where.
    """

    def __init__(self, candidates=None, params=(), sizes: int = 1, spread: float = 0.0,
                 prior: str = "shrunk", min_cuts: int = 2, margin: float = 0.5):
        self.candidates = [c for c in (candidates or CANDIDATES) if c != prior]
        self.params, self.sizes, self.spread = params, sizes, spread
        self.prior, self.min_cuts, self.margin = prior, min_cuts, margin
        self.name = "auto"

    def fit(self, df):
        self.cut_ = float(df["procs"].max())
        fitted, rows = {}, []
        for name in [self.prior] + self.candidates:
            def factory(name=name):
                return make(name, self.params, self.sizes)
            try:                    # too few runs for it, or a singular fit: left out
                m = factory()
                if df["procs"].nunique() < m.min_configs:
                    continue
                fitted[name] = m.fit(df)
            except (ValueError, np.linalg.LinAlgError):
                continue
            res = rolling_origin(factory, df, m.min_configs)
            if name == self.prior:
                self.residuals_ = res
            if len(res):
                d = np.maximum(np.round(res["distance"].to_numpy(float)), 1)
                for dist, g in res.groupby(d):
                    rows.append({"model": name, "distance": int(dist),
                                 "error": float(np.mean(np.abs(g["log_ratio"]))),
                                 "cuts": int(g["cut"].nunique())})
        if self.prior not in fitted:
            raise ValueError(f"{self.prior}: cannot be fitted to "
                             f"{df['procs'].nunique()} process count(s)")
        self.fitted_ = fitted
        self.scale_ = calibration(self.residuals_)
        t = pd.DataFrame(rows, columns=["model", "distance", "error", "cuts"])
        self.ranking_ = t.sort_values(["distance", "error"], kind="stable",
                                      ignore_index=True)
        self.overrides_ = {}
        for dist, g in t.groupby("distance"):
            mine = g[g["model"] == self.prior]
            if mine.empty or mine["cuts"].iloc[0] < self.min_cuts:
                continue
            others = g[(g["model"] != self.prior) & (g["cuts"] >= self.min_cuts)]
            others = others.sort_values("error", kind="stable")
            if len(others) and others["error"].iloc[0] <= self.margin * mine["error"].iloc[0]:
                self.overrides_[int(dist)] = others["model"].iloc[0]
        self.name = self.prior
        self.why = "the prior" + "".join(
            f"; {d} doubling(s) out: {m} (rolling origin)" for d, m in self.overrides_.items())
        if abs(self.scale_ - 1) >= 0.005:
            self.why += f"; interval x{self.scale_:.2f} from its rolling-origin misses"
        return self

    def answering(self, df) -> list[str]:
        """The model that answers at each row of ``df`` (the prior within
        the training runs' range)."""
        d = np.round(np.log2(df["procs"].to_numpy(float) / self.cut_))
        return [self.overrides_.get(int(x), self.prior) if x >= 1 else self.prior for x in d]

    def predict(self, df):
        out = np.asarray(self.fitted_[self.prior].predict(df), float).copy()
        who = np.array(self.answering(df))
        for name in set(who) - {self.prior}:
            rows = who == name
            with np.errstate(all="ignore"):
                p = np.asarray(self.fitted_[name].predict(df[rows]), float)
            ok = np.isfinite(p) & (p > 0)        # else the prior answers
            out[np.flatnonzero(rows)[ok]] = p[ok]
        return out

    def interval(self, df, level: float = 0.9):
        prior = self.fitted_[self.prior]
        _, hi = prior.interval(df, level)
        half = np.maximum(np.log(hi / prior.predict(df)) * self.scale_, self.spread)
        mid = self.predict(df)
        return mid * np.exp(-half), mid * np.exp(half)

    def describe(self):
        return f"auto: {self.prior} ({self.why}): {self.fitted_[self.prior].describe()}"


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
