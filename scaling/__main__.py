"""Command line of the scaling package (see ``python -m scaling -h``)."""
from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd

from . import data as D
from .models import MODELS, make


def _ints(s):
    return [int(x) for x in s.split(",") if x.strip()]


def cmd_fit(a) -> int:
    df = D.reduce(D.load(a.data), a.reduce)
    if "program" in df and df["program"].nunique() > 1:
        if not a.program:
            raise D.DataError(f"{a.data}: several programs; choose one with --program")
        df = df[df["program"] == a.program]
    train = D.select(df, a.train)
    test = D.select(df, a.test) if a.test else (df.drop(train.index) if a.train else df.iloc[:0])
    if len(train) < 3:
        raise D.DataError(f"{len(train)} training configuration(s): need at least 3")
    names = MODELS if a.model == "all" else a.model.split(",")
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise D.DataError(f"unknown model(s) {unknown}: choose from {list(MODELS)} or all")
    params = D.parameters(df)
    fitted, rows = {}, []
    at = pd.DataFrame({"procs": _ints(a.predict)}) if a.predict else None
    for name in names:
        try:
            m = make(name, params).fit(train)
        except (ValueError, KeyError, np.linalg.LinAlgError) as e:
            print(f"{name}: cannot fit: {e}", file=sys.stderr)
            continue
        fitted[name] = m
        row = {"model": name, "formula": m.describe()}
        if len(test):
            err = np.abs(m.predict(test) - test["time"].to_numpy()) / test["time"].to_numpy()
            row.update(median_error=float(np.median(err)), max_error=float(err.max()))
        rows.append(row)
        print(f"{name:<11} {m.describe()}")
        if at is not None:
            for c in params:
                at[c] = a.size if c == "size" and a.size else train[c].iloc[-1]
            mean, std = m.predict(at), m.predict_std(at)
            for q, t, s in zip(at["procs"], mean, std):
                print(f"    procs {q:>7}: {t:.5g} s" + (f" +- {s:.2g}" if np.isfinite(s) else ""))
    table = pd.DataFrame(rows)
    if len(test):
        print(f"\nrelative error on {len(test)} held-out configuration(s):")
        print(table[["model", "median_error", "max_error"]].sort_values("median_error")
              .to_string(index=False, float_format=lambda v: f"{v:.2%}"))
    if a.output:
        table.to_csv(a.output, index=False)
    if a.plot:
        from .plot import fits_png
        fits_png(a.plot, train, test, fitted, _ints(a.predict) if a.predict else [])
    return 0


def cmd_metric(a) -> int:
    from .metric import TUPLE, metric, surface_png
    df = D.load(a.data)
    if "size" not in df:
        raise D.DataError(f"{a.data}: the metric needs a 'size' column (problem size per "
                          f"run)")
    if "efficiency" not in df:
        # strong scaling per size: E = T(p0) p0 / (T(p) p) against the smallest p
        df = D.reduce(df, "min")
        base = df.loc[df.groupby([c for c in ["program", "size"] if c in df])["procs"]
                      .idxmin()].set_index([c for c in ["program", "size"] if c in df])
        key = [c for c in ["program", "size"] if c in df]
        ref = df.join(base[["procs", "time"]].rename(columns={"procs": "p0", "time": "t0"}),
                      on=key)
        df["efficiency"] = ref["t0"] * ref["p0"] / (df["time"] * df["procs"])
    df = D.reduce(df, "maxeff")
    if "size" not in df:
        raise D.DataError(f"{a.data}: the metric needs a 'size' column")
    progs = df["program"].unique() if "program" in df else ["program"]
    rows = []
    for p in progs:
        sub = df[df["program"] == p] if "program" in df else df
        rows.append(dict(program=p, **metric(sub)))
        if a.plots:
            import os
            os.makedirs(a.plots, exist_ok=True)
            surface_png(os.path.join(a.plots, f"{p}_efficiency.png"), sub, f"{p}: efficiency")
    t = pd.DataFrame(rows)[["program"] + TUPLE]
    print(t.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    for mark in ("MarkProcs", "MarkData", "MarkAll"):
        print(f"\nby {mark} (best first):")
        print(t.sort_values(mark, ascending=False)[["program", mark]]
              .to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if a.output:
        t.to_csv(a.output, index=False)
    return 0


def cmd_hetero(a) -> int:
    from . import hetero as H
    df = pd.read_csv(a.data)
    need = {"cluster", "m", "size", "procs", "time"} - set(df.columns)
    if need:
        raise D.DataError(f"{a.data}: missing column(s) {sorted(need)}")
    allowed = H.parse_allowed(a.allowed)
    measured = pd.read_csv(a.measured) if a.measured else None
    print(f"{'N':>8}  {'model':<7}{'chosen configuration':<40}{'predicted s':>12}"
          f"{'measured s':>12}")
    for nonneg, name in ((True, "NNLS"), (False, "LS")):
        models = H.fit_models(df, nonneg)
        for size in _ints(a.sizes):
            cfg, t, n = H.optimum(models, allowed, size)
            meas = ""
            if measured is not None:
                row = measured[(measured["size"] == size) & (measured["config"] == H.label(cfg))]
                meas = f"{row['time'].min():.4g}" if len(row) else "-"
            print(f"{size:>8}  {name:<7}{H.label(cfg):<40}{t:>12.4g}{meas:>12}")
    print(f"({n} configurations evaluated per N)")
    if measured is not None:
        print("measured optimum per N:")
        for size, g in measured.groupby("size"):
            b = g.loc[g["time"].idxmin()]
            print(f"{size:>8}  {b['config']:<47}{b['time']:>12.4g}")
    return 0


def cmd_grids(a) -> int:
    from . import grids as G
    shapes = [tuple(int(x) for x in s.split("x")) for s in a.shape]
    if a.evaluator.startswith("jacobi"):
        kw = dict(kv.split("=") for kv in a.evaluator.partition(":")[2].split(",") if kv)
        ev = G.jacobi_evaluator(shapes[0], **{k: float(v) for k, v in kw.items()})
    elif a.evaluator.startswith("cmd:"):
        ev = G.command_evaluator(a.evaluator[4:])
    else:
        raise D.DataError(f"unknown evaluator {a.evaluator!r}: jacobi[:k=v,...] or cmd:TEMPLATE")
    for dims in _ints(a.dims):
        if any(len(s) < dims for s in shapes):
            raise D.DataError(f"a {dims}-D grid needs arrays of at least {dims} dimensions")
        S = G.search(shapes, dims, a.max_procs, ev, a.min_efficiency, a.exhaustive)
        print(f"{dims}-D grids, at most {a.max_procs} processors:")
        print(f"  candidates                       {S.candidates}")
        print(f"  after heuristic 1 (no idle proc) {S.after_h1}")
        print(f"  predicted under heuristic 2      {S.evaluated_h2}"
              f"  ({1 - S.evaluated_h2 / S.candidates:.0%} fewer predictions than all)")
        print(f"  chosen grid {'x'.join(map(str, S.best)) if S.best else '-'}: "
              f"{S.best_time:.5g} s")
        if a.exhaustive:
            print(f"  exhaustive optimum {'x'.join(map(str, S.exhaustive_best))}: "
                  f"{S.exhaustive_time:.5g} s ({S.evaluated_exhaustive} predictions)")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scaling",
                                 description="Empirical scalability models and searches.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fit", help="fit a model to small runs and extrapolate "
                                   "(3-term, log-linear, NP-T, PMNF)")
    f.add_argument("data", help="CSV/Parquet: procs, time[, size, ...]")
    f.add_argument("--model", default="abc", help=f"one of {MODELS}, a comma list, or all")
    f.add_argument("--train", help="pandas query of the training rows, e.g. 'procs<=128'")
    f.add_argument("--test", help="held-out rows (default: the rows not in --train)")
    f.add_argument("--predict", help="comma-separated process counts to predict")
    f.add_argument("--size", type=float, help="problem size for the predictions")
    f.add_argument("--reduce", choices=["min", "maxeff"], default="min",
                   help="repeats: minimum time (fit) or maximum efficiency (metric)")
    f.add_argument("--program", help="which program, when the table has several")
    f.add_argument("--plot", help="PNG: curves, training and held-out points")
    f.add_argument("-o", "--output", help="CSV: per-model formula and errors")
    m = sub.add_parser("metric", help="the scalability metric per program")
    m.add_argument("data", help="procs, size, efficiency (or time), [program]")
    m.add_argument("--plots", help="directory for 3-D efficiency surfaces")
    m.add_argument("-o", "--output", help="CSV: the metric's tuple per program")
    h = sub.add_parser("hetero", help="optimal heterogeneous configuration (NP-T)")
    h.add_argument("data", help="cluster, m, size, procs, time (per sub-cluster runs)")
    h.add_argument("--allowed", nargs="+", required=True, help="NAME:P=LO-HI:M=1,2 ...")
    h.add_argument("--sizes", required=True, help="problem sizes N")
    h.add_argument("--measured", help="CSV: size, config (as printed), time")
    g = sub.add_parser("grids", help="optimal processor grid with the two heuristics")
    g.add_argument("--shape", nargs="+", required=True, help="array shapes, e.g. 10000x10000")
    g.add_argument("--dims", default="1,2", help="grid dimensionalities to search")
    g.add_argument("--max-procs", type=int, required=True,
                   help="the largest processor count to consider")
    g.add_argument("--min-efficiency", type=float, default=0.0,
                   help="lower bound on parallel efficiency (default 0: none)")
    g.add_argument("--evaluator", default="jacobi",
                   help="jacobi[:t_elem=..,latency=..,byte_time=..] or cmd:TEMPLATE "
                        "({grid}, {procs}, {g0}.. replaced; prints seconds)")
    g.add_argument("--exhaustive", action="store_true", help="also predict every grid")
    a = ap.parse_args(argv)
    try:
        return {"fit": cmd_fit, "metric": cmd_metric, "hetero": cmd_hetero,
                "grids": cmd_grids}[a.cmd](a)
    except (D.DataError, ValueError) as e:
        print(f"scaling {a.cmd}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
