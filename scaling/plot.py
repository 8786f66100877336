"""Figures: fitted curves with measured points, held-out points marked."""
from __future__ import annotations

import numpy as np
import pandas as pd


def fits_png(path: str, train: pd.DataFrame, test: pd.DataFrame, fitted: dict,
             predict_at: list[int], unit: str = "s") -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.2))
    allq = pd.concat([train, test])["procs"].tolist() + list(predict_at)
    q = np.unique(np.geomspace(min(allq), max(allq), 200).round(6))
    extra = {c: train[c].iloc[-1] for c in train.columns if c not in ("procs", "time")
             and c not in ("efficiency", "program")}
    grid = pd.DataFrame(dict({"procs": q}, **extra))
    for name, m in fitted.items():
        with np.errstate(all="ignore"):
            t = np.asarray(m.predict(grid), float)
        ax.plot(q, np.where(t > 0, t, np.nan), label=getattr(m, "name", name)
                if name == "auto" else name)
    ax.scatter(train["procs"], train["time"], color="k", zorder=3, label="training runs")
    if len(test):
        ax.scatter(test["procs"], test["time"], color="red", marker="x", s=60, zorder=3,
                   label="held-out runs")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("processes")
    ax.set_ylabel(f"time ({unit})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
