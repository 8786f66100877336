"""Partial replay (docs/METHODS.md, "Partial replay"): find a rank's main loop, cut its replay.

An iterative application repeats the same communication sequence every
iteration, and its computation between those calls repeats too.  So a
representative need not be replayed for the whole run: the set-up, a
warm-up and ``k`` more iterations are replayed, each span's target time
is taken as its mean over those ``k`` iterations, and the remaining
iterations get those times.  The warm-up is the loop's first iteration,
or more where the host trace shows the first iterations slower than the
rest (caches, allocations, ranks still starting): as many as it takes,
up to a quarter of the loop, for ``k`` iterations to stand for all the
later ones (:func:`_warm_up`).

``k`` is chosen from the host trace unless given (:func:`measured`): as
many iterations as make their mean known within ``PRECISION`` (two
standard errors of the host's noise from iteration to iteration) and
span at least ``WINDOW`` seconds of computation (so that a preempted
tick or a busy neighbour averages out), at least ``MIN_MEASURED``; the
warm-up and ``k`` together at most ``MAX_SHARE`` of the loop, so that a
long loop costs the target node a twentieth of the whole replay or less
(its start-up and set-up come on top: a tenfold saving in all).
Where that bound leaves the mean less precise, the plan says how
precise.

The loop is found in the host trace of the rank: each event's signature
(op, communicator, peer, bytes sent and received, call site; not the
tag, which some codes set to the step number) made
into an integer, and the longest stretch of the sequence that repeats with
the smallest period.  Partial replay is used only where it is safe, and
:func:`plan` says why not otherwise:

- no stretch repeats at least ``2 (k + 1)`` times, the cut would
  replay more than half of the events (little to save), or the loop holds
  less than half of them (the rest would be host times, not a replay);
- the host trace's computation per iteration drifts: after no warm-up
  does the median of ``k`` iterations come within ``DRIFT`` of the median
  of the iterations after them, or within what the host's own noise from
  one iteration to the next explains (an adaptive code, a solver converging, a mesh
  refined: the replayed iterations would not stand for the others);
- the rank made MPI calls below Python (their C log cannot be cut at the
  same call);
- with ``k`` chosen automatically, the loop computes less in all than
  ``WINDOW`` / ``MAX_SHARE`` (10 s on the host): a twentieth of it spans
  less than half a second, too short to average out the target's noise
  and its warm-up, and the whole loop's replay costs little (nxtval-rma's
  server, 2,500 iterations of 70 us, predicted 37 % high when cut).

Where the replay stopped, :func:`fill` completes the vectors: inside the
loop each position takes the mean of its ``k`` replayed iterations (its
least and most of them are the band); after the loop (the wind-down:
final reductions, output) each span takes its host time scaled by the
ratio of target to host time over the replayed iterations.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from contracts.raw_trace import FLAG_BELOW_PYTHON

# the columns of a trace's events that make an event's signature: what
# must repeat for two iterations to be the same (not `req`: request ids
# grow from one iteration to the next; not `tag`: codes that number their
# messages by the step, which changes nothing of the work between calls)
SIGNATURE = ["op", "comm", "peer", "sbytes", "rbytes", "site"]
DRIFT = 0.05
# the automatic choice of k (:func:`measured`)
PRECISION = 0.01
WINDOW = 0.5
MIN_MEASURED = 3
MAX_SHARE = 0.05
# candidate periods tried, at most: distances back to earlier events with
# the same signature as one event in the middle of the run
CANDIDATES = 256


@dataclass(frozen=True)
class Loop:
    """A stretch of ``iterations`` repeats of ``period`` events from event
    ``start`` (the trace's ``seq``)."""

    start: int
    period: int
    iterations: int

    @property
    def end(self) -> int:
        """The first event after the loop's last full iteration."""
        return self.start + self.period * self.iterations

    def said(self) -> str:
        """The loop in a few words."""
        return f"{self.period} calls x {self.iterations} from event {self.start}"


@dataclass(frozen=True)
class Plan:
    """What to replay of one rank: events ``0 .. cut`` (the call at ``cut``
    is reached, its span measured, and the replay stops there); ``cut`` is
    None for a whole replay, and ``reason`` then says why."""

    rank: int
    events: int
    loop: Loop | None
    replayed: int            # iterations measured after the warm-up
    cut: int | None
    reason: str
    warmup: int = 0          # the loop's first iterations replayed but not measured
    precision: float = float("nan")   # two standard errors of their mean, relative (host)

    def describe(self) -> str:
        """One line for the logs and the report."""
        if self.cut is None:
            return f"rank {self.rank}: whole replay ({self.reason})"
        lp = self.loop
        assert lp is not None
        said = (f"rank {self.rank}: partial replay of events 0-{self.cut} of {self.events} "
                f"({self.events / (self.cut + 1):.1f}x fewer): the loop of {lp.period} calls "
                f"from event {lp.start} repeats {lp.iterations} times; {self.warmup} warm-up "
                f"and {self.replayed} iterations replayed, the other "
                f"{lp.iterations - self.warmup - self.replayed} expanded from them")
        if self.precision == self.precision:
            said += f" (their mean within {self.precision:.1%} on the host's noise)"
        return said


def signatures(events: pd.DataFrame) -> np.ndarray:
    """One integer per event of one rank (rows in ``seq`` order): equal
    integers for events that make the same call."""
    cols = [c for c in SIGNATURE if c in events.columns]
    keys = pd.MultiIndex.from_frame(events[cols].fillna(-1))
    codes, _ = pd.factorize(keys)
    return np.asarray(codes, dtype=np.int64)


def _longest_run(eq: np.ndarray) -> tuple[int, int]:
    """(start, length) of the longest run of True in ``eq``."""
    if not eq.any():
        return 0, 0
    padded = np.concatenate(([False], eq, [False])).astype(np.int8)
    edges = np.diff(padded)
    starts, ends = np.nonzero(edges == 1)[0], np.nonzero(edges == -1)[0]
    i = int(np.argmax(ends - starts))
    return int(starts[i]), int(ends[i] - starts[i])


def find_loop(sig: np.ndarray, min_iterations: int = 4) -> Loop | None:
    """The longest stretch of ``sig`` that repeats a period at least
    ``min_iterations`` times, with the smallest period that covers it
    (a stretch that repeats with period p also does with 2p).

    Candidate periods are the distances from an event in the middle of the
    run back to earlier events with the same signature (the middle is
    inside the main loop of an iterative code); each is checked over the
    whole sequence in one vectorised comparison."""
    n = len(sig)
    if n < 2 * min_iterations:
        return None
    best: Loop | None = None
    tried: set[int] = set()
    for mid in (n // 2, n // 3, 2 * n // 3):
        earlier = np.nonzero(sig[:mid] == sig[mid])[0][::-1]
        for p in (mid - earlier)[:CANDIDATES]:
            p = int(p)
            if p in tried or p > n // min_iterations:
                continue
            tried.add(p)
            start, length = _longest_run(sig[p:] == sig[:-p])
            iterations = (length + p) // p
            if iterations < min_iterations:
                continue
            lp = Loop(start, p, iterations)
            # a longer stretch wins; as long a stretch with a smaller period too
            covered = p * iterations
            best_covered = best.period * best.iterations if best is not None else 0
            if best is None or covered > best_covered * 1.05 or (
                    covered >= best_covered * 0.95 and p < best.period):
                best = lp
    return best


def plan(rank: int, events: pd.DataFrame, iterations: int | None,
         column: str = "cpu", drift: float = DRIFT) -> Plan:
    """Whether and where to cut rank ``rank``'s replay (its trace events in
    ``seq`` order): a warm-up and ``iterations`` more of its main loop,
    where that is safe (the module's docstring); ``iterations`` None: as
    many as :func:`measured` says; 0: whole replays.  ``drift``: how far
    the measured iterations' median may be from the later ones'
    (:func:`_warm_up`)."""
    n = len(events)

    def whole(reason: str, loop: Loop | None = None) -> Plan:
        return Plan(rank, n, loop, 0, None, reason)
    if iterations is not None and iterations <= 0:
        return whole("partial replay off")
    if "flags" in events.columns and (events["flags"].to_numpy() & FLAG_BELOW_PYTHON).any():
        return whole("it made MPI calls below Python, whose log is not cut")
    least = 2 * ((iterations or MIN_MEASURED) + 1)
    loop = find_loop(signatures(events), min_iterations=least)
    if loop is None:
        return whole(f"no communication sequence repeats {least} times or more")
    if loop.end - loop.start < n / 2:
        # the rest would be the host's times scaled: not a replay
        return whole(f"its loop ({loop.said()}) holds {loop.end - loop.start} of its {n} "
                     f"events", loop)
    host = events[column].to_numpy(dtype=float)
    per_iteration = host[loop.start:loop.end].reshape(loop.iterations, loop.period).sum(axis=1)
    total = float(per_iteration.sum())
    if iterations is None and total < WINDOW / MAX_SHARE:
        return whole(f"its loop computes {total:.3g} s in all: too little to cut (a "
                     f"twentieth of it spans less than {WINDOW:g} s)", loop)
    k = iterations or measured(per_iteration)
    warmup, gap = _warm_up(per_iteration, k, drift)
    if warmup is None:
        return whole(f"the host's computation per iteration drifts: {k} iterations "
                     f"after any warm-up take {gap:+.1%} of the median of the iterations after "
                     f"them", loop)
    room = int(MAX_SHARE * loop.iterations) - warmup
    if iterations is None and room >= MIN_MEASURED:     # the warm-up counts against the share
        k = min(k, room)
    cut = loop.start + (warmup + k) * loop.period
    if cut + 1 > n / 2:
        return whole(f"the replay would keep {cut + 1} of {n} events", loop)
    return Plan(rank, n, loop, k, cut, "", warmup, _precision(per_iteration, k))


def _noise(per_iteration: np.ndarray) -> tuple[float, float]:
    """The typical iteration's time and its robust relative spread (the
    first iteration left out: it is the set-up's)."""
    rest = per_iteration[1:] if len(per_iteration) > 1 else per_iteration
    mid = float(np.median(rest))
    if mid <= 0:
        return 0.0, 0.0
    return mid, float(1.4826 * np.median(np.abs(rest - mid)) / mid)


def _precision(per_iteration: np.ndarray, k: int) -> float:
    """Two standard errors of the mean of ``k`` iterations, relative."""
    return 2 * _noise(per_iteration)[1] / np.sqrt(k)


def measured(per_iteration: np.ndarray) -> int:
    """How many iterations to measure (the module's docstring): enough for
    ``PRECISION`` and ``WINDOW``, at least ``MIN_MEASURED``, at most
    ``MAX_SHARE`` of the loop less one warm-up iteration."""
    mid, cv = _noise(per_iteration)
    want = max(MIN_MEASURED, math.ceil((2 * cv / PRECISION) ** 2),
               math.ceil(WINDOW / mid) if mid > 0 else MIN_MEASURED)
    return max(MIN_MEASURED, min(want, int(MAX_SHARE * len(per_iteration)) - 1))


def _warm_up(per_iteration: np.ndarray, k: int,
             drift: float = DRIFT) -> tuple[int | None, float]:
    """The fewest warm-up iterations (at least 1, at most a quarter of the
    loop) after which ``k`` iterations stand for all the later ones.

    A run's first iterations are often slower (caches, allocations, ranks
    still starting): the warm-up lasts at least until the first iteration
    within 2 ``drift`` of the loop's median.  From there, ``k`` iterations
    stand for the later ones when their median is within ``drift`` of the
    later ones' median, or within what the host's noise from iteration to
    iteration explains (three robust standard errors).  Medians, not
    means: one preempted iteration on the host is no drift.  A code whose
    computation keeps changing has no such point: (None, the smallest gap
    seen, relative)."""
    n = len(per_iteration)
    typical = np.median(per_iteration[1:])
    settled = np.nonzero(per_iteration[1:] <= typical * (1 + 2 * drift))[0]
    first = 1 + int(settled[0]) if len(settled) else n
    best = np.inf
    for w in range(first, max(first + 1, n // 4 + 1)):
        measured, rest = per_iteration[w:w + k], per_iteration[w + k:]
        if len(rest) < k:
            break
        mid = np.median(rest)
        if mid <= 0:
            return w, 0.0
        spread = 1.4826 * np.median(np.abs(rest - mid))
        gap = np.median(measured) - mid
        if abs(gap) <= max(drift * mid, 3 * spread / np.sqrt(k)):
            return w, gap / mid
        best = gap / mid if abs(gap / mid) < abs(best) else best
    return None, best


def fill(prefix: dict[str, np.ndarray], loop: Loop, host: np.ndarray, warmup: int = 1,
         warn=None) -> dict[str, np.ndarray]:
    """The full vectors of a rank whose replay stopped early.

    ``prefix``: its replayed arrays (``comp``, ``low``, ``high``,
    ``inside``, ``mean``), one value per replayed event; ``host``: its
    host trace's computation, one per traced event.  Inside the loop a
    position takes the mean of its replayed iterations after the
    ``warmup`` first (the least and the most of them widen ``low`` and
    ``high``); after the
    loop, the host's time times the target-to-host ratio of those
    iterations."""
    m, n = len(prefix["comp"]), len(host)
    p, s = loop.period, loop.start
    full = (m - s) // p                     # loop iterations wholly replayed
    first = min(warmup, full - 1)           # the warm-up is left out when it can be
    if full < 1:
        raise ValueError(f"the replay stopped at event {m - 1}, before the end of the loop's "
                         f"first iteration (events {s}-{s + p - 1})")
    if first < warmup and warn is not None:
        warn(f"only {full} iteration(s) of the loop were replayed, {warmup} of them meant as "
             f"warm-up: warm-up times stand for the iterations not replayed")
    lo, hi = s + first * p, s + full * p
    out = {}
    for name, v in prefix.items():
        block = v[lo:hi].reshape(full - first, p)
        whole = np.empty(n)
        whole[:m] = v
        reps = (np.arange(m, loop.end) - s) % p
        per = block.min(axis=0) if name == "low" else block.max(axis=0) if name == "high" \
            else block.mean(axis=0)
        whole[m:loop.end] = per[reps]
        out[name] = whole
    host_sum = host[lo:hi].sum()
    ratio = prefix["comp"][lo:hi].sum() / host_sum if host_sum > 0 else 1.0
    tail = max(m, loop.end)
    for name, whole in out.items():
        whole[tail:] = 0.0 if name == "inside" else host[tail:] * ratio
    return out


def plan_table(trace_dir: str, ranks: list[int], iterations: int | None,
               drift: float = DRIFT) -> pd.DataFrame:
    """The plan of every rank in ``ranks`` (contracts/partial.py's columns)."""
    from contracts.trace import load_trace
    cols = ["rank", "seq", "cpu", "flags"] + SIGNATURE
    ev = load_trace(trace_dir, columns=list(dict.fromkeys(cols))).events
    ev = ev[ev["rank"].isin(ranks)].sort_values(["rank", "seq"])
    rows = []
    for r, g in ev.groupby("rank", sort=True):
        pl = plan(int(r), g, iterations, drift=drift)
        lp = pl.loop
        rows.append({"rank": pl.rank, "events": pl.events,
                     "start": lp.start if lp else -1, "period": lp.period if lp else -1,
                     "iterations": lp.iterations if lp else 0, "warmup": pl.warmup,
                     "replayed": pl.replayed,
                     "cut": -1 if pl.cut is None else pl.cut, "reason": pl.reason,
                     "said": pl.describe()})
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    import argparse
    import sys

    from contracts.partial import write_partial
    from contracts.representatives import RepresentativesError, representative_ranks
    from contracts.trace import TraceError, load_trace
    ap = argparse.ArgumentParser(
        prog="python -m replay.loops",
        description="Plan partial replay: find each representative's main loop in the trace "
                    "and where its replay may stop (a warm-up and K more iterations), or say "
                    "why it must replay the whole run.  Writes the plan that `instrument "
                    "record --partial` reads (docs/FILES.md, partial.csv).")
    ap.add_argument("trace", help="trace directory (python -m instrument trace)")
    ap.add_argument("reps", help="representatives CSV (python -m cluster)")
    ap.add_argument("-o", "--output", required=True, help="the plan, CSV")
    ap.add_argument("--iterations", default="auto",
                    help="loop iterations to measure after the warm-up: auto (default: enough "
                         f"for their mean within {PRECISION * 100:g} %% on the host's noise and "
                         f"{WINDOW:g} s of computation, at least {MIN_MEASURED}, the warm-up "
                         f"and they at most {MAX_SHARE * 100:g} %% of the loop; a loop of less "
                         f"than {WINDOW / MAX_SHARE:g} s of computation replayed whole), a "
                         "number, or 0: replay every representative's whole run")
    ap.add_argument("--drift", type=float, default=DRIFT,
                    help="how far the measured iterations' median computation may be from "
                         "the later ones' on the host before the rank is replayed whole (an "
                         f"adaptive code; default {DRIFT:g}: {DRIFT * 100:g} %%)")
    a = ap.parse_args(argv)
    if a.iterations == "auto":
        a.iterations = None
    else:
        try:
            a.iterations = int(a.iterations)
        except ValueError:
            ap.error(f"--iterations: auto or a whole number, not {a.iterations!r}")
        if a.iterations < 0:
            ap.error("--iterations must be >= 0")
    if not a.drift > 0:
        ap.error("--drift must be > 0")
    try:
        size = load_trace(a.trace, columns=["rank"]).size
        ranks = representative_ranks(a.reps, size)
        table = plan_table(a.trace, ranks, a.iterations, a.drift)
        write_partial(table, a.output)
    except (TraceError, RepresentativesError, OSError) as e:
        print(f"replay.loops: error: {e}", file=sys.stderr)
        return 2
    for line in table["said"]:
        print(f"replay.loops: {line}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
