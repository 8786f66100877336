"""The report's figures, each a PNG file.

One colour per activity in every figure (ACTIVITY); legends sit outside
the data; rank axes aggregate beyond ``MAX_BARS`` ranks, so that a run of
10,000 ranks reads as well as one of 8.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from contracts.units import seconds

# the activities a rank's time splits into, and their colours everywhere
ACTIVITY = {"computation": "#4c72b0", "communication": "#dd8452", "waiting": "#c44e52"}
# the timeline cannot split a call's time into communication and waiting:
# it shows the whole call in a colour of its own
IN_MPI = "#8c8c8c"
MAX_BARS = 64


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def rank_bins(n: int, bins: int = MAX_BARS) -> list[tuple[int, int]]:
    """Consecutive rank ranges ``[lo, hi)`` covering 0..n-1: one per rank up
    to ``bins`` ranks, else ``bins`` ranges of (nearly) equal size."""
    if n <= bins:
        return [(r, r + 1) for r in range(n)]
    edges = np.linspace(0, n, bins + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:]) if b > a]


def breakdown_png(path: str, pred: dict) -> None:
    """Per rank (or per range of ranks, averaged, beyond MAX_BARS ranks):
    stacked computation, communication and waiting; with ranges, the
    slowest and fastest finish in each range as a band."""
    plt = _plt()
    pr = pd.DataFrame(pred["ranks"]).sort_values("rank")
    bins = rank_bins(len(pr))
    finish = pr["finish"].to_numpy()
    fig, ax = plt.subplots(figsize=(9.5, 3.8), layout="constrained")
    x = np.arange(len(bins))
    bottom = np.zeros(len(bins))
    for col, colour in ACTIVITY.items():
        v = pr[col].to_numpy()
        mean = np.array([v[a:b].mean() for a, b in bins])
        ax.bar(x, mean, bottom=bottom, color=colour, width=0.85,
               label=col + (" (mean of the range)" if len(bins) < len(pr) else ""))
        bottom += mean
    if len(bins) < len(pr):
        lo = [finish[a:b].min() for a, b in bins]
        hi = [finish[a:b].max() for a, b in bins]
        ax.fill_between(x, lo, hi, step="mid", color="black", alpha=0.15,
                        label="finish: fastest to slowest rank of the range")
        labels = [f"{a}-{b - 1}" for a, b in bins]
        step = max(1, len(bins) // 8)
        ax.set_xticks(x[::step], labels[::step], fontsize=7)
        ax.set_xlabel(f"ranks ({len(pr)} in {len(bins)} ranges)")
    else:
        step = max(1, len(bins) // 16)
        ax.set_xticks(x[::step], [str(a) for a, _ in bins][::step], fontsize=8)
        ax.set_xlabel("rank")
    ax.set_ylabel("seconds")
    ax.set_title(f"where the time goes on {pred['platform']['name']}: predicted "
                 f"{seconds(pred['predicted_time'])}", fontsize=10)
    fig.legend(loc="outside right upper", fontsize=8, frameon=False)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def platforms_png(path: str, preds: list) -> None:
    """Predicted time per platform, fastest on top, with its band."""
    plt = _plt()
    names = [p["platform"]["name"] for p in preds][::-1]
    times = np.array([p["predicted_time"] for p in preds][::-1])
    band = np.array([p.get("band", [p["predicted_time"]] * 2) for p in preds][::-1])
    err = np.vstack([times - band[:, 0], band[:, 1] - times])
    fig, ax = plt.subplots(figsize=(8, 0.8 + 0.45 * len(preds)), layout="constrained")
    ax.barh(names, times, color=ACTIVITY["computation"], alpha=0.85)
    ax.errorbar(times, np.arange(len(names)), xerr=err, fmt="none", ecolor="black",
                capsize=4, linewidth=1)
    for i, (t, hi) in enumerate(zip(times, band[:, 1])):
        ax.text(hi, i, f"  {seconds(t)}", va="center", fontsize=8)
    ax.set_xlim(0, band[:, 1].max() * 1.25)
    ax.set_xlabel("predicted run time (s); whiskers: the band from the measured computation")
    ax.set_title("what-if: the same trace and replay on each platform", fontsize=10)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def variability_png(path: str, preds: list) -> bool:
    """Left: each platform's sampled run times (dots), the median (the
    prediction) and the 5-95 % band; right: the measured core factors of
    each representative.  False (nothing drawn) when no prediction was
    sampled."""
    sampled = [p for p in preds if p.get("variability")]
    if not sampled:
        return False
    plt = _plt()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 1.2 + 0.45 * max(len(sampled), 3)),
                                 layout="constrained", width_ratios=[3, 2])
    for i, p in enumerate(sampled):
        t = np.asarray(p["variability"]["times"])
        ax.plot(t, np.full(len(t), i), "o", color=ACTIVITY["computation"], alpha=0.5, ms=4)
        ax.plot(p["band"], [i, i], color="black", linewidth=1)
        ax.plot([p["predicted_time"]], [i], "|", color="black", ms=14, mew=2)
    ax.set_yticks(range(len(sampled)), [p["platform"]["name"] for p in sampled])
    ax.set_xlabel("run time of each sample (s); bar: 5-95 %, tick: the median (the prediction)")
    ax.set_title("samples of the run", fontsize=10)
    reps = sampled[0]["variability"]["representatives"]
    for j, r in enumerate(reps):
        f = np.asarray(r["core_factors"])
        bx.plot(f, np.full(len(f), j), "o", color=ACTIVITY["waiting"], alpha=0.6, ms=4)
    bx.axvline(1.0, color="grey", linewidth=0.8)
    bx.set_yticks(range(len(reps)), [f"rank {r['representative']}: run "
                                     f"{100 * r['sigma_run']:.1f} %, span "
                                     f"{100 * r['sigma_span']:.1f} %" for r in reps],
                  fontsize=8)
    bx.set_xlabel("core factor per copy (1: copy 0)")
    bx.set_title("measured per representative", fontsize=10)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def timeline_png(path: str, timeline: str, ranks: int = 16, max_events: int = 20000) -> None:
    """Gantt chart of the first ranks from a Chrome-trace timeline:
    computation, and time inside MPI calls."""
    plt = _plt()
    with open(timeline) as f:
        ev = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"
              and e["tid"] < ranks][:max_events]
    shown = min(ranks, 1 + max((e["tid"] for e in ev), default=0))
    fig, ax = plt.subplots(figsize=(9.5, 0.9 + 0.3 * shown), layout="constrained")
    for label, colour, cats in (("computation", ACTIVITY["computation"], ("compute",)),
                                ("in MPI calls (communication and waiting)", IN_MPI,
                                 ("send", "recv", "collective"))):
        sel = [e for e in ev if e["cat"] in cats]
        for e in sel:
            ax.broken_barh([(e["ts"] / 1e6, max(e["dur"], 1e-3) / 1e6)],
                           (e["tid"] - 0.4, 0.8), color=colour)
        ax.plot([], [], color=colour, linewidth=6, label=label)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("rank")
    ax.set_ylim(shown - 0.5, -0.5)
    ax.set_title(f"timeline excerpt: the first {shown} ranks", fontsize=10)
    fig.legend(loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    fig.savefig(path, dpi=110)
    plt.close(fig)
