"""The report page: one self-contained HTML file, figures embedded."""
from __future__ import annotations

import base64
import html
import json
import os

import pandas as pd

from cluster.representatives import read_representatives
from netsim.prediction import read_prediction

from .figures import breakdown_png, platforms_png, timeline_png


def _img(path: str) -> str:
    with open(path, "rb") as f:
        data = base64.b64encode(f.read()).decode()
    return f'<img alt="{html.escape(os.path.basename(path))}" src="data:image/png;base64,{data}">'


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
        d = read_prediction(p)
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
    rep = read_representatives(reps)
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
            f"measured (s, min of {len(v['runs'])})": v["measured"],
            "error": f"{100 * v['error']:+.1f} %"}])))
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
            "img{max-width:100%}.big{font-size:18px}"
            ".warn{background:#fde8e8;border-left:4px solid #c00;padding:6px}"
            "pre{background:#f6f6f6;padding:6px;"
            "font-size:12px;overflow:auto}</style></head><body>"
            + "\n".join(parts) + "</body></html>")
    with open(out + ".tmp", "w") as f:
        f.write(page)
    os.replace(out + ".tmp", out)
    return out


