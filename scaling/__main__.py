"""Command line of the scaling package (see ``python -m scaling -h``)."""
from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd

from . import data as D
from .models import MODELS


def _ints(s, what="--predict"):
    try:
        return [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise D.DataError(f"{what} {s!r}: comma-separated whole numbers expected") from None


def _level(s):
    """An interval's coverage: a fraction strictly between 0 and 1."""
    try:
        v = float(s)
    except ValueError:
        v = -1.0
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(f"{s!r}: a coverage between 0 and 1, e.g. 0.9")
    return v


def _unit(a, df) -> str:
    """--unit, else a single value of a ``unit`` column, else seconds."""
    if a.unit:
        return a.unit
    if "unit" in df and df["unit"].nunique() == 1:
        return str(df["unit"].iloc[0])
    return "s"


def _model_names(arg: str) -> list[str]:
    names = MODELS + ["auto"] if arg == "all" else arg.split(",")
    unknown = [n for n in names if n not in MODELS + ["auto"]]
    if unknown:
        raise D.DataError(f"unknown model(s) {unknown}: choose from auto, {', '.join(MODELS)} "
                          f"or all")
    return names


def _held_out(name, m, test) -> dict:
    """The model's formula and relative errors at the held-out runs."""
    row = {"model": name, "formula": m.describe()}
    if len(test):
        with np.errstate(all="ignore"):
            p = np.asarray(m.predict(test), float)
        truth = test["time"].to_numpy(float)
        err = np.where(np.isfinite(p) & (p > 0), np.abs(p - truth) / truth, np.inf)
        row.update(median_error=float(np.median(err)), max_error=float(err.max()))
    return row


def _print_predictions(m, res, at, train, level, spread, unit):
    """Each requested point with its interval, or a line saying why it has
    none; a note where it lies further out than the training runs span."""
    from .auto import interval_of
    cut = float(train["procs"].max())
    span = float(np.log2(cut / train["procs"].min()))
    distance = np.log2(at["procs"].to_numpy(float) / cut)
    with np.errstate(all="ignore"):
        mean = np.asarray(m.predict(at), float)
    lo, hi = interval_of(m, res, at, cut, level, spread)
    for q, t, lo_, hi_, d in zip(at["procs"], mean, lo, hi, distance):
        if not (np.isfinite(t) and t > 0):
            print(f"    procs {q:>7}: no usable prediction (the model gives {t:.4g})")
            continue
        band = (f"  [{lo_:.5g}, {hi_:.5g}] {level:.0%} interval"
                if np.isfinite(lo_) else "  (no interval: too few runs to cut; "
                "the automatic choice gives one)")
        far = (f"  (warning: {d:.1f} doublings out, the runs span {span:.1f}: "
               f"the answer rests on the model's assumptions)" if d > span + 1e-9 else "")
        print(f"    procs {q:>7}: {t:.5g} {unit}{band}{far}")


def cmd_fit(a) -> int:
    from .auto import fit_model, repeat_spread
    raw = D.load(a.data)
    if "program" in raw and raw["program"].nunique() > 1:
        if not a.program:
            raise D.DataError(f"{a.data}: several programs; choose one with --program")
        raw = raw[raw["program"] == a.program]
    if a.components:
        return _fit_components(a, raw)
    unit = _unit(a, raw)
    raw = raw.drop(columns="unit", errors="ignore")
    df = D.reduce(raw, a.reduce)
    train = D.select(df, a.train)
    test = D.select(df, a.test) if a.test else (df.drop(train.index) if a.train else df.iloc[:0])
    if train["procs"].nunique() < 2:
        raise D.DataError(f"{a.data}: the training runs have {train['procs'].nunique()} "
                          f"process count(s); every model needs at least 2")
    names = _model_names(a.model)
    params = D.parameters(df)
    sizes = int(train["size"].nunique()) if "size" in train else 1
    spread = repeat_spread(D.select(raw, a.train), ["procs"] + params)
    at = pd.DataFrame({"procs": _ints(a.predict)}) if a.predict else None
    if at is not None:
        for c in params:
            at[c] = a.size if c == "size" and a.size else train[c].iloc[-1]
    fitted, rows = {}, []
    for name in names:
        try:
            m, res = fit_model(name, train, params, sizes, spread)
        except (ValueError, KeyError, np.linalg.LinAlgError) as e:
            print(f"{name}: cannot fit: {e}", file=sys.stderr)
            continue
        fitted[name] = m
        rows.append(_held_out(name, m, test))
        print(f"{name:<11} {m.describe()}")
        if name == "auto" and len(m.ranking_):
            print("    rolling origin: mean |log(measured/predicted)| per distance out "
                  "(cuts):")
            for d, g in m.ranking_.groupby("distance"):
                print(f"      {d} doubling(s): " + ", ".join(
                    f"{x['model']} {x['error']:.3f} ({x['cuts']})" for _, x in g.iterrows()))
        if at is not None:
            _print_predictions(m, res, at, train, a.level, spread, unit)
    table = pd.DataFrame(rows)
    if len(test) and len(table):
        print(f"\nrelative error on {len(test)} held-out configuration(s):")
        print(table[["model", "median_error", "max_error"]].sort_values("median_error")
              .to_string(index=False, float_format=lambda v: f"{v:.2%}"))
    if a.output:
        table.to_csv(a.output, index=False)
    if a.plot:
        from .plot import fits_png
        fits_png(a.plot, train, test, fitted, _ints(a.predict) if a.predict else [], unit)
    return 0 if fitted else 2


def _fit_components(a, raw) -> int:
    """Extrapolate each component (e.g. computation, communication) on its own
    with the automatic choice, and their sum."""
    from .auto import Auto
    cols = a.components.split(",")
    missing = [c for c in cols if c not in raw]
    if missing:
        raise D.DataError(f"{a.data}: no column(s) {missing} for --components")
    unit = _unit(a, raw)
    if not a.predict:
        raise D.DataError("--components needs --predict")
    at = pd.DataFrame({"procs": _ints(a.predict)})
    total = lo_sum = hi_sum = np.zeros(len(at))
    for c in cols:
        part = raw[["procs", c]].rename(columns={c: "time"})
        bad = part["time"] <= 0
        if bad.any():
            raise D.DataError(f"{a.data}: row {part.index[bad][0]}: {c} must be positive")
        train = D.select(D.reduce(part, "min"), a.train)
        m = Auto().fit(train)
        print(f"{c:<14} {m.describe()}")
        _print_predictions(m, m.residuals_, at, train, a.level, m.spread, unit)
        lo, hi = m.interval(at, a.level)
        total, lo_sum, hi_sum = total + m.predict(at), lo_sum + lo, hi_sum + hi
    print("sum (intervals added: at least the level's coverage)")
    for q, t, l_, h_ in zip(at["procs"], total, lo_sum, hi_sum):
        print(f"    procs {q:>7}: {t:.5g} {unit}  [{l_:.5g}, {h_:.5g}]")
    return 0


def cmd_metric(a) -> int:
    from .metric import TUPLE, efficiency, metric, surface_png
    df = D.load(a.data)
    if "size" not in df:
        raise D.DataError(f"{a.data}: the metric needs a 'size' column (problem size per "
                          f"run)")
    if "efficiency" not in df:
        df = efficiency(D.reduce(df, "min"), a.scaling)
        print(f"efficiency from the times: {a.scaling} scaling, against the fewest processes "
              f"of each size")
    df = D.reduce(df, "maxeff")
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
        for size in _ints(a.sizes, "--sizes"):
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
    elif a.evaluator.startswith("workflow:"):
        if not a.configfile:
            raise D.DataError("the workflow evaluator needs --configfile (the workflow's "
                              "config of the application)")
        ev = G.workflow_evaluator(a.configfile, a.evaluator.partition(":")[2], a.workdir,
                                  a.cores)
    else:
        raise D.DataError(f"unknown evaluator {a.evaluator!r}: jacobi[:k=v,...], "
                          f"workflow:PLATFORM or cmd:TEMPLATE")
    for dims in _ints(a.dims, "--dims"):
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
            print(f"  exhaustive optimum {'x'.join(map(str, S.exhaustive_best or ()))}: "
                  f"{S.exhaustive_time:.5g} s ({S.evaluated_exhaustive} predictions); "
                  f"heuristic 2 loses {S.best_time / S.exhaustive_time - 1:.1%}")
    return 0


def cmd_study(a) -> int:
    from .study import study
    paths = study(a.predictions, a.validate, a.output, _ints(a.predict or ""), a.level,
                  a.scaling)
    for k, p in paths.items():
        print(f"{k:<14} {p}")
    return 0


class _Defaults(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default only where it has one."""

    def _get_help_string(self, action):
        return action.help if action.default is None else super()._get_help_string(action)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scaling",
                                 description="Empirical scalability models and searches.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser(
        "fit", help="fit a model to small runs and extrapolate, with an interval",
        description="Fit execution-time models to measured runs and extrapolate.  The "
        "default model, auto, answers with 'shrunk', a quadratic in log-log whose "
        "curvature has a narrow prior around zero (it bends only as far as the "
        "data demand), with its posterior predictive interval, which widens with "
        "the distance out; at a distance where rolling origin (fit the smaller "
        "runs, predict the larger ones) judged another candidate on two cuts or "
        "more and it missed by at most half as much, that candidate answers.  "
        "Models without an interval of their own get a split-conformal one from "
        "their rolling-origin errors.  Intervals are never narrower than the "
        "repeats' spread.  Models that do not model 'size' are fitted once per size.",
        formatter_class=_Defaults)
    f.add_argument("data", help="CSV/Parquet: procs, time[, size, ..., unit]")
    f.add_argument("--model", default="auto",
                   help=f"auto, one of {MODELS}, a comma list, or all")
    f.add_argument("--train", help="pandas query of the training rows, e.g. 'procs<=128'")
    f.add_argument("--test", help="held-out rows (default: the rows not in --train)")
    f.add_argument("--predict", help="comma-separated process counts to predict")
    f.add_argument("--size", type=float, help="problem size for the predictions")
    f.add_argument("--reduce", choices=["min", "maxeff"], default="min",
                   help="repeats: minimum time (fit) or maximum efficiency (metric)")
    f.add_argument("--program", help="which program, when the table has several")
    f.add_argument("--level", type=_level, default=0.9, help="the intervals' coverage")
    f.add_argument("--unit", help="the time column's unit (default: a 'unit' column, or s)")
    f.add_argument("--components", help="comma list of columns (e.g. comp,comm) to "
                   "extrapolate one by one and add up, instead of 'time'")
    f.add_argument("--plot", help="PNG: curves, training and held-out points")
    f.add_argument("-o", "--output", help="CSV: per-model formula and errors")
    m = sub.add_parser(
        "metric", help="the scalability metric per program",
        description="The scalability metric of each program over its (procs, size) "
        "region.  Printed tuple: min_procs, min_size, max_procs, max_size (the "
        "region); MarkProcs, MarkData, MarkAll (mean change of efficiency along the "
        "processes, along the size, and both, each element weighted by its share "
        "of the region: negative when efficiency falls); max_E, min_E.  Efficiency "
        "is taken from an 'efficiency' column, else computed from the times: strong "
        "scaling E = T(p0) p0 / (T(p) p), weak scaling E = T(p0) / T(p), p0 the "
        "fewest processes measured for that size.")
    m.add_argument("data", help="procs, size, efficiency (or time), [program]")
    m.add_argument("--scaling", choices=["strong", "weak"], default="strong",
                   help="how to compute efficiency from times (default strong)")
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
                   help="jacobi[:t_elem=..,latency=..,byte_time=..] (the source's model), "
                        "workflow:PLATFORM (the whole method per grid; the application "
                        "takes --grid AxB) or cmd:TEMPLATE ({grid}, {procs}, {g0}.. "
                        "replaced; prints seconds)")
    g.add_argument("--exhaustive", action="store_true", help="also predict every grid")
    g.add_argument("--configfile", help="workflow evaluator: the application's config")
    g.add_argument("--workdir", default="grid_search",
                   help="workflow evaluator: where each grid's results go")
    g.add_argument("--cores", type=int, default=2, help="workflow evaluator: snakemake -c")
    st = sub.add_parser("study", help="a scalability study from predictions at several N",
                        description="Times per platform and N from the workflow's "
                        "predictions (and validate's measurements), the automatic model "
                        "extrapolated to --predict with its interval, the scalability "
                        "metric per platform, and a plot (scaling/study.py).")
    st.add_argument("--predictions", nargs="+", required=True, help="prediction JSON files")
    st.add_argument("--validate", nargs="*", default=[], help="validate JSON files")
    st.add_argument("--predict", help="comma-separated N to extrapolate to")
    st.add_argument("--level", type=_level, default=0.9, help="interval coverage (0.9)")
    st.add_argument("--scaling", choices=["strong", "weak"], default="strong",
                    help="efficiency for the metric (default strong)")
    st.add_argument("-o", "--output", required=True, help="directory for the study's files")
    a = ap.parse_args(argv)
    try:
        return {"fit": cmd_fit, "metric": cmd_metric, "hetero": cmd_hetero,
                "grids": cmd_grids, "study": cmd_study}[a.cmd](a)
    except (D.DataError, ValueError, OSError) as e:
        print(f"scaling {a.cmd}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
