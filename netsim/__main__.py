"""python -m netsim TRACE_DIR --platform P.yaml -o PREDICTION.json: predict the run time."""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from contracts.prediction import prediction_json, write_prediction
from contracts.units import seconds

from .platform import PlatformError, from_dict, load_platform
from .schedule import Schedule, ScheduleError
from .variability import SAMPLES, SEED

if TYPE_CHECKING:       # the pools module (pandas) is imported where a trace is read
    from .pools import Pool


def _loggops(spec: str):
    """A one-level platform from 'L,o,g,G,O,S' (seconds, bytes)."""
    try:
        L, o, g, G, O, S = (float(x) for x in spec.split(","))
    except ValueError:
        raise PlatformError(f"--loggops wants L,o,g,G,O,S (6 numbers), not {spec!r}") from None
    for name, v in zip("LogGOS", (L, o, g, G, O, S)):
        if not 0 <= v < float("inf"):
            raise PlatformError(f"--loggops: {name} must be a finite number >= 0, not {v}")
    return {"name": "loggops", "nodes": 1 << 30, "cores_per_node": 1,
            "network": {"levels": [{"name": "net", "latency": L, "byte_time": G}],
                        "overhead": {"send": o, "recv": o},
                        "overhead_byte": {"send": O, "recv": O},
                        "gap": g, "eager_limit": int(S), "semantics": "loggopsim"},
            "collectives": {"default": "binomial"}}


def _load_compute(path: str, events):
    """Per-event computation seconds from replay.expand's table: comp, low,
    high, inside, mean and representative in the events' order."""
    from contracts.compute import ComputeError, read_compute
    try:
        return read_compute(path, events, band=True)
    except ComputeError as e:
        raise ScheduleError(str(e)) from None


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m netsim",
        description="Simulate a traced MPI run on a target platform (LogGOPS with "
                    "network levels, rendezvous, NIC contention, collective algorithms).")
    ap.add_argument("trace", help="trace directory, or a GOAL file with --goal-in")
    ap.add_argument("--platform", help="platform YAML (config/platforms/; every key: "
                                       "netsim/platform.schema.yaml)")
    ap.add_argument("--loggops", metavar="L,o,g,G,O,S",
                    help="instead of --platform: LogGOPSim's model and rules with these "
                         "parameters (seconds, seconds/byte, eager limit S in bytes)")
    ap.add_argument("--compute", help="CSV/Parquet with rank, seq, comp (seconds): target "
                                      "computation times (from replay.expand); default: "
                                      "the trace's")
    ap.add_argument("--vector", default="cpu", choices=["cpu", "comp"],
                    help="the trace's computation column when --compute is not given "
                         "(default cpu: right on an oversubscribed host)")
    ap.add_argument("--variability", metavar="CSV",
                    help="the representatives' measured variability (replay.expand "
                         "--variability: their cores' speeds, run-to-run and span-to-span "
                         "noise); with it the prediction is the median of --samples seeded "
                         "samples of the run and its band their 5-95 %% range "
                         "(netsim/variability.py); needs --compute")
    ap.add_argument("--class-variability", action="store_true",
                    help="for an extrapolated trace (python -m extrapolate): sample each "
                         "position class's variability as --variability samples the "
                         "representatives' copies: its representative's copies where the "
                         "trace was extrapolated with --variability, else how its members "
                         "differed in the largest small trace (speed, span-to-span noise)")
    ap.add_argument("--samples", type=int, default=SAMPLES,
                    help=f"samples of the run drawn from --variability (default {SAMPLES}; "
                         f"odd, so that the median is one of them; 0: none, every rank at "
                         f"its representative's times)")
    ap.add_argument("--seed", type=int, default=SEED,
                    help=f"seed of the samples (default {SEED}; written into the prediction)")
    ap.add_argument("--compute-scale", type=float, default=1.0,
                    help="multiply computation times (a speed factor), on top of the "
                         "platform's compute_scale")
    ap.add_argument("-o", "--output", required=True, help="prediction JSON")
    ap.add_argument("--timeline", help="Chrome trace event JSON (open in ui.perfetto.dev)")
    ap.add_argument("--goal-in", action="store_true", help="the input is a GOAL schedule")
    ap.add_argument("--goal-out", help="also write the schedule as GOAL text")
    ap.add_argument("--simgrid-out", metavar="DIR",
                    help="also write SimGrid time-independent traces (one file per rank)")
    ap.add_argument("--flops", type=float, default=1e9,
                    help="flop/s that turn computation seconds into SimGrid compute "
                         "actions (default 1e9)")
    return ap


def _platform(a):
    """The target: --platform's file or --loggops's parameters, times --compute-scale."""
    if bool(a.platform) == bool(a.loggops):
        raise PlatformError("give exactly one of --platform and --loggops")
    plat = load_platform(a.platform) if a.platform else from_dict(_loggops(a.loggops),
                                                                  "--loggops", schema=False)
    if not a.compute_scale > 0:
        raise PlatformError(f"--compute-scale must be > 0, not {a.compute_scale}")
    plat.compute_scale *= a.compute_scale
    return plat


@dataclass
class _Lowered:
    """A trace lowered for simulation: its schedule and what sampling and
    a task pool need (``reps``: each rank's representative; ``lower``: a
    per-sample lowering where the trace's task pool is dealt anew)."""
    schedule: Schedule
    warnings: list
    ends: list                      # the band's two ends' schedules (or none)
    reps: np.ndarray
    events: int
    lower: object = None
    band_said: bool = False         # a warning already says what the band is
    var: object = None              # --class-variability's model, where it applies
    factors: tuple | None = None    # an extrapolated computation's interval, as factors


def _warnings(t, compute) -> tuple[list[str], Pool | None]:
    """What the trace says later stages cannot account for, and a task pool
    found in it: printed, and returned for the prediction's warnings with
    the pool (or None)."""
    from contracts.merge import trace_warnings

    from .pools import find_pool
    said = trace_warnings(t.meta)
    if compute:         # the computation is the replays', not the trace's CPU seconds
        said.pop("threads", None)
    warnings = list(said.values())
    pool, why = find_pool(t.events)
    if why:
        warnings.append(_task_pool_warning(t.events, why))
    for w in warnings:
        print(f"netsim: WARNING: {w}", file=sys.stderr)
    return warnings, pool


def _from_trace(a, plat, var) -> _Lowered:
    """The schedule of a trace directory, the trace's warnings (also
    printed), the schedules of the computation band's two ends (empty
    when the computation has no band or is sampled) and each rank's
    representative (its own rank without --compute); writes the SimGrid
    export when asked.  ``var`` (a Variability, or None): sampled where it
    says anything varies, around the spans' means."""
    from contracts.trace import TraceError, load_trace

    from .pools import DealtLowering
    from .schedule import from_trace
    try:
        t = load_trace(a.trace)
    except TraceError as e:
        raise ScheduleError(str(e)) from None
    if t.incomplete_ranks:
        raise ScheduleError(f"{a.trace}: rank(s) {t.incomplete_ranks[:20]} did not "
                            f"finish; their traces are truncated, so the run cannot "
                            f"be simulated")
    warnings, pool = _warnings(t, a.compute)
    sampled = var is not None and not var.nil
    inside = None
    factors: tuple[float, float] | None = None   # the band: the computation times these
    reps = np.arange(t.size)
    if a.compute:
        c = _load_compute(a.compute, t.events)
        comp, low, high, inside = (c[k].to_numpy(float) for k in ("comp", "low", "high",
                                                                   "inside"))
        if sampled:
            comp = low = high = c["mean"].to_numpy(float)
        reps[t.events["rank"].to_numpy()] = c["representative"].to_numpy()
    else:
        comp = low = high = t.events[a.vector].to_numpy()
        x = t.meta.get("extrapolated")
        if x:
            lo, hi, say = _extrapolated_band(x, a.vector)
            factors = (lo, hi)
            warnings.append(say)
            print(f"netsim: WARNING: {say}", file=sys.stderr)
    if a.class_variability and a.samples != 0:
        var, reps = _class_variability(t, a)
        sampled = not var.nil
    print(f"netsim: lowering {len(t.events)} events of {t.size} ranks", file=sys.stderr)
    sched = from_trace(t, plat, comp, inside=inside)
    ends = []
    if factors and not pool and sched.work is not None:
        # every rank's computation times one factor: the schedule re-timed,
        # not lowered again (the lowering is most of the time at 100,000 ranks)
        ends = [_retimed(sched, f) for f in factors]
    elif not pool and ((low != comp).any() or (high != comp).any()):
        ends = [from_trace(t, plat, low, inside=inside), from_trace(t, plat, high, inside=inside)]
    if a.simgrid_out:
        from interop.simgrid import write_ti
        left = write_ti(t, a.simgrid_out, a.flops, compute=comp * plat.compute_scale,
                        inside=None if inside is None else inside * plat.compute_scale)
        if left:
            print("netsim: SimGrid export left out: " + ", ".join(
                f"{k} x{v}" for k, v in sorted(left.items())), file=sys.stderr)
    if sampled:
        ends = []                       # the samples' range is the band
    out = _Lowered(sched, warnings, ends, reps, len(t.events),
                   band_said=bool(not a.compute and t.meta.get("extrapolated")),
                   var=var if a.class_variability else None, factors=factors)
    if pool:
        print(f"netsim: a task pool: {pool.describe()}; dealt anew in every simulated run, "
              f"by arrival", file=sys.stderr)
        sigma = var.sigma_span_of(reps) if sampled else np.zeros(t.size)
        out.lower = DealtLowering(t, pool, plat, comp, inside, sigma)
    return out


def _extrapolated_band(x: dict, vector: str) -> tuple[float, float, str]:
    """An extrapolated trace's computation interval as two factors on
    every rank's computation (the widest of its position classes': a
    bound, since the classes' ends need not come together), and the
    warning that says where the trace came from."""
    rows = x.get("classes") or []
    try:
        lo = min(r[f"{vector}_low"] / r[f"{vector}_total"] for r in rows)
        hi = max(r[f"{vector}_high"] / r[f"{vector}_total"] for r in rows)
    except (KeyError, TypeError, ZeroDivisionError, ValueError):
        lo = hi = 1.0
    sizes = ", ".join(str(f.get("size")) for f in x.get("from", []))
    # a list: the small runs' compute tables (extrapolate --compute)
    source = ("the small runs' replayed times" if isinstance(x.get("computation"), list)
              else "the small traces' CPU seconds")
    return lo, hi, (f"the trace was extrapolated from traces at N = {sizes} "
                    f"({x.get('scaling', '?')} scaling): its computation is fitted to "
                    f"{source}, not measured at this N, and the band is its "
                    f"{int(100 * x.get('level', 0.9))} % interval ({lo:.2g}x to {hi:.2g}x the "
                    f"fitted computation)")


def _retimed(s: Schedule, factor: float) -> Schedule:
    """``s`` (lowered with ``work``) with the application's work in every
    op times ``factor``: re-timed, not lowered again."""
    work = s.work
    assert work is not None
    return dataclasses.replace(s, dur=np.where(work > 0, s.dur + work * (factor - 1), s.dur))


def _class_variability(t, a):
    """--class-variability: the Variability of an extrapolated trace (one
    pseudo-representative per position class: its members' speeds as the
    copies' factors and their span noise, or, extrapolated from replayed
    small runs with their variability, its representative's copies') and
    each rank's class."""
    import pandas as pd

    from contracts.variability import rows
    from extrapolate.layout import Layout

    from .variability import Variability
    x = t.meta.get("extrapolated")
    if not x or a.compute:
        raise ScheduleError("--class-variability samples an extrapolated trace's own "
                            "computation (python -m extrapolate), without --compute")
    classes = x.get("classes") or []
    if not classes or f"{a.vector}_factors" not in classes[0]:
        raise ScheduleError(f"{a.trace}: extrapolated without its classes' variability: "
                            f"extrapolate it again")
    index = {c["class"]: k for k, c in enumerate(classes)}
    names = Layout(tuple(x["grid"]), tuple(x["periods"])).position_classes(np.arange(t.size))
    reps = np.array([index[n] for n in names], np.int64)
    table = pd.concat([rows(k, np.asarray(c[f"{a.vector}_factors"], float),
                            float(c.get(f"{a.vector}_sigma_run", 0.0)),
                            float(c[f"{a.vector}_sigma_span"]), 1, None)
                       for k, c in enumerate(classes)], ignore_index=True)
    return Variability(table, a.samples, a.seed), reps


def _nil(reps: np.ndarray):
    """One sample in which nothing varies (a task pool's single deal)."""
    from contracts.variability import nil

    from .variability import Variability
    return Variability(nil(np.unique(reps)), samples=1)


def _variability(a):
    """--variability's model, or None."""
    if not a.variability or a.samples == 0:
        return None
    if a.samples < 0:
        raise ScheduleError(f"--samples must be >= 0, not {a.samples}")
    if not a.compute:
        raise ScheduleError("--variability needs --compute (which rank each representative "
                            "stands for)")
    from contracts.variability import VariabilityError, read_variability

    from .variability import Variability
    try:
        return Variability(read_variability(a.variability), a.samples, a.seed)
    except VariabilityError as e:
        raise ScheduleError(str(e)) from None


def _task_pool_warning(ev, why: str) -> str:
    """The warning for a trace in which a rank took messages from any
    source from several ranks (a task pool) that the simulator cannot
    deal anew (netsim/pools.py says which shapes it can): ``why`` not.

    The traced schedule is kept: each worker replays and is simulated
    with the tasks it got.  A real pool deals anew, giving a slower core
    fewer tasks, while the prediction waits for the slowest worker's
    share: examples/master_worker.py came out 30-38 % high on a 16-core
    virtual machine whose cores differed 1.2-1.5x before the pool was
    dealt anew (bench/RESULTS.md, Larger N)."""
    wild = ev.loc[ev["wildcard"].to_numpy(bool) & (ev["peer"].to_numpy() >= 0), ["rank", "peer"]]
    sources = wild.groupby("rank")["peer"].nunique()
    r = int(sources.idxmax())
    return (f"rank {r} took {int((wild['rank'] == r).sum())} messages from any source, "
            f"from {int(sources.max())} ranks: a dynamic schedule (a task pool), kept as the "
            f"traced run dealt it, since {why}; where the target's cores differ in speed, a "
            f"real run deals the slower ones less work, and this prediction, which waits for "
            f"the slowest share, comes out high")


def _sampled(low: _Lowered, plat, var, run):
    """The median sample's Result and the prediction's ``variability``
    record: the distribution, seed and every sample's time."""
    from .variability import run_samples

    def progress(m, t):
        print(f"netsim: sample {m + 1}/{var.samples}: {seconds(t)}", file=sys.stderr, flush=True)
    res, times, mid, low.schedule = run_samples(low.schedule, plat, var, low.reps, run,
                                                progress, lower=low.lower, events=low.events)
    return res, {**var.describe(), "times": times, "median_sample": mid}


# a band wider than this share of the prediction is said in a warning
BAND_WARN = 0.05


def _band_warning(t: float, band: list) -> str | None:
    """The warning for a prediction whose computation band is wide, or None."""
    if t <= 0 or (band[1] - band[0]) / t <= BAND_WARN:
        return None
    # the relative width alone, so that platforms fed the same computation
    # say the same (the band itself is in the prediction and its table)
    return (f"the band is {100 * (band[1] - band[0]) / t:.0f} % of the prediction wide "
            f"(the computation at the least and the most it was measured to take: a "
            f"replay on a busy node, or repeats that differ): replay on an idle node, "
            f"or with more repeats, to narrow it")


def _load_compiler_without_blas_check() -> None:
    """Load numba's CPU target before the first compiled call, skipping
    its BLAS check: numba imports scipy.linalg to learn whether compiled
    code may call BLAS, 0.15 s of the simulator's 1 s start-up, and no
    compiled code here does linear algebra.  The block is lifted at once,
    so a later ``import scipy.linalg`` works as usual."""
    name = "scipy.linalg.cython_blas"
    if name in sys.modules:                 # already paid for
        return
    sys.modules[name] = None                # type: ignore[assignment]  # import fails fast
    try:
        from numba.core.registry import cpu_target
        cpu_target.target_context.refresh()
    finally:
        if name in sys.modules and sys.modules[name] is None:
            del sys.modules[name]


def _curve_warnings(s: Schedule, plat) -> list[str]:
    """The platform's levels whose measured curves stop short of the
    schedule's messages (Platform.beyond_curves), each printed; nothing
    looked up where no level has a measured curve."""
    if not any(lv.one_way or lv.stream for lv in plat.levels):
        return []
    from .engine import SEND
    sends = s.kind == SEND
    core = plat.core_of(s.nranks)
    said = plat.beyond_curves(core[s.rank[sends]], core[s.peer[sends]], s.size[sends])
    for say in said:
        print(f"netsim: WARNING: {say}", file=sys.stderr)
    return said


def main(argv=None) -> int:
    a = _parser().parse_args(argv)
    _load_compiler_without_blas_check()
    from .predict import run, write_timeline
    try:
        plat = _platform(a)
        if a.goal_in and a.variability:
            raise ScheduleError("--variability samples a trace's computation, not a GOAL "
                                "file's")
        if a.class_variability and (a.variability or a.goal_in):
            raise ScheduleError("--class-variability is an extrapolated trace's own: not "
                                "with --variability or --goal-in")
        var = _variability(a)
        if a.goal_in:
            from interop.goal import read_goal
            s = read_goal(a.trace)
            low = _Lowered(s, [], [], np.arange(s.nranks), 0)
        else:
            low = _from_trace(a, plat, var)
            var = low.var or var
        warnings = low.warnings + _curve_warnings(low.schedule, plat)
        if a.goal_out:
            from interop.goal import write_goal
            write_goal(a.goal_out, low.schedule)
        print(f"netsim: simulating {len(low.schedule)} operations", file=sys.stderr)
        sampled = None
        if var is not None and not var.nil:
            res, sampled = _sampled(low, plat, var, run)
            band = [float(np.percentile(sampled["times"], q)) for q in (5, 95)]
            if low.factors and low.schedule.work is not None:
                # an extrapolated computation's interval around the median
                # sample: its schedule re-timed at the interval's ends
                ends = [run(_retimed(low.schedule, f), plat).predicted_time
                        for f in low.factors]
                band = [min(band[0], ends[0]), max(band[1], ends[1])]
        else:
            if var is not None:
                print("netsim: nothing was measured to vary: every rank at its "
                      "representative's times", file=sys.stderr)
            if low.lower:                   # a task pool: dealt once, at these times
                from .variability import run_samples
                res, _, _, low.schedule = run_samples(low.schedule, plat, _nil(low.reps),
                                                      low.reps, run, lower=low.lower,
                                                      events=low.events)
            else:
                res = run(low.schedule, plat)
            band = [run(s, plat).predicted_time for s in low.ends] or [res.predicted_time] * 2
    except (PlatformError, ScheduleError) as e:
        print(f"netsim: error: {e}", file=sys.stderr)
        return 2
    band = [min(band[0], res.predicted_time), max(band[1], res.predicted_time)]
    wide = None if sampled or low.band_said else _band_warning(res.predicted_time, band)
    if wide:
        print(f"netsim: WARNING: {wide}", file=sys.stderr)
        warnings.append(wide)
    extra = {"input": os.path.abspath(a.trace), "compute": a.compute or f"trace:{a.vector}",
             "warnings": warnings, "band": band}
    if sampled:
        extra["variability"] = sampled
    out = prediction_json(res, plat, extra)
    try:
        write_prediction(a.output, out)
        if a.timeline:
            write_timeline(a.timeline, low.schedule, res)
    except OSError as e:                   # contracts.output.OutputError among them
        print(f"netsim: error: {e}", file=sys.stderr)
        return 2
    pr = res.ranks
    what = (f"median of {len(sampled['times'])} samples, " + (
        "band: their 5-95 % and the fitted computation's interval, " if low.factors else
        "5-95 %: ") if sampled else "band ")
    print(f"predicted time {seconds(res.predicted_time)} ({what}{seconds(band[0])} to "
          f"{seconds(band[1])}) on {plat.name} ({low.schedule.nranks} ranks); "
          f"mean per rank: computation {seconds(pr['computation'].mean())}, communication "
          f"{seconds(pr['communication'].mean())}, waiting {seconds(pr['waiting'].mean())}")
    if res.links is not None and len(res.links):
        top = res.links.iloc[0]
        print(f"busiest link: {top['link']}, busy {seconds(top['busy'])} "
              f"({top['load']:.0%} of the run)")
    print(f"simulated {res.events} events in {res.seconds:.3f} s; wrote {a.output}"
          + (f" and {a.timeline}" if a.timeline else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
