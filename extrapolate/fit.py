"""Functions of N fitted to the small traces: message sizes exactly, the
computation with the scaling models' automatic choice and its interval.

*Bytes.*  A message size in a regular decomposition is a product of
powers of the grid's extents: a halo of an n x n grid split over
``px x py`` ranks is ``8 n / py`` bytes along one axis, a 1-D strip's
``8 n / p``.  For each call, :func:`fit_bytes` tries exponents in
{-1, -1/2, 0, 1/2, 1} per dimension (fewest non-zero first) and keeps the
first that reproduces every small trace's size to within half a percent
(an element, for sizes a remainder makes uneven); none fits: refused.

*Computation.*  Each member's total over the small runs is fitted against
N by ``scaling.auto.Auto`` (the shrunk log-log prior, its predictive
interval); the call-by-call shares come from the largest small trace.
"""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from scaling.auto import Auto

from .layout import ExtrapolationError

EXPONENTS = (0.0, -1.0, 1.0, -0.5, 0.5)
TOLERANCE = 0.005


def _candidates(ndims: int):
    """Exponent vectors, fewest non-zero first."""
    every = list(itertools.product(EXPONENTS, repeat=ndims))
    return sorted(every, key=lambda e: sum(x != 0 for x in e))


def fit_bytes(values: np.ndarray, dims: np.ndarray) -> tuple[float, tuple[float, ...]]:
    """``(a, b)`` with ``values[i] ~= a * prod(dims[i] ** b)`` for every
    small trace i; raises ValueError when no candidate fits."""
    values = np.asarray(values, float)
    if (values == values[0]).all():
        return float(values[0]), (0.0,) * dims.shape[1]
    if (values <= 0).any():
        raise ValueError("zero at some N and not at others")
    logd = np.log(dims.astype(float))
    for b in _candidates(dims.shape[1]):
        g = np.exp(logd @ np.asarray(b))
        a = float(np.exp(np.mean(np.log(values / g))))
        pred = a * g
        if (np.abs(pred - values) <= np.maximum(TOLERANCE * values, 8.0)).all():
            return a, tuple(b)
    raise ValueError("no power of the grid's extents reproduces it")


def element_size(values) -> int:
    """The largest of 8, 4, 2, 1 bytes dividing every observed size."""
    v = np.asarray(values, np.int64)
    for e in (8, 4, 2):
        if (v % e == 0).all():
            return e
    return 1


def predict_bytes(a: float, b, dims, element: int) -> int:
    """The size at a grid ``dims``, a whole number of elements."""
    x = a * float(np.prod(np.asarray(dims, float) ** np.asarray(b)))
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
        varies = np.flatnonzero((v != v[:1]).any(axis=0))
        cache: dict[tuple, int] = {}
        for k in varies:
            key = tuple(v[:, k])
            if key not in cache:
                try:
                    a, b = fit_bytes(v[:, k], dims)
                except ValueError as e:
                    seq = int(calls_by_n[-1]["seq"].iat[k])
                    raise ExtrapolationError(
                        f"{where}, event {seq} ({calls_by_n[-1]['op'].iat[k]}): {col} "
                        f"{list(map(int, v[:, k]))} at grids {[list(d) for d in dims_by_n]}: "
                        f"{e}") from None
                cache[key] = predict_bytes(a, b, target_dims, element_size(v[:, k]))
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
