"""The report's figures, each a PNG file."""
from __future__ import annotations

import json

import pandas as pd


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def breakdown_png(path: str, pred: dict) -> None:
    """Stacked bars per rank: computation, communication, waiting."""
    plt = _plt()
    pr = pd.DataFrame(pred["ranks"])
    if len(pr) > 256:                      # a readable figure: sample the ranks
        pr = pr.iloc[::len(pr) // 256 + 1]
    fig, ax = plt.subplots(figsize=(9, 3.6))
    x = pr["rank"].astype(str) if len(pr) <= 64 else pr["rank"]
    bottom = 0
    for col, colour in (("computation", "#4c72b0"), ("communication", "#dd8452"),
                        ("waiting", "#c44e52")):
        ax.bar(x, pr[col], bottom=bottom, label=col, color=colour, width=0.8)
        bottom = bottom + pr[col].to_numpy()
    ax.set_xlabel("rank")
    ax.set_ylabel("seconds")
    ax.set_title(f"per-rank breakdown on {pred['platform']['name']}: predicted "
                 f"{pred['predicted_time']:.4g} s", fontsize=10)
    if len(pr) > 32:
        ax.set_xticks([])
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def platforms_png(path: str, preds: list) -> None:
    plt = _plt()
    names = [p["platform"]["name"] for p in preds]
    times = [p["predicted_time"] for p in preds]
    fig, ax = plt.subplots(figsize=(7, 0.5 + 0.45 * len(preds)))
    ax.barh(names[::-1], times[::-1], color="#4c72b0")
    for i, t in enumerate(times[::-1]):
        ax.text(t, i, f" {t:.4g} s", va="center", fontsize=8)
    ax.set_xlabel("predicted run time (s)")
    ax.set_title("what-if: the same trace and replay on each platform", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def timeline_png(path: str, timeline: str, ranks: int = 16, max_events: int = 20000) -> None:
    """Gantt chart of the first ranks from a Chrome-trace timeline."""
    plt = _plt()
    with open(timeline) as f:
        ev = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"
              and e["tid"] < ranks][:max_events]
    colours = {"compute": "#4c72b0", "send": "#55a868", "recv": "#dd8452",
               "collective": "#8172b3"}
    fig, ax = plt.subplots(figsize=(9, 0.4 + 0.3 * min(ranks, 1 + max((e["tid"] for e in ev),
                                                                         default=0))))
    for cat, colour in colours.items():
        sel = [e for e in ev if e["cat"] == cat]
        if sel:
            ax.broken_barh([(e["ts"] / 1e6, max(e["dur"], 1e-3) / 1e6) for e in sel], (0, 0),
                           color=colour)
            for e in sel:
                ax.broken_barh([(e["ts"] / 1e6, max(e["dur"], 1e-3) / 1e6)],
                               (e["tid"] - 0.4, 0.8), color=colour)
            ax.plot([], [], color=colour, linewidth=6, label=cat)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("rank")
    ax.invert_yaxis()
    ax.legend(fontsize=7, ncol=4, loc="upper right")
    ax.set_title("timeline excerpt (first ranks)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


