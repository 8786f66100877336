"""Functions of N fitted to the small traces: message sizes exactly, the
computation with the scaling models' automatic choice and its interval.

*Bytes.*  A message size in a regular decomposition is a product of
powers of the grid's extents: a halo of an n x n grid split over
``px x py`` ranks is ``8 n / py`` bytes along one axis, a 1-D strip's
``8 n / p``; a block with its ghost cells is a constant plus such a
power.  For each call, :func:`fit_bytes` tries exponents in
{-1, -1/2, 0, 1/2, 1} per dimension (fewest non-zero first) and keeps the
first that reproduces every small trace's size to within one element;
then, from three grids on, a constant plus a power; nothing fits:
refused.  The pickled sizes of the lower-case (object) methods depend on
the objects' values, not on the grid: the largest small trace's stand.

*Computation.*  Each member's total over the small runs is fitted against
N by ``scaling.auto.Auto`` (the shrunk log-log prior, its predictive
interval); the call-by-call shares come from the largest small trace.
"""
from __future__ import annotations

import itertools

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


def _exact(pred: np.ndarray, values: np.ndarray, element: int) -> bool:
    """Within one element of every observed size (a size a remainder
    makes uneven differs by one element from rank to rank)."""
    return bool((np.abs(pred - values) <= element).all())


def fit_bytes(values: np.ndarray, dims: np.ndarray) -> list[tuple[float, float, tuple]]:
    """Every ``(c, a, b)`` of the simplest form that reproduces
    ``values[i] == c + a * prod(dims[i] ** b)`` to within one element at
    every small trace i: a pure power of the grid's extents (c = 0) where
    one does, else, from three distinct grids on (so that the data check
    it), a constant plus a power (a block with its ghost cells: the window
    of a 1-D stencil is n / p cells plus two ghost regions).  Several
    answers where the small grids cannot tell them apart (square grids do
    not tell the axes apart).  Raises ValueError when nothing fits."""
    values = np.asarray(values, float)
    nd = dims.shape[1]
    if (values == values[0]).all():
        return [(0.0, float(values[0]), (0.0,) * nd)]
    if (values <= 0).any():
        raise ValueError("zero at some N and not at others")
    el = element_size(values)
    logd = np.log(dims.astype(float))
    found: list[tuple[float, float, tuple]] = []
    for b in _candidates(nd):
        if found and sum(x != 0 for x in b) > sum(x != 0 for x in found[0][2]):
            break
        g = np.exp(logd @ np.asarray(b))
        a = float(np.exp(np.mean(np.log(values / g))))
        if _exact(a * g, values, el):
            found.append((0.0, a, tuple(b)))
    if not found and len({tuple(d) for d in dims}) >= 3:
        for b in _candidates(nd)[1:]:
            if found and sum(x != 0 for x in b) > sum(x != 0 for x in found[0][2]):
                break
            g = np.exp(logd @ np.asarray(b))
            X = np.stack([np.ones_like(g), g], axis=1)
            (c, a), *_ = np.linalg.lstsq(X, values, rcond=None)
            if _exact(c + a * g, values, el):
                found.append((float(c), float(a), tuple(b)))
    if not found:
        raise ValueError("no power of the grid's extents (plus a constant) reproduces it")
    return found


def element_size(values) -> int:
    """The largest of 8, 4, 2, 1 bytes dividing every observed size."""
    v = np.asarray(values, np.int64)
    for e in (8, 4, 2):
        if (v % e == 0).all():
            return e
    return 1


def predict_bytes(c: float, a: float, b, dims, element: int) -> int:
    """The size at a grid ``dims``, a whole number of elements."""
    x = c + a * float(np.prod(np.asarray(dims, float) ** np.asarray(b)))
    return int(max(0, round(x / element)) * element)


def bytes_at(calls_by_n: list[pd.DataFrame], dims_by_n: list[tuple], target_dims: tuple,
             where: str) -> dict[str, np.ndarray]:
    """sbytes and rbytes of one class's calls at the target grid, fitted
    call by call over the small traces (``calls_by_n``: the class's call
    tables, equally long, in the order of ``dims_by_n``)."""
    dims = np.array(dims_by_n, np.int64)
    out = {}
    for col in ("sbytes", "rbytes"):
        v = np.stack([c[col].to_numpy(np.int64) for c in calls_by_n])   # N x calls
        res = v[-1].copy()
        # a pickle's size depends on the object's value, not on the grid:
        # the largest small trace's stands
        pickled = (calls_by_n[-1]["flags"].to_numpy() & FLAG_OBJECT) != 0
        varies = np.flatnonzero((v != v[:1]).any(axis=0) & ~pickled)
        cache: dict[tuple, int] = {}
        for k in varies:
            key = tuple(v[:, k])
            if key not in cache:
                try:
                    fits = fit_bytes(v[:, k], dims)
                    el = element_size(v[:, k])
                    at = {predict_bytes(c, a, b, target_dims, el) for c, a, b in fits}
                    if len(at) > 1:
                        raise ValueError(f"the small grids cannot tell apart forms that give "
                                         f"{sorted(at)} at {list(target_dims)} (square grids "
                                         f"do not tell the axes apart): add a trace whose "
                                         f"grid is not square")
                except ValueError as e:
                    seq = int(calls_by_n[-1]["seq"].iat[k])
                    raise ExtrapolationError(
                        f"{where}, event {seq} ({calls_by_n[-1]['op'].iat[k]}): {col} "
                        f"{list(map(int, v[:, k]))} at grids {[list(d) for d in dims_by_n]}: "
                        f"{e}") from None
                cache[key] = at.pop()
            res[k] = cache[key]
        out[col] = res
    return out


def total_model(sizes: list[int], totals: list[np.ndarray]) -> Auto:
    """The automatic scaling model of a class's members' totals over N."""
    df = pd.DataFrame({"procs": np.concatenate([np.full(len(t), n) for n, t in
                                                zip(sizes, totals)]).astype(float),
                       "time": np.concatenate(totals)})
    df = df[df["time"] > 0]
    if df["procs"].nunique() < 2:
        raise ValueError("computation measured at fewer than two N")
    return Auto().fit(df)


def computation_at(model: Auto, target: int, level: float = 0.9) -> tuple[float, float, float]:
    """(predicted, low, high) total at ``target`` ranks."""
    q = pd.DataFrame({"procs": [float(target)]})
    lo, hi = model.interval(q, level)
    return float(model.predict(q)[0]), float(lo[0]), float(hi[0])
