"""A scalability study from the workflow's predictions at several N.

The workflow predicts the application at every N of ``ranks:`` on every
platform (and runs it for real where ``validate`` is on).  This module
turns those files into:

* ``times.csv``: one row per (platform, source, procs) with ``time`` (s),
  ``comp`` (the last rank's computation) and ``comm`` (the rest of its
  time: communication and waiting); source is ``predicted`` or
  ``measured``;
* ``extrapolation.csv``: per platform and source, the automatic model
  (:class:`scaling.auto.Auto`) fitted to the times and evaluated at every
  studied N and every N asked for: ``procs``, ``time``, ``low``, ``high``
  (the interval at ``level``), ``model`` (the one that answered at that
  N); ``comp`` and ``comm``
  extrapolated one by one beside it;
* ``metric.csv``: the scalability metric's tuple per platform and source
  (efficiency from the times: strong or weak scaling);
* ``scaling.png``: time against N per platform, predicted points, measured
  points, the extrapolation with its band.
"""
from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pandas as pd

from .auto import Auto
from .metric import TUPLE, efficiency, metric

TIMES = ["platform", "source", "procs", "time", "comp", "comm"]


def collect(predictions: list[str], validations: Sequence[str] = ()) -> pd.DataFrame:
    """The times table from prediction JSONs and validate JSONs."""
    from contracts.prediction import read_prediction
    from contracts.validation import read_validation
    rows = []
    for path in predictions:
        d = read_prediction(path)
        last = max(d["ranks"], key=lambda r: r["finish"])
        t = float(d["predicted_time"])
        comp = min(float(last["computation"]), t)
        rows.append({"platform": d["platform"]["name"], "source": "predicted",
                     "procs": len(d["ranks"]), "time": t, "comp": comp, "comm": t - comp})
    for path in validations:
        v = read_validation(path)
        rows.append({"platform": v["platform"], "source": "measured", "procs": int(v["ranks"]),
                     "time": float(v["measured"]), "comp": np.nan, "comm": np.nan})
    return pd.DataFrame(rows, columns=TIMES).sort_values(["platform", "source", "procs"])


def _auto(df: pd.DataFrame, column: str, at: pd.DataFrame, level: float):
    d = df[["procs", column]].rename(columns={column: "time"}).dropna()
    d = d[d["time"] > 0]
    if d["procs"].nunique() < 2:
        return None
    m = Auto().fit(d.groupby("procs", as_index=False)["time"].min())
    lo, hi = m.interval(at, level)
    return m.answering(at), m.predict(at), lo, hi


def extrapolate(times: pd.DataFrame, predict=(), level: float = 0.9) -> pd.DataFrame:
    """Per platform and source: the automatic model at the studied and asked N."""
    out = []
    for (plat, src), g in times.groupby(["platform", "source"]):
        at = pd.DataFrame({"procs": sorted(set(g["procs"]) | set(predict))})
        fit = _auto(g, "time", at, level)
        if fit is None:
            continue
        name, t, lo, hi = fit
        row = at.assign(platform=plat, source=src, time=t, low=lo, high=hi, model=name)
        for part in ("comp", "comm"):
            f = _auto(g, part, at, level)
            row[part] = f[1] if f else np.nan
        out.append(row)
    cols = ["platform", "source", "procs", "time", "low", "high", "model", "comp", "comm"]
    return pd.concat(out, ignore_index=True)[cols] if out else pd.DataFrame(columns=cols)


def marks(times: pd.DataFrame, scaling: str = "strong") -> pd.DataFrame:
    """The metric's tuple per platform and source (one size: along N only)."""
    rows = []
    for (plat, src), g in times.groupby(["platform", "source"]):
        if g["procs"].nunique() < 2:
            continue
        e = efficiency(g[["procs", "time"]].assign(size=0), scaling)
        rows.append({"platform": plat, "source": src, **metric(e)})
    return pd.DataFrame(rows, columns=["platform", "source"] + TUPLE)


def study_png(path: str, times: pd.DataFrame, extra: pd.DataFrame) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for k, (plat, g) in enumerate(times.groupby("platform")):
        colour = f"C{k}"
        for src, marker in (("predicted", "o"), ("measured", "x")):
            h = g[g["source"] == src]
            if len(h):
                ax.scatter(h["procs"], h["time"], color=colour, marker=marker, zorder=3,
                           label=f"{plat} ({src})")
        e = extra[(extra["platform"] == plat) & (extra["source"] == "predicted")]
        if len(e):
            ax.plot(e["procs"], e["time"], color=colour, lw=1,
                    label=f"{plat}: {e['model'].iloc[0]}")
            ax.fill_between(e["procs"], e["low"], e["high"], color=colour, alpha=0.15)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("processes N")
    ax.set_ylabel("run time (s)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def study(predictions: list[str], validations: list[str], out: str, predict=(),
          level: float = 0.9, scaling: str = "strong") -> dict:
    """Write the study's files into ``out``; returns their paths."""
    os.makedirs(out, exist_ok=True)
    times = collect(predictions, validations)
    extra = extrapolate(times, predict, level)
    m = marks(times, scaling)
    paths = {k: os.path.join(out, f"{k}.csv") for k in ("times", "extrapolation", "metric")}
    times.to_csv(paths["times"], index=False)
    extra.to_csv(paths["extrapolation"], index=False)
    m.to_csv(paths["metric"], index=False)
    paths["plot"] = os.path.join(out, "scaling.png")
    study_png(paths["plot"], times, extra)
    return paths
