"""The report page: one self-contained HTML file, figures embedded.

Read top to bottom as a manager would: the answer (fastest platform, its
band, which platforms cannot be told apart), warnings, predicted against
measured, the platforms side by side, where the time goes (aggregated for
large runs, the slowest ranks named), a timeline excerpt, the
representatives, and the platforms' parameters as one table.
"""
from __future__ import annotations

import base64
import html
import json
import os

import pandas as pd

from contracts.prediction import QUANTITIES, read_prediction
from contracts.representatives import read_representatives
from contracts.units import seconds

from .figures import breakdown_png, platforms_png, timeline_png, variability_png

SLOWEST = 10                    # ranks named in the per-rank table
# Once laid out, the page notes on its body whether every figure decoded
# and whether anything is wider than the window: what a headless browser
# test reads back (tests/test_report.py), and harmless to a reader.
LAYOUT_CHECK = ("<script>addEventListener('load',function(){var b=document.body;"
                "b.dataset.images=[].every.call(document.images,function(i){"
                "return i.complete&&i.naturalWidth>0})?'ok':'broken';"
                "b.dataset.overflow=document.documentElement.scrollWidth>innerWidth?"
                "'yes':'no'})</script>")


def _img(path: str) -> str:
    with open(path, "rb") as f:
        data = base64.b64encode(f.read()).decode()
    return f'<img alt="{html.escape(os.path.basename(path))}" src="data:image/png;base64,{data}">'


def _table(df: pd.DataFrame, times=()) -> str:
    """An HTML table: the columns named in ``times`` hold seconds and are
    written in engineering units (contracts.units), other numbers with
    three significant digits."""
    df = df.copy()
    for c in times:
        if c in df.columns:
            df[c] = df[c].map(seconds)
    return df.to_html(index=False, float_format=lambda v: f"{v:.3g}", border=0, classes="t")


def indistinguishable(preds: list) -> list[tuple[str, str]]:
    """Pairs of platforms (in ranking order) whose prediction bands overlap:
    the measurement cannot say which one is faster."""
    out = []
    for i, a in enumerate(preds):
        for b in preds[i + 1:]:
            if b["band"][0] <= a["band"][1]:
                out.append((a["platform"]["name"], b["platform"]["name"]))
    return out


def _us(v) -> str:
    return "-" if v is None else f"{v * 1e6:.3g}"


def _gbs(byte_time) -> str:
    return "-" if not byte_time else f"{1e-9 / byte_time:.3g}"


def parameters(platforms: list[dict]) -> pd.DataFrame:
    """The platforms' parameters side by side: one row per parameter, one
    column per platform (``Platform.describe()`` dicts)."""
    rows: dict[str, dict] = {}

    def put(key, name, value):
        rows.setdefault(key, {"parameter": key})[name] = value
    for p in platforms:
        n = p["name"]
        put("nodes x cores per node", n, f"{p['nodes']} x {p['cores_per_node']}")
        put("placement", n, p["placement"])
        for i, lv in enumerate(p["levels"]):
            joins = f"up to {lv['span']} cores" if lv.get("span") else "everything"
            put(f"level {i + 1}", n, f"{lv.get('name') or '-'} ({joins})")
            put(f"level {i + 1} latency (us)", n, _us(lv["latency"]))
            put(f"level {i + 1} bandwidth (GB/s)", n, _gbs(lv["byte_time"]))
        put("overhead send / recv (us)", n,
            f"{_us(p['overhead']['send'])} / {_us(p['overhead']['recv'])}")
        put("gap between messages (us)", n, _us(p["gap"]))
        put("eager limit (bytes)", n, p["eager_limit"])
        put("NIC contention", n, "yes" if p["contention"] else "no")
        put("MPI call overhead (us)", n, _us(p["call_overhead"]))
        put("collectives", n, ", ".join(f"{k}: {v}" for k, v in p["collectives"].items()))
        put("computation scale", n, p["compute_scale"])
        put("semantics", n, p["semantics"])
    names = [p["name"] for p in platforms]
    return pd.DataFrame(list(rows.values()), columns=["parameter"] + names).fillna("-")


def per_rank_summary(pred: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(min / mean / max of every quantity over the ranks, the slowest ranks)."""
    pr = pd.DataFrame(pred["ranks"])
    stats = pd.DataFrame([{"": f, **{q: getattr(pr[q], f)() for q in QUANTITIES}}
                          for f in ("min", "mean", "max")])
    slow = pr.sort_values("finish", ascending=False).head(SLOWEST)
    return stats, slow[["rank", *QUANTITIES]]


def _headline(preds: list) -> list[str]:
    best = preds[0]
    lo, hi = best["band"]
    parts = [f"<h1>Predicted performance at {len(best['ranks'])} ranks</h1>",
             f"<p class=big>Fastest platform: <b>{html.escape(best['platform']['name'])}</b>, "
             f"predicted run time <b>{seconds(best['predicted_time'])}</b>"
             + (f" (band {seconds(lo)} to {seconds(hi)})" if hi > lo else "")
             + f"; computation from {html.escape(str(best.get('compute', 'the trace')))}.</p>"]
    same = indistinguishable(preds)
    if same:
        parts.append("<p class=note><b>Indistinguishable:</b> "
                     + "; ".join(f"{html.escape(a)} and {html.escape(b)}" for a, b in same)
                     + ": their bands overlap, so this prediction cannot say which is "
                       "faster.</p>")
    said: dict[str, list[str]] = {}       # warning -> the platforms it came from
    for p in preds:
        for w in p.get("warnings", []):
            said.setdefault(w, []).append(p["platform"]["name"])
    for w, names in said.items():
        where = "every platform" if len(names) == len(preds) else ", ".join(names)
        parts.append(f"<p class=warn><b>Warning</b> ({html.escape(where)}): "
                     f"{html.escape(w)}</p>")
    return parts


def _ranking(preds: list) -> pd.DataFrame:
    best = preds[0]["predicted_time"]
    return pd.DataFrame([{
        "platform": p["platform"]["name"], "predicted time": seconds(p["predicted_time"]),
        "band": f"{seconds(p['band'][0])} - {seconds(p['band'][1])}",
        "relative to fastest": p["predicted_time"] / best,
        "mean computation": seconds(p["summary"]["computation"]["mean"]),
        "mean communication": seconds(p["summary"]["communication"]["mean"]),
        "mean waiting": seconds(p["summary"]["waiting"]["mean"])} for p in preds])


def _busiest_links(preds: list, top: int = 5) -> list[str]:
    """Per platform with a topology, its most loaded links: why one
    topology is slower than another."""
    rows = [{"platform": p["platform"]["name"], "link": k["link"], "busy": k["busy"],
             "share of the run": f"{100 * k['load']:.0f} %"}
            for p in preds for k in p.get("links", [])[:top]]
    if not rows:
        return []
    return ["<h3>Most loaded links</h3>",
            "<p>Per platform with a topology, the links that carried messages the longest "
            "(seconds busy, and that as a share of the predicted run): a link busy for most "
            "of the run is where messages queue.</p>",
            _table(pd.DataFrame(rows), times=("busy",))]


def _study(folder: str) -> list[str]:
    """The scalability study's section (python -m scaling study)."""
    extra = pd.read_csv(os.path.join(folder, "extrapolation.csv"))
    marks = pd.read_csv(os.path.join(folder, "metric.csv"))
    times = pd.read_csv(os.path.join(folder, "times.csv"))
    studied = sorted(times["procs"].unique())
    asked = extra[~extra["procs"].isin(studied)]
    parts = ["<h2>Scalability study</h2>",
             f"<p>Predicted at N = {', '.join(map(str, studied))} on every platform; the "
             "curves are the automatic model fitted to those predictions (a log-log "
             "quadratic whose curvature is shrunk toward zero, or per distance out a "
             "candidate that rolling origin showed clearly better on two cuts or more), "
             "the band its predictive interval.</p>",
             _img(os.path.join(folder, "scaling.png"))]
    if len(asked):
        parts += ["<p>Extrapolated beyond the studied N:</p>",
                  _table(asked[["platform", "source", "procs", "time", "low", "high",
                                "model"]], times=("time", "low", "high"))]
    if len(marks):
        parts += ["<p>The scalability metric per platform (efficiency along N; marks "
                  "negative where it falls; higher is better):</p>",
                  _table(marks[["platform", "source", "min_procs", "max_procs", "MarkProcs",
                                "max_E", "min_E"]].sort_values("MarkProcs",
                                                               ascending=False))]
    parts += ["<h3>Times per N</h3>", _table(times, times=("time", "low", "high"))]
    return parts


def _partial(path: str) -> list[str]:
    """The representatives' partial replays: the loop, what was replayed
    and the saving, or why the whole run was."""
    from contracts.partial import read_partial
    plan = read_partial(path)
    rows = [{"representative": int(r.rank), "events": int(r.events),
             "loop": (f"{int(r.period)} calls x {int(r.iterations)} from event {int(r.start)}"
                      if r.period > 0 else "-"),
             "replayed": (f"events 0-{int(r.cut)}: {int(r.warmup)} warm-up + {int(r.replayed)} "
                          f"iterations" if r.cut >= 0 else f"whole run: {r.reason}"),
             "saving": f"{r.events / (r.cut + 1):.1f}x" if r.cut >= 0 else "-"}
            for r in plan.itertuples()]
    return ["<h2>Partial replay</h2>",
            "<p>Each representative replayed only through its set-up, a warm-up and some "
            "iterations of its main loop where that is safe; the iterations not replayed take "
            "the mean of those replayed (docs/METHODS.md, \"Partial replay\").</p>",
            _table(pd.DataFrame(rows))]


def _nodes(path: str) -> list[str]:
    """Where the log was recorded and where it was replayed (a bundle's
    round trip): the two nodes side by side, with their speed probes."""
    with open(path) as f:
        nodes = json.load(f)
    rows = []
    for role in ("host", "target"):
        n = nodes.get(role) or {}
        mpi = n.get("mpi") or {}
        rows.append({"node": role, "hostname": n.get("hostname", "?"),
                     "machine": n.get("machine", "?"), "CPU": n.get("cpu", "?"),
                     "cores": n.get("cores", "?"), "Python": n.get("python", "?"),
                     "MPI": f"{mpi.get('vendor', '?')} {mpi.get('version', '')}",
                     "speed probe": seconds(n["speed_probe_s"]) if "speed_probe_s" in n else "-"})
    text = ""
    h, t = (nodes.get(k) or {} for k in ("host", "target"))
    if h.get("speed_probe_s") and t.get("speed_probe_s"):
        ratio = h["speed_probe_s"] / t["speed_probe_s"]
        text = (f"<p>The same interpreter-bound probe ran {ratio:.2f}x as fast on the target "
                f"as on the host (a hint only: the replay measured the application itself "
                f"there).</p>")
    return ["<h2>Replayed on a node elsewhere</h2>",
            "<p>The representatives were packed into a bundle, replayed on the target node "
            "and their results carried back (docs/METHODS.md, \"Replaying on a node "
            "elsewhere\").</p>", _table(pd.DataFrame(rows)), text]


def build(out: str, predictions: list[str], reps: str, summary: str, dendrogram: str,
          timelines: list[str] | None = None, trace_summary: str | None = None,
          validate: str | None = None, calibrated: str | None = None,
          scaling: str | None = None, partial: str | None = None,
          nodes: str | None = None) -> str:
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
    figs = {k: os.path.join(figdir, f"{k}.png")
            for k in ("platforms", "breakdown", "timeline", "variability")}
    platforms_png(figs["platforms"], preds)
    varied = variability_png(figs["variability"], preds)
    breakdown_png(figs["breakdown"], best)
    if tls:
        timeline_png(figs["timeline"], tls[0])
    rep = read_representatives(reps)
    summ = pd.read_csv(summary)
    parts = _study(scaling) if scaling else []
    parts += _headline(preds)
    if validate:
        from contracts.validation import read_validation
        v = read_validation(validate)
        parts.append("<h2>Predicted vs measured</h2>" + _table(pd.DataFrame([{
            "platform": v["platform"], "predicted": seconds(v["predicted"]),
            f"measured (min of {len(v['runs'])})": seconds(v["measured"]),
            "error": f"{100 * v['error']:+.1f} %"}])))
    stats, slow = per_rank_summary(best)
    parts += ["<h2>Platforms (what-if sweep)</h2>", _table(_ranking(preds)),
              _img(figs["platforms"])]
    parts += _busiest_links(preds)
    if varied:
        v = best["variability"]
        parts += ["<h2>Variability</h2>", _img(figs["variability"]),
                  f"<p>Each prediction is the median of {v['samples']} samples of the run "
                  f"(seed {v['seed']}): every rank on a core of the measured speeds, with its "
                  f"own run-to-run and span-to-span noise, as measured by replaying each "
                  f"representative as concurrent copies on the target node.  A real run waits "
                  f"at each synchronisation for its slowest rank; the band is the samples' "
                  f"5-95 % range.</p>"]
    parts += [f"<h2>Where the time goes on {html.escape(best['platform']['name'])}</h2>",
              _img(figs["breakdown"]),
              "<p>Computation: the replayed target computation; communication: overheads, "
              "transfers and collectives not hidden by computation; waiting: blocked on a "
              "late partner.</p>", _table(stats, times=QUANTITIES),
              f"<p>The {min(SLOWEST, len(slow))} slowest of {len(best['ranks'])} ranks:</p>",
              _table(slow, times=QUANTITIES)]
    if tls:
        parts += ["<h2>Timeline excerpt</h2>", _img(figs["timeline"]),
                  f"<p>The full timeline opens in <a href='https://ui.perfetto.dev'>Perfetto</a>: "
                  f"{html.escape(tls[0])}</p>"]
    err = rep["error"].max() if "error" in rep else float("nan")
    parts += ["<h2>Representatives</h2>",
              f"<p>{len(rep)} ranks, {rep['group'].nunique()} communication group(s), "
              f"{len(summ)} cluster(s); largest clustering error (member total vs its "
              f"representative's) {err:.2%}.</p>", _table(summ), _img(dendrogram)]
    if partial:
        parts += _partial(partial)
    if nodes:
        parts += _nodes(nodes)
    platforms = [p["platform"] for p in preds]
    if calibrated and not any(p.get("source") == calibrated for p in platforms):
        from netsim.platform import load_platform
        platforms.append(load_platform(calibrated).describe())
    parts += ["<h2>Platform parameters</h2>", _table(parameters(platforms))]
    if trace_summary:
        with open(trace_summary) as f:
            parts += ["<details><summary>The trace in numbers (instrument show)</summary><pre>"
                      + html.escape(f.read()) + "</pre></details>"]
    page = ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>Prediction report</title>"
            "<style>body{font-family:sans-serif;max-width:1000px;margin:auto;padding:1em}"
            "table.t{border-collapse:collapse;font-size:13px}table.t td,table.t th"
            "{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}"
            "img{max-width:100%}.big{font-size:18px}"
            ".warn{background:#fde8e8;border-left:4px solid #c00;padding:6px}"
            ".note{background:#fff6e0;border-left:4px solid #d90;padding:6px}"
            "pre{background:#f6f6f6;padding:6px;"
            "font-size:12px;overflow:auto}</style></head><body>"
            + "\n".join(parts) + LAYOUT_CHECK + "</body></html>")
    from contracts.output import write_atomic

    def write(tmp):
        with open(tmp, "w") as f:
            f.write(page)
    write_atomic(out, write)
    return out
