"""The workflow's report: one self-contained HTML page plus PNG figures.

    python -m netsim.report --predictions P1.json [P2.json ...] --reps reps.csv
        --summary reps_summary.csv --dendrogram dendro.png [--timelines T1.json ...]
        [--trace-summary trace_summary.txt] [--validate validate.json]
        [--calibrated platform.yaml] -o report.html

Sections: the prediction per platform (ranked, fastest first: the what-if
sweep), the per-rank breakdown (computation / communication / waiting) on
the fastest platform, predicted vs measured when validate ran, the
representatives and dendrogram, a timeline excerpt, and every platform's
parameters.  Figures are embedded (base64) and also written beside the
report as PNG files.
"""
from __future__ import annotations

import argparse
import base64
import html
import json
import os
import sys

import pandas as pd


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _img(path: str) -> str:
    with open(path, "rb") as f:
        return ('<img alt="%s" src="data:image/png;base64,%s">'
                % (html.escape(os.path.basename(path)), base64.b64encode(f.read()).decode()))


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


def _table(df: pd.DataFrame, floatfmt="{:.4g}") -> str:
    return df.to_html(index=False, float_format=lambda v: floatfmt.format(v), border=0,
                      classes="t")


def build(out: str, predictions: list[str], reps: str, summary: str, dendrogram: str,
          timelines: list[str] | None = None, trace_summary: str | None = None,
          validate: str | None = None, calibrated: str | None = None) -> str:
    """Write the report (and its PNGs next to it); returns its path."""
    figdir = os.path.splitext(out)[0] + "_figures"
    os.makedirs(figdir, exist_ok=True)
    preds = []
    for p in predictions:
        with open(p) as f:
            d = json.load(f)
        d["_file"] = p
        preds.append(d)
    order = sorted(range(len(preds)), key=lambda i: preds[i]["predicted_time"])
    preds = [preds[i] for i in order]
    tls = [timelines[i] for i in order] if timelines else []
    best = preds[0]
    figs = {}
    figs["platforms"] = os.path.join(figdir, "platforms.png")
    platforms_png(figs["platforms"], preds)
    figs["breakdown"] = os.path.join(figdir, "breakdown.png")
    breakdown_png(figs["breakdown"], best)
    if tls:
        figs["timeline"] = os.path.join(figdir, "timeline.png")
        timeline_png(figs["timeline"], tls[0])
    rep = pd.read_csv(reps)
    summ = pd.read_csv(summary)
    ranked = pd.DataFrame([{
        "platform": p["platform"]["name"], "predicted time (s)": p["predicted_time"],
        "mean computation (s)": p["summary"]["computation"]["mean"],
        "mean communication (s)": p["summary"]["communication"]["mean"],
        "mean waiting (s)": p["summary"]["waiting"]["mean"],
        "relative to fastest": p["predicted_time"] / best["predicted_time"]} for p in preds])
    parts = [f"<h1>Predicted performance at {len(best['ranks'])} ranks</h1>",
             f"<p class=big>Fastest platform: <b>{html.escape(best['platform']['name'])}</b>, "
             f"predicted run time <b>{best['predicted_time']:.4g} s</b> "
             f"(computation from {html.escape(str(best.get('compute', 'the trace')))}).</p>"]
    for w in sorted({w for p in preds for w in p.get("warnings", [])}):
        parts.append(f"<p class=warn><b>Warning:</b> {html.escape(w)}</p>")
    if validate:
        with open(validate) as f:
            v = json.load(f)
        parts.append("<h2>Predicted vs measured</h2>" + _table(pd.DataFrame([{
            "platform": v["platform"], "predicted (s)": v["predicted"],
            "measured (s, min of %d)" % len(v["runs"]): v["measured"],
            "error": "%+.1f %%" % (100 * v["error"])}])))
    parts += ["<h2>Platforms (what-if sweep)</h2>", _table(ranked), _img(figs["platforms"]),
              "<h2>Per-rank breakdown</h2>", _img(figs["breakdown"]),
              "<p>Computation: the replayed target computation; waiting: blocked on a late "
              "partner; communication: the rest (overheads, transfers, collectives).</p>",
              _table(pd.DataFrame(best["ranks"]).head(64))]
    if "timeline" in figs:
        parts += ["<h2>Timeline excerpt</h2>", _img(figs["timeline"]),
                  f"<p>The full timeline opens in <a href='https://ui.perfetto.dev'>Perfetto</a>: "
                  f"{html.escape(tls[0])}</p>"]
    err = rep["error"].max() if "error" in rep else float("nan")
    parts += ["<h2>Representatives</h2>",
              f"<p>{len(rep)} ranks, {rep['group'].nunique()} communication group(s), "
              f"{len(summ)} cluster(s); largest clustering error (member total vs its "
              f"representative's) {err:.2%}.</p>", _table(summ), _img(dendrogram)]
    if trace_summary:
        with open(trace_summary) as f:
            parts += ["<h2>Trace</h2>", "<pre>" + html.escape(f.read()) + "</pre>"]
    if calibrated:
        with open(calibrated) as f:
            parts += ["<h2>Calibrated platform</h2>", "<pre>" + html.escape(f.read()) + "</pre>"]
    parts.append("<h2>Platform parameters</h2>")
    for p in preds:
        parts.append(f"<h3>{html.escape(p['platform']['name'])}</h3><pre>"
                     + html.escape(json.dumps(p["platform"], indent=1)) + "</pre>")
    page = ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>Prediction report</title>"
            "<style>body{font-family:sans-serif;max-width:1000px;margin:auto;padding:1em}"
            "table.t{border-collapse:collapse;font-size:13px}table.t td,table.t th"
            "{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}"
            "img{max-width:100%}.big{font-size:18px}.warn{background:#fde8e8;border-left:4px solid #c00;padding:6px}pre{background:#f6f6f6;padding:6px;"
            "font-size:12px;overflow:auto}</style></head><body>"
            + "\n".join(parts) + "</body></html>")
    with open(out + ".tmp", "w") as f:
        f.write(page)
    os.replace(out + ".tmp", out)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m netsim.report",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--predictions", nargs="+", required=True)
    ap.add_argument("--timelines", nargs="*", default=[])
    ap.add_argument("--reps", required=True)
    ap.add_argument("--summary", required=True)
    ap.add_argument("--dendrogram", required=True)
    ap.add_argument("--trace-summary")
    ap.add_argument("--validate")
    ap.add_argument("--calibrated")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args(argv)
    try:
        build(a.output, a.predictions, a.reps, a.summary, a.dendrogram, a.timelines,
              a.trace_summary, a.validate, a.calibrated)
    except (OSError, KeyError, ValueError) as e:
        print(f"netsim.report: error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
