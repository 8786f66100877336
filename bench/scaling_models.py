"""Held-out accuracy and interval coverage of the scaling models on real,
published measurements (bench/scaling_data/, sources in its SOURCES.md).

    python bench/scaling_models.py [--extrap-venv DIR | --extrap X/bin/python] [-o DIR]

Every series is cut the same way for every method: fit on the runs with at
most half the largest process count, predict the largest one (every size of
it, for two-parameter data).  Repeats are reduced to their minimum for our
models; Extra-P gets them all (it models their mean).  Per family: the
median and the mean relative error at the held-out points of every model,
of the automatic choice and of Extra-P, how often each model's
conformal 90 % interval covered the measurement, and which single model
did best on the other families with each one left out (the automatic
choice's prior is meant to be that one).  ``--extrap-venv DIR``
installs Extra-P 4.2.5 from the package index into its own environment
DIR (once; it pins numpy < 2); without it or ``--extrap`` Extra-P's
column is left out.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scaling import data as D  # noqa: E402
from scaling.auto import fit_model, interval  # noqa: E402
from scaling.models import MODELS  # noqa: E402

FAMILIES = {"archer": "CASTEP, GROMACS and CP2K on ARCHER, repeated runs",
            "wavetrisk": "climate dynamical core, strong scaling, 3 machines",
            "mpi_collectives": "collective latency, 2 MPI libraries",
            "relearn": "neuroscience code, regions over (procs, size)",
            "machines": "GROMACS and CASTEP on 21 other machines",
            "opensbli": "OpenSBLI's Taylor-Green vortex, two grids, 12 machines"}


def split(df):
    top = df["procs"].max()
    return df[df["procs"] <= top / 2], df[df["procs"] == top]


def evaluate_series(raw: pd.DataFrame, level: float) -> list[dict]:
    df = D.reduce(raw.drop(columns="series"), "min")
    train, test = split(df)
    if train["procs"].nunique() < 3 or test.empty:
        return []
    params = [c for c in D.parameters(df)]
    sizes = int(df["size"].nunique()) if "size" in df else 1
    spread = 0.0
    truth = test["time"].to_numpy(float)
    rows = []
    dist = np.log2(test["procs"].to_numpy(float) / train["procs"].max())
    for name in MODELS + ["auto"]:
        try:
            m, res = fit_model(name, train, params, sizes, spread)
            with np.errstate(all="ignore"):
                pred = np.asarray(m.predict(test), float)
            lo, hi = interval(pred, dist, res, level, spread)
            chose = m.name if name == "auto" else ""
        except (ValueError, np.linalg.LinAlgError):
            pred = lo = hi = np.full(len(test), np.nan)
            chose = ""
        with np.errstate(invalid="ignore"):
            err = np.where(np.isfinite(pred) & (pred > 0), np.abs(pred - truth) / truth, np.inf)
        for k in range(len(test)):
            rows.append({"model": name, "error": err[k], "covered": lo[k] <= truth[k] <= hi[k],
                         "has_interval": bool(np.isfinite(lo[k])), "chose": chose})
    return rows


def extrap_entries(raw: pd.DataFrame):
    df = raw.drop(columns="series")
    params = ["procs"] + (["size"] if "size" in df else [])
    top = df["procs"].max()
    train = df[df["procs"] <= top / 2]
    test = D.reduce(df[df["procs"] == top], "min")
    return ({"params": params, "train": train[params + ["time"]].to_numpy(float).tolist(),
             "test": test[params].to_numpy(float).tolist()}, test["time"].to_numpy(float))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--extrap", help="python of an environment with extrap installed")
    ap.add_argument("--extrap-venv", help="create (once) an environment with Extra-P 4.2.5 "
                    "here and use it")
    ap.add_argument("--level", type=float, default=0.9, help="interval level (default 0.9)")
    ap.add_argument("-o", "--out", default="bench/out/scaling_models",
                    help="directory for the per-series table")
    a = ap.parse_args(argv)
    if a.extrap_venv:
        a.extrap = str(Path(a.extrap_venv) / "bin" / "python")
        if not Path(a.extrap).exists():
            print(f"installing Extra-P into {a.extrap_venv} ...", file=sys.stderr)
            subprocess.run([sys.executable, "-m", "venv", a.extrap_venv], check=True)
            subprocess.run([a.extrap, "-m", "pip", "install", "-q", "extrap==4.2.5"],
                           check=True)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    rows, entries, truths = [], [], []
    for fam in FAMILIES:
        data = pd.read_csv(ROOT / "bench/scaling_data" / f"{fam}.csv")
        for series, raw in data.groupby("series"):
            if (raw["time"] <= 0).any():
                print(f"{fam}: {series}: left out (a time <= 0)", file=sys.stderr)
                continue
            r = evaluate_series(raw, a.level)
            if not r:
                continue
            for x in r:
                x.update(family=fam, series=series)
            rows += r
            e, t = extrap_entries(raw)
            entries.append((fam, series, e))
            truths.append(t)
        print(f"{fam}: {data['series'].nunique()} series", file=sys.stderr)
    if a.extrap:
        with tempfile.TemporaryDirectory() as tmp:
            fin, fout = Path(tmp, "in.json"), Path(tmp, "out.json")
            fin.write_text(json.dumps([e for *_, e in entries]))
            subprocess.run([a.extrap, str(ROOT / "bench/extrap_predict.py"), str(fin),
                            str(fout)], check=True)
            answers = json.loads(fout.read_text())
        for (fam, series, _), ans, truth in zip(entries, answers, truths):
            pred = np.full(len(truth), np.nan) if ans["pred"] is None else np.asarray(ans["pred"])
            with np.errstate(invalid="ignore"):
                err = np.where(np.isfinite(pred) & (pred > 0), np.abs(pred - truth) / truth,
                               np.inf)
            rows += [{"model": "extra-p", "error": x, "covered": False, "has_interval": False,
                      "family": fam, "series": series, "chose": ""} for x in err]
    t = pd.DataFrame(rows)
    t.to_csv(Path(a.out) / "per_series.csv", index=False)
    summary = []
    pooled = t.assign(family="all")
    for (fam, model), g in pd.concat([t, pooled]).groupby(["family", "model"], sort=False):
        summary.append({"family": fam, "model": model, "points": len(g),
                        "median error": g["error"].median(),
                        "mean error": g["error"].replace(np.inf, np.nan).mean(),
                        "failed": int((~np.isfinite(g["error"])).sum()),
                        "coverage": g.loc[g["has_interval"], "covered"].mean()
                        if g["has_interval"].any() else np.nan})
    s = pd.DataFrame(summary)
    s.to_csv(Path(a.out) / "summary.csv", index=False)
    for fam, g in s.groupby("family", sort=False):
        print(f"\n## {fam}: {FAMILIES.get(fam, 'every family pooled')}")
        print(g.drop(columns="family").to_markdown(index=False, floatfmt=".3f"))
    chosen = t[t["model"] == "auto"].groupby(["family", "chose"]).size()
    print("\nmodels the automatic choice took (points):")
    print(chosen.to_string())
    print("\nthe prior, family by family left out:")
    print(prior_check(t).to_markdown(index=False, floatfmt=".3f"))
    return 0


def prior_check(t: pd.DataFrame) -> pd.DataFrame:
    """For each family left out, the single model that did best on the
    others: by the geometric mean of their median errors (every family
    weighted alike) and by the median of their points pooled (the largest
    families dominate)."""
    single = t[t["model"].isin(MODELS)]
    medians = single.groupby(["model", "family"])["error"].median().unstack()
    rows = []
    for fam in medians.columns:
        others = medians.drop(columns=fam)
        geo = np.exp(np.log(others).mean(axis=1)).sort_values()
        pooled = single[single["family"] != fam].groupby("model")["error"].median()
        pooled = pooled.sort_values()
        rows.append({"left out": fam, "best, families alike": geo.index[0],
                     "error": geo.iloc[0], "best, points pooled": pooled.index[0],
                     "pooled error": pooled.iloc[0]})
    return pd.DataFrame(rows)


if __name__ == "__main__":
    sys.exit(main())
