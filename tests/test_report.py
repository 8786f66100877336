"""The report as a reader sees it: rendered by headless Chromium at 8 and
256 ranks, screenshots kept beside the test's files.

Skipped where no Chromium is installed (`.ci/run` installs Debian's under
CI).  The predictions come from real simulator runs of GOAL schedules with
uneven computation, so that the figures have something to show.
"""
import json
import re
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT, run

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or \
    shutil.which("google-chrome")


def _goal(path, n: int) -> None:
    """A ring of n ranks, three iterations; odd ranks compute twice as long."""
    lines = [f"num_ranks {n}"]
    for r in range(n):
        work = 1_000_000 * (2 if r % 2 else 1) + 2_000 * r
        lines.append(f"rank {r} {{")
        prev = None
        for it in range(3):
            c, s, v = f"c{it}", f"s{it}", f"r{it}"
            lines += [f"{c}: calc {work}", f"{s}: send 65536b to {(r + 1) % n} tag {it}",
                      f"{v}: recv 65536b from {(r - 1) % n} tag {it}",
                      f"{s} requires {c}", f"{v} requires {c}"]
            if prev:
                lines.append(f"{c} requires {prev}")
            prev = v
        lines.append("}")
    path.write_text("\n".join(lines) + "\n")


def _report(tmp_path, n: int, warnings=None):
    """The report of two platforms' predictions; ``warnings``: platform ->
    warnings added to its prediction file, as netsim writes them."""
    d = tmp_path / f"n{n}"
    d.mkdir()
    _goal(d / "s.goal", n)
    preds, tls = [], []
    for plat in ("ib-cluster", "fat-node"):
        preds.append(d / f"{plat}.json")
        tls.append(d / f"{plat}_timeline.json")
        run([sys.executable, "-m", "netsim", str(d / "s.goal"), "--goal-in", "--platform",
             f"config/platforms/{plat}.yaml", "-o", str(preds[-1]), "--timeline",
             str(tls[-1])])
        if warnings and plat in warnings:
            pred = json.loads(preds[-1].read_text())
            pred["warnings"] += warnings[plat]
            preds[-1].write_text(json.dumps(pred))
    reps = pd.DataFrame({"rank": range(n), "group": 0, "cluster": np.arange(n) % 2,
                         "representative": np.arange(n) % 2, "total": 1.0,
                         "rep_total": 1.0, "error": 0.0})
    reps.to_csv(d / "reps.csv", index=False)
    pd.DataFrame({"cluster": [0, 1], "group": 0, "size": n // 2, "representative": [0, 1],
                  "mean_total": 1.0, "spread": 0.0, "max_error": 0.0}).to_csv(
        d / "summary.csv", index=False)
    shutil.copyfile(ROOT / "examples" / "uneven.py", d / "trace.txt")
    from report.figures import _plt
    plt = _plt()
    fig = plt.figure(figsize=(2, 1))
    fig.savefig(d / "dendrogram.png")
    plt.close(fig)
    out = d / "report.html"
    run([sys.executable, "-m", "report", "--predictions", *map(str, preds), "--timelines",
         *map(str, tls), "--reps", str(d / "reps.csv"), "--summary", str(d / "summary.csv"),
         "--dendrogram", str(d / "dendrogram.png"), "--trace-summary", str(d / "trace.txt"),
         "-o", str(out)])
    return out


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium to render the report with")
@pytest.mark.parametrize("n", [8, 256])
def test_the_report_renders_as_a_reader_sees_it(tmp_path, n):
    out = _report(tmp_path, n)
    html = out.read_text()
    # a table of parameters, not raw dumps of the platforms
    assert "Platform parameters" in html and '"levels"' not in html and "<pre>{" not in html
    # the per-rank table names the slowest ranks, not every rank
    slowest = html.split("slowest of")[1].split("</table>")[0]
    assert slowest.count("<tr>") == min(10, n)            # body rows (the header row is styled)
    browser = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
               "--hide-scrollbars", "--window-size=1100,2600"]
    dom = subprocess.run(browser + ["--virtual-time-budget=5000", "--dump-dom",
                                    out.as_uri()], capture_output=True, text=True,
                         timeout=120).stdout
    body = re.search(r"<body[^>]*>", dom).group(0)
    assert 'data-images="ok"' in body, body        # every figure decoded
    assert 'data-overflow="no"' in body, body      # nothing wider than the window
    shot = out.with_suffix(".png")
    subprocess.run(browser + [f"--screenshot={shot}", out.as_uri()], capture_output=True,
                   timeout=120)
    from matplotlib.image import imread
    img = imread(shot)
    assert img.shape[0] >= 2000 and img.shape[1] >= 1000
    assert img[..., :3].std() > 0.05                # not a blank page


def test_rank_axes_aggregate_beyond_64_ranks():
    from report.figures import MAX_BARS, rank_bins
    assert rank_bins(8) == [(r, r + 1) for r in range(8)]
    for n in (65, 256, 10_000):
        bins = rank_bins(n)
        assert len(bins) == MAX_BARS and bins[0][0] == 0 and bins[-1][1] == n
        assert all(a < b for a, b in bins) and all(b == c for (_, b), (c, _) in
                                                   zip(bins, bins[1:]))


def test_each_warning_is_said_once_with_the_platforms_it_concerns(tmp_path):
    shared, own = "the band is 11 % of the prediction wide", "a trace warning"
    html = _report(tmp_path, 8, {"ib-cluster": [shared], "fat-node": [shared, own]}
                   ).read_text()
    assert html.count(shared) == 1 and html.count(own) == 1
    assert f"<b>Warning</b> (every platform): {shared}" in html
    assert f"<b>Warning</b> (fat-node): {own}" in html


def test_times_are_written_in_engineering_units_in_the_report(tmp_path):
    html = _report(tmp_path, 8).read_text()
    tables = "".join(re.findall(r"<table.*?</table>", html, re.S))
    # no exponent notation and no long raw fractions in any table cell
    cells = re.findall(r"<td>([^<]*)</td>", tables)
    assert cells and not [c for c in cells if re.fullmatch(r"-?[\d.]+e[-+]\d+", c)]
    assert not [c for c in cells if re.fullmatch(r"-?0\.\d{4,}", c)]
    # the per-rank times carry their unit
    slowest = html.split("slowest of")[1].split("</table>")[0]
    assert re.search(r"<td>\d[\d.]* (ns|us|ms|s)</td>", slowest)


@pytest.mark.parametrize("value, text", [
    (6.904e-05, "69.0 us"), (0.01402, "14.0 ms"), (2.4519, "2.45 s"), (123.4, "123 s"),
    (0.0009996, "1.00 ms"), (3e-10, "0.300 ns"), (-0.0021, "-2.10 ms"), (0.0, "0 s"),
    (1234.5, "20.6 min"), (100000.0, "27.8 h"), (None, "-"), (float("nan"), "-")])
def test_seconds_in_engineering_units(value, text):
    from contracts.units import seconds
    assert seconds(value) == text


def test_platforms_differing_only_in_topology_are_ranked_with_their_busiest_links(tmp_path):
    """An all-to-all of 32 ranks, one per node, on a full and on a 4:1
    tapered fat tree: the report ranks the full tree first and shows the
    tapered tree's up links as its most loaded."""
    import yaml
    n = 32
    lines = [f"num_ranks {n}"]
    for r in range(n):
        lines.append(f"rank {r} {{")
        for k in range(1, n):
            lines += [f"s{k}: send 1048576b to {(r + k) % n} tag 0",
                      f"v{k}: recv 1048576b from {(r - k) % n} tag 0"]
        lines.append("}")
    (tmp_path / "a2a.goal").write_text("\n".join(lines) + "\n")
    base = yaml.safe_load((ROOT / "config/platforms/ib-cluster.yaml").read_text())
    base["cores_per_node"] = 1
    base["network"]["levels"] = base["network"]["levels"][-1:]
    preds = []
    for name, up in (("tapered", 2), ("full", 8)):
        plat = dict(base, name=name)
        plat["network"] = dict(base["network"], topology={"kind": "fat_tree", "leaf_nodes": 8,
                                                          "up_links": up})
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(plat))
        preds.append(tmp_path / f"{name}.json")
        out = run([sys.executable, "-m", "netsim", str(tmp_path / "a2a.goal"), "--goal-in",
                   "--platform", str(tmp_path / f"{name}.yaml"), "-o", str(preds[-1])])
        assert "busiest link: " in out.stdout
    tapered, full = (json.loads(p.read_text()) for p in preds)
    assert tapered["predicted_time"] > 2 * full["predicted_time"]
    assert tapered["links"][0]["link"].startswith(("leaf", "spine"))
    assert tapered["links"][0]["load"] > full["links"][0]["load"]
    pd.DataFrame({"rank": range(n), "group": 0, "cluster": 0, "representative": 0,
                  "total": 1.0, "rep_total": 1.0, "error": 0.0}).to_csv(tmp_path / "reps.csv",
                                                                           index=False)
    pd.DataFrame({"cluster": [0], "group": 0, "size": n, "representative": [0],
                  "mean_total": 1.0, "spread": 0.0, "max_error": 0.0}).to_csv(
        tmp_path / "summary.csv", index=False)
    from report.figures import _plt
    plt = _plt()
    fig = plt.figure(figsize=(2, 1))
    fig.savefig(tmp_path / "dendrogram.png")
    plt.close(fig)
    run([sys.executable, "-m", "report", "--predictions", *map(str, preds), "--reps",
         str(tmp_path / "reps.csv"), "--summary", str(tmp_path / "summary.csv"),
         "--dendrogram", str(tmp_path / "dendrogram.png"), "-o", str(tmp_path / "r.html")])
    page = (tmp_path / "r.html").read_text()
    ranking = page.split("what-if sweep")[1].split("</table>")[0]
    assert ranking.index(">full<") < ranking.index(">tapered<")
    loaded = page.split("Most loaded links")[1].split("</table>")[0]
    assert loaded.count(">tapered<") == 5 and tapered["links"][0]["link"] in loaded
