"""The trace's contract, checked before any stage uses it (docs/TRACE.md).

``load_trace`` (and the clustering, which reads events rank by rank) run
these on every trace they read, and ``merge`` on every rank it merges: a
damaged or edited trace stops with one TraceError naming the file and,
where it applies, the rank and the event (its ``seq``), never a traceback
or a prediction from wrong numbers.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from mpimodel import ops

from .trace import TraceError

# what the tracer writes into meta.json before the run (merge adds the rest)
META_REQUIRED = ("kind", "tracer_version", "argv", "size", "cwd", "mpi_library", "mpi_version",
                 "mpi4py_version", "python", "start", "end", "complete", "merged")
# and the keys the merge adds (a merged trace without them was accepted)
MERGED_REQUIRED = ("ranks", "incomplete_ranks", "hosts", "events", "unmodelled", "digests")
# the keys of meta.json that stages read, and their JSON types
META_TYPES: dict[str, type | tuple[type, ...]]
META_TYPES = {"argv": list, "complete": bool, "merged": bool, "events": int,
              "incomplete_ranks": list, "ranks": list, "hosts": list, "unmodelled": dict,
              "invisible_calls": dict, "below_python_calls": dict,
              "c_calls_counted_ranks": int, "cwd": str,
              "tracer_version": str, "mpi_library": str, "mpi_version": str,
              "mpi4py_version": str, "python": str, "start": (str, type(None)),
              "end": (str, type(None)), "waits": dict, "native": bool}
# the lowest of MPI's negative rank constants a peer column may hold
# (PROC_NULL, ANY_SOURCE, ROOT: -1..-3 in MPICH, -1..-4 in Open MPI)
PEER_MIN = -4


def read_meta(path: str) -> dict:
    """A trace's meta.json, checked: every key the tracer writes, each of
    the type stages rely on, and the per-rank list consistent with it."""
    try:
        with open(path, "rb") as f:
            meta = json.loads(f.read().decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise TraceError(f"{path}: not valid JSON ({e}): the trace's metadata is "
                         f"damaged") from None
    except OSError as e:
        raise TraceError(f"{path}: cannot read: {e.strerror}") from None
    if not isinstance(meta, dict) or meta.get("kind") != "trace":
        raise TraceError(f"{path}: not a trace's metadata (no \"kind\": \"trace\")")
    size = meta.get("size")
    if type(size) is not int or size < 1:
        raise TraceError(f"{path}: size {size!r} is not a positive number of ranks")
    lost = [k for k in META_REQUIRED + (MERGED_REQUIRED if meta.get("merged") is True else ())
            if k not in meta]
    if lost:
        raise TraceError(f"{path}: missing key(s) {', '.join(lost)} (the tracer writes them all)")
    for key, types in META_TYPES.items():
        if key in meta and not isinstance(meta[key], types):
            raise TraceError(f"{path}: {key} is {type(meta[key]).__name__} "
                             f"{str(meta[key])[:40]!r}, not {_names(types)}")
    _check_meta_items(meta, path)
    return meta


def _check_meta_items(meta: dict, path: str) -> None:
    """The items of meta.json's lists and counts, and the per-rank list."""
    size = meta["size"]
    for key in ("argv", "hosts"):
        if not all(isinstance(a, str) for a in meta.get(key, [])):
            raise TraceError(f"{path}: {key} must be a list of words")
    for key in ("unmodelled", "invisible_calls", "below_python_calls"):
        if not all(type(v) is int and v >= 0 for v in (meta.get(key) or {}).values()):
            raise TraceError(f"{path}: {key} must count calls (whole numbers >= 0)")
    waits = meta.get("waits")
    if waits is not None and not (isinstance(waits.get("yield"), bool)
                                  and isinstance(waits.get("why"), str)):
        raise TraceError(f"{path}: waits must hold yield (true or false) and why (text)")
    inc = meta.get("incomplete_ranks", [])
    if not all(type(r) is int and 0 <= r < size for r in inc):
        raise TraceError(f"{path}: incomplete_ranks must list ranks of 0..{size - 1}")
    ranks = meta.get("ranks")
    if ranks is None:
        return
    if len(ranks) != size or not all(
            isinstance(r, dict) and type(r.get("rank")) is int and r["rank"] == i
            and isinstance(r.get("complete"), bool)
            and type(r.get("events")) is int and r["events"] >= 0
            for i, r in enumerate(ranks)):
        raise TraceError(f"{path}: ranks does not list ranks 0..{size - 1} in order, each "
                         f"with complete and events")
    if sorted(r["rank"] for r in ranks if not r["complete"]) != sorted(inc):
        raise TraceError(f"{path}: incomplete_ranks disagrees with ranks")
    if meta["complete"] != (not inc):
        raise TraceError(f"{path}: complete disagrees with incomplete_ranks")


def _names(types) -> str:
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join({"NoneType": "null", "dict": "object", "list": "list"}.get(
        t.__name__, t.__name__) for t in types)


# integer columns of the events table, and its columns of seconds
INTEGERS = ("rank", "seq", "comm", "peer", "tag", "sbytes", "rbytes", "req", "rpeer", "rtag",
            "flags", "polls", "faults")
SECONDS = ("comp", "cpu", "t_start", "t_end", "poll_cpu", "poll_gap")
MAX_BYTES = 2 ** 48


def _check_types(events: pd.DataFrame, path: str) -> None:
    """Each column of the contract in its type: integers where counts and
    ranks are, numbers where seconds are (a column of strings or floats
    there raised a TypeError in the checks below)."""
    for col in INTEGERS:
        if col in events and not pd.api.types.is_integer_dtype(events[col]):
            raise TraceError(f"{path}: column {col} must hold integers, not "
                             f"{events[col].dtype} (a damaged or hand-edited table?)")
    for col in SECONDS:
        if col in events and not pd.api.types.is_numeric_dtype(events[col]):
            raise TraceError(f"{path}: column {col} must hold seconds (numbers), not "
                             f"{events[col].dtype} (a damaged or hand-edited table?)")


def check_events(events: pd.DataFrame, meta: dict, path: str) -> None:
    """Check the events table against the contract before any stage uses it.

    Raises TraceError naming the file and the first offending rank and
    event (its ``seq``): ranks 0..size-1 in order, each rank's ``seq`` 0, 1,
    2, ... (no event twice or lost), as many events as meta.json counts and
    a complete rank ending with finalize, known op names, peers that are
    world ranks or MPI's constants, times finite (computation >= 0), byte
    counts >= 0 and at most 2**48 (a larger message is damage, and sums of
    such counts overflowed), and events for every rank of a complete trace.
    Columns the table lacks (a reader asked for fewer) are not checked."""
    where = _Where(events, path)
    _check_types(events, path)
    if "rank" in events:
        _check_ranks(events, meta, where)
    if "op" in events:
        known = set(ops.NAMES) | {"init", "finalize"}
        unknown = ~events["op"].isin(known).to_numpy()
        where.bad(unknown, "unknown op {!r}", events["op"].to_numpy())
    size = meta["size"]
    for col in ("peer", "rpeer"):
        if col in events:
            v = events[col].to_numpy()
            where.bad((v < PEER_MIN) | (v >= size),
                      f"{col} {{}} is not a world rank of 0..{size - 1}", v)
    for col in ("comp", "cpu", "t_start", "t_end", "poll_cpu", "poll_gap"):
        if col in events:
            v = events[col].to_numpy(dtype=float)
            positive = col in ("comp", "cpu", "poll_cpu", "poll_gap")
            wrong = ~np.isfinite(v) | ((v < 0) if positive else False)
            where.bad(wrong, f"{col} {{!r}} is not a finite "
                      + ("non-negative " if positive else "") + "time", v)
    for col in ("sbytes", "rbytes", "polls"):
        if col in events:
            v = events[col].to_numpy()
            where.bad(v < 0, f"{col} {{}} is negative", v)
            if col != "polls":
                where.bad(v > MAX_BYTES, f"{col} {{}} is more than 2**48 bytes in one call", v)
    if "faults" in events:
        v = events["faults"].to_numpy()
        where.bad(v < -1, "faults {} is negative (-1: not counted)", v)
    if {"rank", "t_start", "t_end"} <= set(events.columns):
        _check_clock(events, where)


def _check_clock(events: pd.DataFrame, where: _Where) -> None:
    """Wall-clock stamps start at the job's origin (0) and never go back
    within a rank: each call ends after it starts, the next starts after."""
    start, end = events["t_start"].to_numpy(float), events["t_end"].to_numpy(float)
    rank = events["rank"].to_numpy()
    where.bad(start < 0, "t_start {!r} is before the trace's origin", start)
    where.bad(end < start, "t_end {!r} is before its t_start", end)
    back = np.r_[False, (start[1:] < end[:-1]) & (rank[1:] == rank[:-1])]
    where.bad(back, "t_start {!r} is before the previous call's t_end", start)


class _Where:
    """Names the first offending row of a mask: file, rank, event."""

    def __init__(self, events: pd.DataFrame, path: str):
        self.events, self.path = events, path

    def bad(self, mask, what: str, values=None) -> None:
        """Raise TraceError for the first row of ``mask``: ``what``, its
        ``{}`` filled with that row's entry of ``values``."""
        mask = np.asarray(mask)
        if not mask.any():
            return
        i = int(np.argmax(mask))
        ev = self.events
        at = ""
        if "rank" in ev:
            at = f"rank {ev['rank'].iat[i]}" + (f", event {ev['seq'].iat[i]}" if "seq" in ev
                                               else "") + ": "
        if values is not None:
            what = what.format(values[i].item() if hasattr(values[i], "item") else values[i])
        raise TraceError(f"{self.path}: {at}{what}")


def _check_ranks(events: pd.DataFrame, meta: dict, where: _Where) -> None:
    size, path = meta["size"], where.path
    rank = events["rank"].to_numpy()
    where.bad((rank < 0) | (rank >= size),
              f"rank outside 0..{size - 1} (meta.json says {size} ranks)")
    where.bad(np.r_[False, np.diff(rank) < 0], "ranks are not in order")
    missing = sorted(set(range(size)) - set(np.unique(rank).tolist()))
    if missing and meta.get("complete", True) is not False:
        raise TraceError(f"{path}: no events of rank(s) {missing[:10]} in a trace that "
                         f"meta.json calls complete")
    if "seq" in events:
        seq = events["seq"].to_numpy()
        expect = events.groupby("rank", sort=False).cumcount().to_numpy()
        where.bad(seq != expect, "seq out of order or repeated (expected {})", expect)
    if isinstance(meta.get("ranks"), list):
        _check_rank_counts(events, meta["ranks"], path)


def _check_rank_counts(events: pd.DataFrame, ranks: list, path: str) -> None:
    """Each rank present has the events meta.json counted for it, and a
    complete rank ends with finalize (a trace cut short or with rows lost
    would otherwise read as a shorter run)."""
    rank = events["rank"].to_numpy()
    present, first, counts = np.unique(rank, return_index=True, return_counts=True)
    for r, i, n in zip(present.tolist(), first.tolist(), counts.tolist()):
        said = ranks[r].get("events")
        if said is not None and said != n:
            raise TraceError(f"{path}: rank {r}: {n} events, but meta.json counted {said}")
        if "op" in events and ranks[r].get("complete") and \
                events["op"].iat[i + n - 1] != "finalize":
            raise TraceError(f"{path}: rank {r}: its last event is "
                             f"{events['op'].iat[i + n - 1]!r}, not finalize, but meta.json "
                             f"calls the rank complete")


def check_comms(comms: pd.DataFrame, events: pd.DataFrame, meta: dict, path: str) -> None:
    """Check the communicator table: the columns stages use, one row per
    id, members world ranks, sizes that count them, and every communicator
    the events name present."""
    size = meta["size"]
    missing = [c for c in ("comm", "members", "size") if c not in comms.columns]
    if missing:
        raise TraceError(f"{path}: missing column(s) {', '.join(missing)}")
    dup = comms["comm"].duplicated()
    if dup.any():
        raise TraceError(f"{path}: communicator {comms['comm'][dup].iat[0]} appears twice")
    for c, members, n in zip(comms["comm"], comms["members"], comms["size"]):
        m = np.asarray(members if members is not None else [])
        if len(m) != n or (len(m) and ((m < 0) | (m >= size)).any()):
            raise TraceError(f"{path}: communicator {c}: its members are not {n} world ranks "
                             f"of 0..{size - 1}")
    for col in ("comm", "newcomm"):
        if col in events:
            named = set(np.unique(events[col].to_numpy()).tolist()) - {-1}
            lost = sorted(named - set(comms["comm"].tolist()))
            if lost:
                raise TraceError(f"{path}: communicator {lost[0]}, named by events "
                                 f"({col}), is not in the table")
