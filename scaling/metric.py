"""The scalability metric of a program over a (procs, size) region.

From a table of efficiencies on a rectangular grid of launch
configurations (``procs`` p, ``size`` d; the maximum efficiency over
repeated runs), each element of four neighbouring points gets marks

    dEP = ((E12 - E11) + (E22 - E21)) / 2     markP = dEP (p2 - p1) / (max p - min p)
    dED = ((E21 - E11) + (E22 - E12)) / 2     markD = dED (d2 - d1) / (max d - min d)
    dEA = (dEP + dED) / 2                      markA = dEA (p2-p1)(d2-d1) / (range p * range d)

with E11 = E(p1, d1), E12 = E(p2, d1), E21 = E(p1, d2), E22 = E(p2, d2);
falling efficiency gives negative marks.  The program's metric is the tuple
(min p, min d, max p, max d, MarkProcs, MarkData, MarkAll, max E, min E),
the marks being means over all elements.  Missing configurations: a corner
takes the next existing value along the p axis (then along d).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

TUPLE = ["min_procs", "min_size", "max_procs", "max_size", "MarkProcs", "MarkData",
         "MarkAll", "max_E", "min_E"]


def efficiency(df: pd.DataFrame, scaling: str = "strong") -> pd.DataFrame:
    """``df`` with an ``efficiency`` column from its times, against the fewest
    processes p0 of each (program, size): strong scaling (fixed total work)
    T(p0) p0 / (T(p) p), weak scaling (fixed work per process) T(p0) / T(p)."""
    if scaling not in ("strong", "weak"):
        raise ValueError(f"unknown scaling {scaling!r}: strong or weak")
    key = [c for c in ["program", "size"] if c in df]
    first = df.loc[df.groupby(key)["procs"].idxmin()] if key else df.nsmallest(1, "procs")
    if key:
        base = first.set_index(key)[["procs", "time"]]
        ref = df.join(base.rename(columns={"procs": "p0", "time": "t0"}), on=key)
    else:
        ref = df.assign(p0=first["procs"].iloc[0], t0=first["time"].iloc[0])
    out = df.copy()
    out["efficiency"] = ref["t0"] / df["time"]
    if scaling == "strong":
        out["efficiency"] *= ref["p0"] / df["procs"]
    return out


def efficiency_grid(df: pd.DataFrame):
    """(p values, d values, E[d index, p index]) with NaN where missing."""
    g = df.groupby(["size", "procs"])["efficiency"].max().unstack("procs")
    return g.columns.to_numpy(float), g.index.to_numpy(float), g.to_numpy(float)


def _fill(E):
    """Missing values: the next existing value along p, then along d."""
    E = E.copy()
    for i in range(E.shape[0]):
        for j in range(E.shape[1] - 2, -1, -1):
            if np.isnan(E[i, j]):
                E[i, j] = E[i, j + 1]
    for j in range(E.shape[1]):
        for i in range(E.shape[0] - 2, -1, -1):
            if np.isnan(E[i, j]):
                E[i, j] = E[i + 1, j]
    return E


def metric(df: pd.DataFrame) -> dict:
    """The metric's tuple of one program (``procs``, ``size``, ``efficiency``).

    With a single size the region is a line: MarkProcs is the mean of
    dE (p2 - p1) / (max p - min p) over neighbouring process counts, and
    MarkData and MarkAll are undefined (NaN)."""
    p, d, E = efficiency_grid(df)
    if len(p) < 2:
        raise ValueError("the metric needs at least two procs values")
    E = _fill(E)
    if len(d) == 1:
        e = E[0]
        mp = [(e[j + 1] - e[j]) * (p[j + 1] - p[j]) / (p[-1] - p[0]) for j in range(len(p) - 1)]
        vals = df["efficiency"]
        return dict(zip(TUPLE, [p[0], d[0], p[-1], d[-1], float(np.mean(mp)), np.nan, np.nan,
                                float(vals.max()), float(vals.min())]))
    rp, rd = p[-1] - p[0], d[-1] - d[0]
    mp, md, ma = [], [], []
    for i in range(len(d) - 1):
        for j in range(len(p) - 1):
            E11, E12, E21, E22 = E[i, j], E[i, j + 1], E[i + 1, j], E[i + 1, j + 1]
            if np.isnan([E11, E12, E21, E22]).any():
                continue
            dEP = ((E12 - E11) + (E22 - E21)) / 2
            dED = ((E21 - E11) + (E22 - E12)) / 2
            dp, dd = p[j + 1] - p[j], d[i + 1] - d[i]
            mp.append(dEP * dp / rp)
            md.append(dED * dd / rd)
            ma.append((dEP + dED) / 2 * dp * dd / (rp * rd))
    vals = df["efficiency"]
    return dict(zip(TUPLE, [p[0], d[0], p[-1], d[-1], float(np.mean(mp)), float(np.mean(md)),
                            float(np.mean(ma)), float(vals.max()), float(vals.min())]))


def surface_png(path: str, df: pd.DataFrame, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    p, d, E = efficiency_grid(df)
    P, D = np.meshgrid(p, d)
    fig = plt.figure(figsize=(6, 4.5))
    ax = fig.add_subplot(projection="3d")
    ax.plot_surface(P, D, _fill(E), cmap="viridis", edgecolor="k", linewidth=0.3)
    ax.set_xlabel("processes")
    ax.set_ylabel("problem size")
    ax.set_zlabel("efficiency")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
