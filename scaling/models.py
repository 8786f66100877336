"""Execution-time models with a small fit/predict API.

Every model: ``fit(df)`` on a reduced table (``procs``, ``time``, maybe
``size``), ``predict(df) -> times``, ``predict_std(df)`` (a standard error
where the model allows, else NaN), ``describe() -> str``.

* :class:`ABC` (small runs): T(q) = a q + b/q + c/sqrt(q), a, b, c >= 0, bounded
  least squares; ``weighting="relative"`` (default) minimises relative
  errors, which keeps small q from dominating.
* :class:`LogLinear` (Barnes et al.): log2 T = sum_k b_k log2 x_k +
  g(q), g = c0 + c1 log2 q (``degree=1``) or + c2 (log2 q)^2 (``degree=2``);
  x are the launch parameters (e.g. size).
* :class:`ShrunkLogLog` (``shrunk``, the automatic choice's prior): ln T =
  c0 + c1 u + c2 u^2 + sum_k b_k log2 x_k with u = log2(q / largest
  training q), fitted in a Bayesian way: flat priors on the level and the
  launch parameters, a wide one on the slope, and a narrow normal prior
  on the curvature c2, so that bending is believed only where the data
  demand it; the noise is estimated with a prior guess of its own.  Its
  interval is the posterior predictive one (Student t): it widens with
  the distance out and with the freedom the data leave the curvature;
  several rows of one process count (sizes) weigh as one there.
* :class:`NPT` (heterogeneous clusters): T(N, P) = (k0 N^3 + k1 N^2 + k2 N + k3)/P + k4 log2 P
  + k5 with N = ``size``; ``nonneg=True`` (NNLS, default) or plain least
  squares.
* :class:`PMNF`: performance model normal form: c0 + sum of up to
  ``terms`` terms c p^i log2(p)^j (i from -1 to 3 in halves, j 0..2,
  negative exponents allowed), the hypothesis chosen by leave-one-out
  cross-validation of the relative error.
* :class:`Explicit` ("explicit dependence"): T_n = a1 T_(n-1) + a2 T_(n-2)
  + b q_n over the configurations in increasing q; predictions continue the
  recursion with the last step's ratio of q (unstable with few data, as the
  source found; offered for comparison).

``min_configs`` is the fewest distinct process counts a model can be fitted
to; ``uses_params`` says whether it models ``size`` (and other launch
parameters): those that do not are fitted once per size by :class:`PerSize`.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.optimize import lsq_linear, nnls
from scipy.stats import t as student_t


def _cov_std(X, y, coef, rows):
    """Standard error of predictions rows @ coef from the residual variance."""
    dof = max(len(y) - X.shape[1], 1)
    s2 = float(np.sum((y - X @ coef) ** 2)) / dof
    try:
        C = s2 * np.linalg.pinv(X.T @ X)
    except np.linalg.LinAlgError:
        return np.full(len(rows), np.nan)
    return np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", rows, C, rows), 0.0))


class ABC:
    name = "abc"
    min_configs, uses_params = 3, False

    def __init__(self, weighting: str = "relative"):
        self.weighting = weighting

    @staticmethod
    def _X(q):
        q = np.asarray(q, float)
        return np.stack([q, 1 / q, 1 / np.sqrt(q)], axis=1)

    def fit(self, df):
        X, y = self._X(df["procs"]), df["time"].to_numpy(float)
        w = 1 / y if self.weighting == "relative" else np.ones_like(y)
        self._Xw, self._yw = X * w[:, None], y * w
        self.coef_ = lsq_linear(self._Xw, self._yw, bounds=(0, np.inf)).x
        return self

    def predict(self, df):
        return self._X(df["procs"]) @ self.coef_

    def predict_std(self, df):
        # the coefficients' covariance from the weighted fit applies to
        # unweighted rows as they are
        return _cov_std(self._Xw, self._yw, self.coef_, self._X(df["procs"]))

    def describe(self):
        a, b, c = self.coef_
        return f"T(q) = {a:.4g} q + {b:.4g}/q + {c:.4g}/sqrt(q)"


class LogLinear:
    uses_params = True

    def __init__(self, degree: int = 1, params=()):
        self.degree, self.params = degree, list(params)
        self.name = "loglinear" if degree == 1 else "loglinear2"
        self.min_configs = degree + 1

    def _X(self, df):
        lq = np.log2(df["procs"].to_numpy(float))
        cols = [np.ones_like(lq), lq] + ([lq ** 2] if self.degree == 2 else [])
        cols += [np.log2(df[p].to_numpy(float)) for p in self.params]
        return np.stack(cols, axis=1)

    def fit(self, df):
        self.params = [p for p in self.params if p in df and df[p].nunique() > 1]
        X, y = self._X(df), np.log2(df["time"].to_numpy(float))
        self.coef_, *_ = np.linalg.lstsq(X, y, rcond=None)
        self._X_, self._y_ = X, y
        return self

    def predict(self, df):
        return 2.0 ** (self._X(df) @ self.coef_)

    def predict_std(self, df):
        s = _cov_std(self._X_, self._y_, self.coef_, self._X(df))   # in log2 units
        return self.predict(df) * np.log(2) * s

    def describe(self):
        names = ["1", "log2 q"] + (["(log2 q)^2"] if self.degree == 2 else []) + \
            [f"log2 {p}" for p in self.params]
        return "log2 T = " + " + ".join(f"{c:.4g} {n}" for c, n in zip(self.coef_, names))


class ShrunkLogLog:
    """Quadratic in log-log with its curvature shrunk toward zero.

    A quadratic fitted exactly through three process counts extrapolates
    the change of slope between them, which is mostly noise; a power law
    cannot bend at all.  Here the curvature has a normal prior of standard
    deviation ``tau`` (natural-log units per doubling squared) and the
    noise a scaled-inverse-chi-squared prior (guess ``sigma0``, ``nu0``
    pseudo-observations), so three runs bend the curve a little and a long
    series as much as it shows.  The defaults were chosen on four families
    of published measurements and checked on two others (bench/RESULTS.md,
    "Scaling models"); they are the only tuned numbers of the model.
    """
    name = "shrunk"
    min_configs, uses_params = 2, True
    TAU, SIGMA0, NU0, SLOPE_SD = 0.03, 0.2, 2.0, 2.0

    def __init__(self, params=(), tau: float = TAU, sigma0: float = SIGMA0,
                 nu0: float = NU0, slope_sd: float = SLOPE_SD):
        self.params = list(params)
        self.tau, self.sigma0, self.nu0, self.slope_sd = tau, sigma0, nu0, slope_sd

    def _X(self, df):
        u = np.log2(df["procs"].to_numpy(float)) - self.top_
        cols = [np.ones_like(u), u, u * u]
        cols += [np.log2(df[p].to_numpy(float)) - self.centre_[p] for p in self.params]
        return np.stack(cols, axis=1)

    def fit(self, df):
        self.params = [p for p in self.params if p in df and df[p].nunique() > 1]
        self.top_ = float(np.log2(df["procs"].max()))
        self.centre_ = {p: float(np.log2(df[p].to_numpy(float)).mean()) for p in self.params}
        X, y = self._X(df), np.log(df["time"].to_numpy(float))
        self.coef_, self.cov_, self.s2_, self.dof_ = self._posterior(X, y, np.ones(len(y)))
        # the interval counts process counts, not rows: the rows of one
        # process count (its sizes) share its deviation from the curve, so
        # several of them say no more about the slope and the curvature
        # than one (with one row per process count, the fit above)
        w = 1.0 / df.groupby("procs")["procs"].transform("size").to_numpy(float)
        if (w < 1).any():
            _, self.cov_, self.s2_, self.dof_ = self._posterior(X, y, w)
        return self

    def _posterior(self, X, y, w):
        """Coefficients, their covariance, the noise variance and the
        degrees of freedom, rows weighted by ``w``."""
        # (nearly) flat priors on the level and the parameters, finite ones
        # on the slope and the curvature
        prior = np.diag([1e-8, self.slope_sd ** -2, self.tau ** -2] + [1e-8] * len(self.params))
        s2, n = self.sigma0 ** 2, float(w.sum())
        for _ in range(5):      # the noise and the coefficients, to a fixed point
            cov = np.linalg.inv(X.T @ (X * w[:, None]) / s2 + prior)
            coef = cov @ X.T @ (w * y) / s2
            rss = float(np.sum(w * (y - X @ coef) ** 2))
            s2 = (self.nu0 * self.sigma0 ** 2 + rss) / (self.nu0 + n)
        return coef, cov, s2, self.nu0 + n

    def log_sd(self, df):
        """The posterior predictive standard deviation of ln T at ``df``."""
        X = self._X(df)
        return np.sqrt(self.s2_ + np.einsum("ij,jk,ik->i", X, self.cov_, X))

    def predict(self, df):
        return np.exp(self._X(df) @ self.coef_)

    def predict_std(self, df):
        return self.predict(df) * self.log_sd(df)

    def interval(self, df, level: float = 0.9):
        """The posterior predictive interval at ``level``: (low, high)."""
        half = student_t.ppf(0.5 + level / 2, self.dof_) * self.log_sd(df)
        mid = self._X(df) @ self.coef_
        return np.exp(mid - half), np.exp(mid + half)

    def describe(self):
        names = ["1", "u", "u^2"] + [f"log2 {p}" for p in self.params]
        return ("ln T = " + " + ".join(f"{c:.4g} {n}" for c, n in zip(self.coef_, names))
                + f", u = log2(q/{2 ** self.top_:g}), noise sd {np.sqrt(self.s2_):.3g}")


class NPT:
    min_configs, uses_params = 3, True

    def __init__(self, nonneg: bool = True):
        self.nonneg = nonneg
        self.name = "npt" if nonneg else "npt-ls"

    def _X(self, df):
        P = df["procs"].to_numpy(float)
        N = df["size"].to_numpy(float) if "size" in df else np.ones_like(P)
        if self.cubic:
            cols = [N ** 3 / P, N ** 2 / P, N / P, 1 / P, np.log2(P), np.ones_like(P)]
        else:                                   # one size: the N terms collapse into k3
            cols = [1 / P, np.log2(P), np.ones_like(P)]
        return np.stack(cols, axis=1)

    def fit(self, df):
        self.cubic = "size" in df and df["size"].nunique() > 1
        X, y = self._X(df), df["time"].to_numpy(float)
        # scale columns so the solvers see comparable magnitudes
        self._s = np.maximum(np.abs(X).max(axis=0), 1e-300)
        Xs = X / self._s
        if self.nonneg:
            c, _ = nnls(Xs, y)
        else:
            c, *_ = np.linalg.lstsq(Xs, y, rcond=None)
        self.coef_ = c / self._s
        self._X_, self._y_ = X, y
        return self

    def predict(self, df):
        return self._X(df) @ self.coef_

    def predict_std(self, df):
        return _cov_std(self._X_, self._y_, self.coef_, self._X(df))

    def describe(self):
        k = self.coef_
        if self.cubic:
            return (f"T = ({k[0]:.4g} N^3 + {k[1]:.4g} N^2 + {k[2]:.4g} N + {k[3]:.4g})/P "
                    f"+ {k[4]:.4g} log2 P + {k[5]:.4g}")
        return f"T = {k[0]:.4g}/P + {k[1]:.4g} log2 P + {k[2]:.4g}"


class PMNF:
    name = "pmnf"
    min_configs, uses_params = 3, False
    EXPONENTS = (-1, -0.5, 0, 0.5, 1, 1.5, 2, 3)
    LOGS = (0, 1, 2)

    def __init__(self, terms: int = 2):
        self.terms = terms

    @staticmethod
    def _col(p, i, j):
        return p ** i * np.log2(p) ** j

    def _X(self, p, hyp):
        return np.stack([np.ones_like(p)] + [self._col(p, i, j) for i, j in hyp], axis=1)

    def fit(self, df):
        p, y = df["procs"].to_numpy(float), df["time"].to_numpy(float)
        basis = [(i, j) for i in self.EXPONENTS for j in self.LOGS if (i, j) != (0, 0)]
        best = (np.inf, None)
        for k in range(1, self.terms + 1):
            for hyp in itertools.combinations(basis, k):
                if len(y) <= k + 1:
                    continue
                err = self._loo(p, y, hyp)
                if err < best[0]:
                    best = (err, hyp)
        if best[1] is None:
            raise ValueError("PMNF needs at least 3 configurations")
        self.hyp, self.cv_error = best[1], best[0]
        X = self._X(p, self.hyp)
        self.coef_, *_ = np.linalg.lstsq(X, y, rcond=None)
        self._X_, self._y_ = X, y
        return self

    def _loo(self, p, y, hyp):
        X = self._X(p, hyp)
        if np.linalg.matrix_rank(X) < X.shape[1]:
            return np.inf
        errs = []
        for i in range(len(y)):
            m = np.arange(len(y)) != i
            c, *_ = np.linalg.lstsq(X[m], y[m], rcond=None)
            errs.append(abs(X[i] @ c - y[i]) / y[i])
        return float(np.mean(errs))

    def predict(self, df):
        return self._X(df["procs"].to_numpy(float), self.hyp) @ self.coef_

    def predict_std(self, df):
        return _cov_std(self._X_, self._y_, self.coef_,
                        self._X(df["procs"].to_numpy(float), self.hyp))

    def describe(self):
        def term(i, j):
            s = "" if i == 0 else f"p^{i:g}"
            return s + ("" if j == 0 else f" log2(p)^{j}")
        return "T = " + " + ".join([f"{self.coef_[0]:.4g}"] + [
            f"{c:.4g} {term(i, j)}" for c, (i, j) in zip(self.coef_[1:], self.hyp)])


class Explicit:
    name = "explicit"
    min_configs, uses_params = 4, False

    def fit(self, df):
        d = df.sort_values("procs")
        self.q_, self.t_ = d["procs"].to_numpy(float), d["time"].to_numpy(float)
        if len(np.unique(self.q_)) != len(self.q_):
            raise ValueError("the explicit-dependence model needs one row per process count")
        X = np.stack([self.t_[1:-1], self.t_[:-2], self.q_[2:]], axis=1)
        self.coef_, *_ = np.linalg.lstsq(X, self.t_[2:], rcond=None)
        return self

    def predict(self, df):
        q, t = list(self.q_), list(self.t_)
        ratio = q[-1] / q[-2]
        target = float(np.max(df["procs"]))
        while q[-1] < target:                   # continue the recursion
            q.append(q[-1] * ratio)
            t.append(self.coef_ @ [t[-1], t[-2], q[-1]])
        # between the recursion's points: linear in log q
        return np.interp(np.log(df["procs"].to_numpy(float)), np.log(q), t)

    def predict_std(self, df):
        return np.full(len(df), np.nan)

    def describe(self):
        a1, a2, b = self.coef_
        return f"T_n = {a1:.4g} T_(n-1) + {a2:.4g} T_(n-2) + {b:.4g} q_n"


class PerSize:
    """One model per problem size, for models that do not model ``size``."""

    def __init__(self, factory):
        self.factory = factory
        probe = factory()
        self.name, self.min_configs, self.uses_params = probe.name, probe.min_configs, True

    def fit(self, df):
        self.models_ = {s: self.factory().fit(g.drop(columns="size"))
                        for s, g in df.groupby("size")}
        return self

    def _each(self, df, how):
        out = np.full(len(df), np.nan)
        for s, idx in df.groupby("size").indices.items():
            if s not in self.models_:
                raise ValueError(f"{self.name}: no runs of size {s:g} to fit (sizes: "
                                 f"{', '.join(f'{k:g}' for k in self.models_)})")
            out[idx] = getattr(self.models_[s], how)(df.iloc[idx].drop(columns="size"))
        return out

    def predict(self, df):
        return self._each(df, "predict")

    def predict_std(self, df):
        return self._each(df, "predict_std")

    def describe(self):
        return "; ".join(f"size {s:g}: {m.describe()}" for s, m in self.models_.items())


_FACTORIES: dict[str, Callable[[Any], Any]]
_FACTORIES = {"abc": lambda p: ABC(), "abc-abs": lambda p: ABC("absolute"),
              "loglinear": lambda p: LogLinear(1, p), "loglinear2": lambda p: LogLinear(2, p),
              "shrunk": lambda p: ShrunkLogLog(p),
              "npt": lambda p: NPT(True), "npt-ls": lambda p: NPT(False),
              "pmnf": lambda p: PMNF(), "explicit": lambda p: Explicit()}
MODELS = list(_FACTORIES)


def make(name: str, params=(), sizes: int = 1):
    """A model by its command-line name; per size where it cannot model ``size``
    and the data has ``sizes`` > 1 of them."""
    if name not in _FACTORIES:
        raise ValueError(f"unknown model {name!r}: choose from {MODELS}")
    factory = lambda: _FACTORIES[name](params)
    return PerSize(factory) if sizes > 1 and not factory().uses_params else factory()
