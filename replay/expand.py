"""Expand representatives' replayed vectors to every rank (docs/METHODS.md: the expand step).

    python -m replay.expand TRACE_DIR REPS.csv REPLAY_DIR -o COMPUTE.csv [--scale none|member]
                            [--no-fault-charge]

Every rank takes its representative's computation times, measured on the
target node, segment by segment (``seq``): members of a cluster have the
same communication sequence, hence the same segments.  ``--scale member``
multiplies each member's segments by the ratio of its own host computation
total to its representative's (keeps the residual imbalance inside a
cluster; off by default, as in the published method: the threshold already
bounds that difference).

A representative's replay lines up with its traced events when both made
the same calls.  When they differ (a non-deterministic application polled
Test/Iprobe a different number of times in the recording run), the traced
vector of that representative is scaled so its total equals the replayed
total, and a warning says so and where the two part: the first event
(``seq``) whose call differs and what each made there, or, when one is a
prefix of the other, how many calls each made.

Waiting by polling is not computation.  The replay answers a waiting
loop's first poll with what the recorded run's last poll found, so the
loop ends at once and only real computation is measured; the simulator
works out the wait on the target.  Polls the recorded run found empty
before moving on to another call are answered empty and folded into that
call (the replay's ``polls``), with the CPU time between them
(``poll_cpu``: work the application did between polls; sleeps and yields
go), which counts as computation.

A replay whose node was busy (replay/busy.py: spans whose wall time
exceeds their CPU time) is said in a warning with its disturbed share, and
bounds each span: ``low`` takes a disturbed span at its CPU time, ``high``
at its wall time; with ``--repeats`` (REPLAY_DIR/repeat<k>/), the least
and the most each span took over the repeats widen them.  netsim turns the
two ends into the prediction's band.

A span whose traced run took more page faults than its replay (memory
malloc gave back to the kernel, faulted in again: the MPI's own
allocations in its calls decide it, and a replayed call allocates
otherwise) is charged the difference at the node's measured cost per
fault (:func:`fault_charge`; docs/METHODS.md, "The application's own
heap"); ``--no-fault-charge`` charges none, for a host whose MPI
allocates otherwise than the target's.

The start-up spans: the one before MPI initialisation is in no
prediction (netsim starts the clock at init); the one from init to the
first call is the application's setup, in the prediction like any other
span (the clustering leaves both out of its distances: the same work on
every rank, and noisy on a loaded host).

Output columns: ``rank, seq, comp, low, high, inside, mean`` (seconds)
and ``representative`` for every traced event, the input of ``python -m
netsim --compute`` (``inside``: the call's own work between its messages,
replay/objects.py; ``mean``: the span's mean over the representative's
copies and rounds, what the simulator samples around).

``--variability PATH`` also gathers the representatives'
``variability_rank<R>.csv`` (``python -m replay --load K``: their cores'
speeds, run-to-run and span-to-span noise; replay/variability.py) into
one table, the input of ``python -m netsim --variability``; a
representative replayed without copies gets a row that says nothing
varied.
"""
from __future__ import annotations

import argparse
import glob
import os
import sys

import numpy as np
import pandas as pd

from contracts.compute import write_compute
from contracts.replayed import (
    ReplayedError,
    read_partial_replay,
    read_replayed,
    target_seconds,
)
from contracts.representatives import RepresentativesError, read_representatives
from contracts.variability import VariabilityError, nil, read_variability, write_variability

from .busy import describe, disturbed
from .variability import collect, copies_in, mean_spans, round_dirs


class ExpandError(Exception):
    """The replays cannot be expanded to the trace's ranks."""


def expand(trace_dir: str, reps: pd.DataFrame, replay_dir: str, scale: str = "none",
           column: str = "cpu", warn=print, faults: bool = True) -> pd.DataFrame:
    from contracts.trace import load_trace
    ev = load_trace(trace_dir, columns=["rank", "seq", "op", column, "faults"]).events
    host = {r: g for r, g in ev.groupby("rank", sort=True)}
    out = []
    rep_of = dict(zip(reps["rank"], reps["representative"]))
    missing = sorted(set(host) - set(rep_of))
    if missing:
        raise ExpandError(f"ranks {missing[:20]} of the trace are not in the representatives "
                          f"table")
    target = {}
    for rep in sorted(set(rep_of.values())):
        path = os.path.join(replay_dir, f"rank{rep}.csv")
        if not os.path.exists(path):
            raise ExpandError(f"{path}: no replay of representative rank {rep}")
        rp = read_replayed(path, rep)
        h = host[rep]
        secs = target_seconds(rp)
        busy = describe(rep, rp["comp"].to_numpy(), rp["cpu"].to_numpy())
        if busy:
            n = sum(1 for v in rep_of.values() if v == rep)
            warn(f"replay.expand: warning: {busy} (it stands for {n} rank(s))")
        polls = int(rp["polls"].sum())
        if polls:
            warn(f"replay.expand: rank {rep}: {polls} polls found nothing in the recorded run "
                 f"and were answered empty; {rp['poll_cpu'].sum():.4g} s of CPU time between "
                 f"them counted as computation")
        part = read_partial_replay(path) if rp["op"].iat[-1] != "finalize" else {}
        # -1: nothing charged (fault_charge)
        traced_faults = h["faults"].to_numpy() if faults else np.full(len(h), -1)
        if part:
            target[rep] = _partial(rp, h[column].to_numpy(dtype=float), h["op"].to_numpy(),
                                   part, path, replay_dir, rep, warn,
                                   traced_faults[:len(rp)])
        elif len(rp) == len(h) and (rp["op"].to_numpy() == h["op"].to_numpy()).all():
            comp, low, high, mean = charged(
                fault_charge(rp, traced_faults, rep, warn), secs,
                *_band(rp, secs, replay_dir, rep), _mean(rp, secs, replay_dir, rep, warn))
            target[rep] = (comp, low, high, rp["inside"].to_numpy(dtype=float), mean)
        else:
            hv = h[column].to_numpy()
            factor = secs[rp["op"].to_numpy() != "init"].sum() / max(hv[1:].sum(), 1e-300)
            warn(f"replay.expand: warning: rank {rep}: {_first_difference(rp, h)} (a "
                 f"non-deterministic application?); using the traced vector scaled by "
                 f"{factor:.4g}")
            target[rep] = (*(hv * factor,) * 3, np.zeros(len(hv)), hv * factor)
    for r, h in host.items():
        rep = rep_of[r]
        v, lo, hi, inside, mean = target[rep]
        if len(v) != len(h):
            raise ExpandError(f"rank {r}: {len(h)} traced events but its representative {rep} "
                              f"has {len(v)}: they cannot share a vector (different "
                              f"communication sequences; was the clustering done on this "
                              f"trace?)")
        if scale == "member" and r != rep:
            hr, hm = host[rep][column].to_numpy()[1:].sum(), h[column].to_numpy()[1:].sum()
            f = hm / hr if hr > 0 else 1.0
            v, lo, hi, inside, mean = v * f, lo * f, hi * f, inside * f, mean * f
        out.append(pd.DataFrame({"rank": r, "seq": h["seq"].to_numpy(), "comp": v,
                                 "low": lo, "high": hi, "inside": inside,
                                 "representative": rep, "mean": mean}))
    return pd.concat(out, ignore_index=True)


def _first_difference(replayed: pd.DataFrame, traced: pd.DataFrame) -> str:
    """Where a replay's calls part from its trace's, in words: the first
    event (``seq``) whose operation differs, or the shorter's end."""
    a, b = replayed["op"].to_numpy(), traced["op"].to_numpy()
    n = min(len(a), len(b))
    differ = np.nonzero(a[:n] != b[:n])[0]
    if len(differ):
        i = int(differ[0])
        return (f"the replay's calls part from the trace's at event seq "
                f"{int(traced['seq'].iat[i])}: {a[i]} where the trace has {b[i]} "
                f"({len(differ)} of {n} events differ; {len(a)} calls replayed, {len(b)} traced)")
    return (f"the replay made {len(a)} calls, the trace {len(b)} (the same up to event seq "
            f"{int(traced['seq'].iat[n - 1]) if n else 0})")


def fault_charge(rp: pd.DataFrame, traced: np.ndarray, rep: int, warn=print) -> np.ndarray:
    """Seconds to add to each span of replay ``rp``: the page faults its
    traced run took there (``traced``, the trace's ``faults`` of the same
    events) less those the replay took, at the node's own cost per fault
    (``fault_s``); negative where the replay faulted more.

    What malloc hands back to the kernel, to be faulted in again at the
    next touch, depends on everything the process allocated, the MPI's
    own buffers in its calls included; a replayed call allocates
    otherwise, so a replay can run without the faults its real run pays
    (docs/METHODS.md, "The application's own heap").  Nothing is charged
    where either count is missing (-1: calls below Python, older files)
    or the node's cost was not measured."""
    mine = rp["faults"].to_numpy()
    cost = float(rp["fault_s"].iat[0])
    if not rp.attrs.get("faults_counted", True) and (traced >= 0).all():
        warn(f"replay.expand: warning: rank {rep}: its replay counted no page faults (written "
             f"by an older version): none charged; replay it again to charge them")
    if cost <= 0 or len(traced) != len(mine) or (traced < 0).any() or (mine < 0).any():
        return np.zeros(len(rp))
    diff = (traced - mine).astype(float)
    diff[rp["op"].to_numpy() == "init"] = 0.0     # before MPI: in no prediction
    extra = diff * cost
    total = float(extra.sum())
    if abs(total) >= 1e-3:
        warn(f"replay.expand: note: rank {rep}: its traced run took {int(diff.sum()):+d} page "
             f"faults against its replay ({int((diff > 0).sum())} spans more, "
             f"{int((diff < 0).sum())} fewer): {total:+.4g} s charged at this node's "
             f"{cost * 1e6:.3g} us a fault")
    return extra


def charged(extra: np.ndarray, *vectors: np.ndarray) -> tuple:
    """Each of ``vectors`` (a representative's spans, their band, their
    mean) with ``extra`` seconds added span by span, never below zero."""
    return tuple(np.maximum(v + extra, 0.0) for v in vectors)


def _partial(rp: pd.DataFrame, host: np.ndarray, host_ops: np.ndarray, part: dict,
             path: str, replay_dir: str, rep: int, warn, faults: np.ndarray) -> tuple:
    """The vectors of a representative replayed in part (replay/loops.py):
    its replayed events as they are (with the page faults its traced run
    took there and the replay did not, :func:`fault_charge`), the rest of
    its loop from the mean of its replayed iterations, the wind-down after
    the loop from its host times scaled to the target."""
    from .loops import Loop, fill
    m = len(rp)
    if part["events"] != len(host) or (rp["op"].to_numpy() != host_ops[:m]).any():
        raise ExpandError(f"{path}: this partial replay of rank {rep} does not follow its "
                          f"{len(host)} traced events (was it recorded from this trace?)")
    secs = target_seconds(rp)
    comp, low, high, mean = charged(fault_charge(rp, faults, rep, warn), secs,
                                    *_band(rp, secs, replay_dir, rep),
                                    _mean(rp, secs, replay_dir, rep, warn))
    prefix = {"comp": comp, "low": low, "high": high,
              "inside": rp["inside"].to_numpy(dtype=float), "mean": mean}
    loop = Loop(part["start"], part["period"], part["iterations"])
    try:
        full = fill(prefix, loop, host, part["warmup"],
                    warn=lambda m: warn(f"replay.expand: warning: rank {rep}: {m}"))
    except ValueError as e:
        raise ExpandError(f"{path}: rank {rep}: {e}") from None
    done = (m - loop.start) // loop.period
    measured = done - min(part["warmup"], done - 1)
    warn(f"replay.expand: note: rank {rep}: partial replay, {m} of {len(host)} events "
         f"replayed; the other {loop.iterations - done} iterations of its loop "
         f"({loop.period} calls each) take the mean of the {measured} replayed after "
         f"the warm-up, and its last {max(len(host) - max(loop.end, m), 0)} events their "
         f"host times scaled to the target")
    return full["comp"], full["low"], full["high"], full["inside"], full["mean"]


def _mean(rp: pd.DataFrame, secs: np.ndarray, replay_dir: str, rep: int, warn) -> np.ndarray:
    """Each span's mean over the representative's copies and rounds
    (replay/variability.py, mean_spans) where it was replayed as copies
    (a variability_rank<R>.csv beside its replay); else its kept times."""
    if not os.path.exists(os.path.join(replay_dir, f"variability_rank{rep}.csv")):
        return secs
    rounds = round_dirs(replay_dir)
    spans, ops, kept, _ = collect(rep, rounds, copies_in(rounds[0], rep),
                                  warn=lambda m: warn(f"replay.expand: note: {m}"))
    if len(ops) != len(rp) or (ops != rp["op"].to_numpy()).any() or not len(spans):
        return secs                  # the kept replay is not the one collected: keep it
    out = secs.copy()
    out[ops != "init"] = mean_spans(spans, kept)
    return out


def gather_variability(reps: pd.DataFrame, replay_dir: str, warn=print) -> pd.DataFrame:
    """The variability rows of every representative (their
    REPLAY_DIR/variability_rank<R>.csv; nil rows where there is none)."""
    tables = []
    for rep in sorted(set(reps["representative"])):
        path = os.path.join(replay_dir, f"variability_rank{rep}.csv")
        if os.path.exists(path):
            t = read_variability(path)
            if set(t["representative"]) != {rep}:
                raise ExpandError(f"{path}: holds representative(s) "
                                  f"{sorted(set(t['representative']))}, not {rep}")
            tables.append(t)
        else:
            tables.append(nil([rep]))
    if len(tables) and all(len(t) == 1 for t in tables):
        warn("replay.expand: note: no representative was replayed as copies (python -m "
             "replay --load K): nothing was measured to vary, and the prediction takes "
             "every rank at its representative's times")
    return pd.concat(tables, ignore_index=True)


def _band(rp: pd.DataFrame, secs: np.ndarray, replay_dir: str, rep: int):
    """(low, high) per span of a representative's kept replay ``rp``
    (replay/busy.py), widened by its other repeats where there are any."""
    low = np.where(disturbed(rp["comp"].to_numpy(), rp["cpu"].to_numpy()),
                   np.minimum(secs, rp["cpu"].to_numpy(dtype=float)
                              + rp["poll_cpu"].to_numpy(dtype=float)), secs)
    high = secs.copy()
    for path in sorted(glob.glob(os.path.join(replay_dir, "repeat*", f"rank{rep}.csv"))):
        other = read_replayed(path, rep)
        if len(other) != len(rp) or (other["op"].to_numpy() != rp["op"].to_numpy()).any():
            continue                   # a repeat that made other calls bounds nothing
        s = target_seconds(other)
        low = np.minimum(low, s)
        high = np.maximum(high, s)
    return low, high


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m replay.expand",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("trace", help="trace directory (python -m instrument trace)")
    ap.add_argument("reps", help="representatives CSV (python -m cluster)")
    ap.add_argument("replayed", help="directory of rank<R>.csv from python -m replay")
    ap.add_argument("-o", "--output", required=True, help="CSV or .parquet: rank, seq, comp")
    ap.add_argument("--scale", choices=["none", "member"], default="none",
                    help="member: multiply each member's times by its host computation "
                         "over its representative's (keeps the imbalance inside a cluster); "
                         "none (default): the representative's times as they are")
    ap.add_argument("--vector", choices=["cpu", "comp"], default="cpu",
                    help="the trace column used for alignment fallbacks and member scaling")
    ap.add_argument("--variability", metavar="PATH",
                    help="also write the representatives' variability (their cores' "
                         "speeds and noise, measured by python -m replay --load K) into "
                         "one CSV, the input of python -m netsim --variability")
    ap.add_argument("--no-fault-charge", action="store_true",
                    help="charge no span for the page faults its traced run took beyond "
                         "its replay's (where the traced MPI allocates otherwise than the "
                         "target's: another library or interconnect)")
    a = ap.parse_args(argv)
    from contracts.trace import TraceError, load_trace
    try:
        size = load_trace(a.trace, columns=["rank"]).size
        reps = read_representatives(a.reps, size)
        df = expand(a.trace, reps, a.replayed, a.scale, a.vector,
                    warn=lambda m: print(m, file=sys.stderr), faults=not a.no_fault_charge)
        var = None if not a.variability else gather_variability(
            reps, a.replayed, warn=lambda m: print(m, file=sys.stderr))
    except (ExpandError, RepresentativesError, ReplayedError, TraceError, VariabilityError,
            OSError) as e:
        print(f"replay.expand: error: {e}", file=sys.stderr)
        return 2
    try:
        write_compute(df, a.output)
        if var is not None:
            write_variability(var, a.variability)
    except OSError as e:                   # contracts.output.OutputError among them
        print(f"replay.expand: error: {e}", file=sys.stderr)
        return 2
    print(f"{df['rank'].nunique()} ranks, {len(df)} segments -> {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
