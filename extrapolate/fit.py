"""Functions of N fitted to the small traces: message sizes exactly, the
computation with the scaling models' automatic choice and its interval.

*Bytes.*  A message size in a regular decomposition is a product of
powers of the grid's extents: a halo of an n x n grid split over
``px x py`` ranks is ``8 n / py`` bytes along one axis, a 1-D strip's
``8 n / p``; a block with its ghost cells is a constant plus such a
power.  For each call, :func:`fit_bytes` tries exponents in
{-1, -1/2, 0, 1/2, 1} per dimension (fewest non-zero first) and keeps the
first that reproduces every small trace's size exactly; then, where the
power takes three values or more, a constant plus a power; only then
those that come within one element (a split with remainders); nothing
fits: refused.  At the target, a size is taken as observed where the
axes that matter split as in a small trace, as fitted where the fit is
exact and whole; a remainder's place is the application's convention,
which the small traces do not show: refused unless told to floor or
round (:func:`predict_bytes`).  The pickled sizes of the lower-case
(object) methods depend on the objects' values, not on the grid: the
largest small trace's stand, unless an exact, checked form holds (N
pickles of one size).

*Computation.*  Each member's total over the small runs is fitted against
N by ``scaling.auto.Auto`` (the shrunk log-log prior, its predictive
interval); the call-by-call shares come from the largest small trace.
With replayed computation, the totals are each run's pooled speed times
the traced CPU seconds (extrapolate/build.py, ``_pooled_totals``).
"""
from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np
import pandas as pd

from contracts.raw_trace import FLAG_OBJECT
from scaling.auto import Auto

from .layout import ExtrapolationError

EXPONENTS = (0.0, -1.0, 1.0, -0.5, 0.5)


def _candidates(ndims: int):
    """Exponent vectors, fewest non-zero first."""
    every = list(itertools.product(EXPONENTS, repeat=ndims))
    return sorted(every, key=lambda e: sum(x != 0 for x in e))


def _within_one(pred: np.ndarray, values: np.ndarray, element: int) -> bool:
    """Within one element of every observed size (a split with a
    remainder gives pieces one element apart)."""
    return bool((np.abs(pred - values) <= element).all())


def _exact(pred: np.ndarray, values: np.ndarray, element: int) -> bool:
    """Every observed size reproduced (to rounding error, not to the
    nearest element: that would pass pieces of 83 and 62 cells, a
    remainder's 249 / 3 and 248 / 4, for one 249.7 / p)."""
    return bool(np.allclose(pred, values, rtol=1e-7, atol=1e-6 * element))


class Fit(NamedTuple):
    """``size = c + a * prod(dims ** b)`` bytes.  ``exact``: it reproduces
    every small trace's size, not only to within one element; ``checked``:
    the small grids hold more points than the form has parameters (a
    constant plus a power through two values of the power fits anything)."""
    c: float
    a: float
    b: tuple
    exact: bool
    checked: bool = True


def fit_bytes(values: np.ndarray, dims: np.ndarray) -> list[Fit]:
    """Every fit of the simplest form that reproduces ``values[i]`` at
    every small trace i: a pure power of the grid's extents (c = 0), else,
    where the power takes three distinct values or more over the small
    grids (two: marked unchecked), a constant plus a power (a block
    with its ghost cells: the window of a 1-D stencil is n / p cells plus
    two ghost regions).  Exact fits first; only where none is exact, the
    fits that come within one element (the small grids split the domain
    with remainders).  Several answers where the small grids cannot tell
    them apart (square grids do not tell the axes apart).  Raises
    ValueError when nothing fits."""
    values = np.asarray(values, float)
    nd = dims.shape[1]
    if (values == values[0]).all():
        return [Fit(0.0, float(values[0]), (0.0,) * nd, True)]
    if (values <= 0).any():
        raise ValueError("zero at some N and not at others")
    el = element_size(values)
    logd = np.log(dims.astype(float))
    for accept, exact in ((_exact, True), (_within_one, False)):
        found: list[Fit] = []
        for b in _candidates(nd):
            if found and sum(x != 0 for x in b) > sum(x != 0 for x in found[0].b):
                break
            g = np.exp(logd @ np.asarray(b))
            a = float(np.exp(np.mean(np.log(values / g))))
            if accept(a * g, values, el):
                found.append(Fit(0.0, a, tuple(b), exact))
        if found:
            return found
        for b in _candidates(nd)[1:]:
            if found and sum(x != 0 for x in b) > sum(x != 0 for x in found[0].b):
                break
            g = np.exp(logd @ np.asarray(b))
            distinct = len(np.unique(np.round(g, 12)))
            if distinct < 2:
                continue
            X = np.stack([np.ones_like(g), g], axis=1)
            (c, a), *_ = np.linalg.lstsq(X, values, rcond=None)
            if accept(c + a * g, values, el):
                found.append(Fit(float(c), float(a), tuple(b), exact, distinct >= 3))
        if found:
            return found
    raise ValueError("no power of the grid's extents (plus a constant) reproduces it")


def element_size(values) -> int:
    """The largest of 8, 4, 2, 1 bytes dividing every observed size."""
    v = np.asarray(values, np.int64)
    for e in (8, 4, 2):
        if (v % e == 0).all():
            return e
    return 1


UNEVEN = ("refuse", "floor", "round")


def predict_bytes(fit: Fit, dims_by_n: np.ndarray, values: np.ndarray, target_dims,
                  element: int, uneven: str = "refuse") -> int:
    """The size at a grid ``target_dims``, a whole number of elements.

    Where the fit's power of the extents takes a value some small grid had
    (the target splits the axes that matter as a small trace did), that
    trace's size, as observed.  Else the fitted size where the fit is
    exact and gives a whole number of elements.  Else the domain splits
    with a remainder (at the target, or already at the small grids, where
    the fit is only within one element), and which ranks get it is the
    application's convention (floor and drop it, spread it over the first
    ranks, give it to the last), which the small traces cannot tell:
    ``uneven`` says what to do (refuse: ValueError; floor or round the
    fitted size)."""
    b = np.asarray(fit.b)
    g = float(np.prod(np.asarray(target_dims, float) ** b))
    seen = np.prod(np.asarray(dims_by_n, float) ** b, axis=1)
    same = np.flatnonzero(np.isclose(seen, g, rtol=1e-9, atol=0))
    if len(same):
        return int(values[same[-1]])
    x = (fit.c + fit.a * g) / element
    whole = abs(x - round(x)) <= 1e-6 * max(1.0, abs(x))
    if not (fit.exact and fit.checked and whole):
        if uneven == "refuse":
            if not fit.checked:
                raise ValueError(f"the small grids have two extents only along the axes it "
                                 f"depends on, too few to check a constant plus a power "
                                 f"({x:.2f} elements of {element} bytes at "
                                 f"{list(target_dims)}): add a small trace with another "
                                 f"extent, or the target's, or take --uneven floor or round")
            why = ("the small grids split the domain with remainders (the sizes fit to "
                   "within one element only)" if not fit.exact else
                   f"{x:.2f} elements of {element} bytes at {list(target_dims)}: the domain "
                   f"does not split evenly there")
            raise ValueError(f"{why}; which ranks get the remainder the small traces cannot "
                             f"tell: choose an N whose grid splits it evenly, add a small "
                             f"trace with the target's extents, or take --uneven floor or "
                             f"round")
        if uneven == "floor":
            return int(max(0, np.floor(x + 1e-6)) * element)
    return int(max(0, round(x)) * element)


def size_at(values: np.ndarray, dims: np.ndarray, target_dims, uneven: str = "refuse") -> int:
    """One call's size at ``target_dims`` from its sizes ``values`` at the
    small grids ``dims``: every simplest fit must give the same
    (:func:`predict_bytes`); ValueError where none fits, one refuses, or
    they disagree."""
    el = element_size(values)
    at = {predict_bytes(f, dims, values, target_dims, el, uneven)
          for f in fit_bytes(values, dims)}
    if len(at) > 1:
        raise ValueError(f"the small grids cannot tell apart forms that give "
                         f"{sorted(at)} at {list(target_dims)} (square grids do not tell "
                         f"the axes apart, nor an axis with two extents): add a trace whose "
                         f"grid is not square, with another extent")
    return at.pop()


def bytes_at(calls_by_n: list[pd.DataFrame], dims_by_n: list[tuple], target_dims: tuple,
             where: str, uneven: str = "refuse") -> dict[str, np.ndarray]:
    """sbytes and rbytes of one class's calls at the target grid, fitted
    call by call over the small traces (``calls_by_n``: the class's call
    tables, equally long, in the order of ``dims_by_n``; ``uneven``: see
    :func:`predict_bytes`)."""
    dims = np.array(dims_by_n, np.int64)
    pickled = (calls_by_n[-1]["flags"].to_numpy() & FLAG_OBJECT) != 0
    out = {}
    for col in ("sbytes", "rbytes"):
        v = np.stack([c[col].to_numpy(np.int64) for c in calls_by_n])   # N x calls
        res = v[-1].copy()
        cache: dict[tuple, int] = {}
        for k in np.flatnonzero((v != v[:1]).any(axis=0)):
            key = (bool(pickled[k]),) + tuple(v[:, k])
            if key in cache:
                res[k] = cache[key]
                continue
            try:
                cache[key] = size_at(v[:, k], dims, target_dims,
                                     "refuse" if pickled[k] else uneven)
            except ValueError as e:
                if pickled[k]:
                    # a pickle's size depends on the object's value, not on
                    # the grid: the largest small trace's stands, unless an
                    # exact and checked form holds (an allgather of N
                    # pickles of one size receives N of them)
                    cache[key] = int(v[-1, k])
                else:
                    seq = int(calls_by_n[-1]["seq"].iat[k])
                    raise ExtrapolationError(
                        f"{where}, event {seq} ({calls_by_n[-1]['op'].iat[k]}): {col} "
                        f"{list(map(int, v[:, k]))} at grids {[list(d) for d in dims_by_n]}: "
                        f"{e}") from None
            res[k] = cache[key]
        out[col] = res
    return out


def total_model(sizes: list[int], totals: list[np.ndarray]) -> Auto:
    """The automatic scaling model of a class's mean total over N.

    One row per N, the mean over the class's members: the members of one
    trace share that run's deviation from the curve (the host's load
    while it ran), so they say no more about the curve's slope and bend
    than their mean does; fitted as separate rows they would outweigh the
    curvature's prior and bend the curve through one run's noise.  How
    the members differ from one another is kept apart (the class's
    variability)."""
    means = [float(np.mean(t[t > 0])) if (np.asarray(t) > 0).any() else 0.0 for t in totals]
    df = pd.DataFrame({"procs": np.asarray(sizes, float), "time": means})
    df = df[df["time"] > 0]
    if df["procs"].nunique() < 2:
        raise ValueError("computation measured at fewer than two N")
    return Auto().fit(df)


def computation_at(model: Auto, target: int, level: float = 0.9) -> tuple[float, float, float]:
    """(predicted, low, high) total at ``target`` ranks."""
    q = pd.DataFrame({"procs": [float(target)]})
    lo, hi = model.interval(q, level)
    return float(model.predict(q)[0]), float(lo[0]), float(hi[0])
