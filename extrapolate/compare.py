"""An extrapolated trace against a real trace at the same N: what the
validation reports (bench/extrapolation.py, tests/test_extrapolate.py).

``compare(extrapolated, real)`` -> a dict:

=================  ==========================================================
key                meaning
=================  ==========================================================
same_calls         every rank's calls identical: op, communicator, peer,
                   tag, bytes (sent, received), request ids, flags
first_difference   where they first differ: "rank R, event S: column" or ""
cpu_error_median   median over ranks of |extrapolated - real| / real, of
                   each rank's total CPU seconds
cpu_error_max      the largest of those
real_noise         the real trace's own spread: median over position
                   classes of the robust relative spread (1.4826 x median
                   absolute deviation / median) of its members' totals
=================  ==========================================================
"""
from __future__ import annotations

import numpy as np

from .layout import layout_of

CALL_COLUMNS = ["rank", "seq", "op", "comm", "peer", "tag", "sbytes", "rbytes", "rpeer",
                "rtag", "req", "reqs", "newcomm", "flags", "wildcard"]


def _normal(ev):
    e = ev[CALL_COLUMNS].reset_index(drop=True).copy()
    e["reqs"] = [tuple(x) if x is not None else () for x in e["reqs"]]
    return e


def compare(extrapolated, real) -> dict:
    """Loaded traces (contracts.trace.load_trace) at the same N."""
    a, b = _normal(extrapolated.events), _normal(real.events)
    where = ""
    if len(a) != len(b):
        n_a, n_b = a.groupby("rank").size(), b.groupby("rank").size()
        r = int(np.flatnonzero(n_a.reindex(n_b.index, fill_value=-1).to_numpy()
                               != n_b.to_numpy())[0]) if len(n_a) == len(n_b) else 0
        where = f"rank {r}: {n_a.get(r, 0)} calls extrapolated, {n_b.get(r, 0)} real"
    else:
        for c in CALL_COLUMNS:
            diff = np.flatnonzero(a[c].to_numpy() != b[c].to_numpy())
            if len(diff):
                i = int(diff[0])
                where = f"rank {b['rank'].iat[i]}, event {b['seq'].iat[i]}: {c}"
                break
    ta = extrapolated.events.groupby("rank")["cpu"].sum()
    tb = real.events.groupby("rank")["cpu"].sum()
    err = np.abs(ta.to_numpy() - tb.to_numpy()) / tb.to_numpy()
    names = np.array(layout_of(real).position_classes(np.arange(real.size)))
    spread = []
    for name in set(names):
        x = tb.to_numpy()[names == name]
        if len(x) >= 3 and np.median(x) > 0:
            spread.append(1.4826 * np.median(np.abs(x - np.median(x))) / np.median(x))
    return {"same_calls": not where, "first_difference": where,
            "cpu_error_median": float(np.median(err)), "cpu_error_max": float(err.max()),
            "real_noise": float(np.median(spread)) if spread else float("nan")}
