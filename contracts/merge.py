"""Merge the per-rank raw files of a trace into the contract's tables.

Works on complete and on crashed runs alike: a rank whose raw files are
truncated (killed, crashed) contributes every whole event it flushed, and
``meta.json`` marks it incomplete.  Ranks are processed one at a time and
written as row groups, so memory stays bounded by one rank's events.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from mpimodel import ops

from .output import write_json
from .raw_trace import FIELDS, FLAG_ANY_SOURCE, FLAG_ANY_TAG, N_INT_FIELDS, RECORD, rank_path
from .tables import MAX_SECONDS
from .trace import TraceError, file_there
from .trace_checks import check_events, read_meta

RAW_DTYPE = np.dtype([(f, "<i8") for f in FIELDS[:N_INT_FIELDS]]
                     + [(f, "<f8") for f in FIELDS[N_INT_FIELDS:]])
assert RAW_DTYPE.itemsize == RECORD.size

_I64_LIST = pa.list_(pa.int64())
EVENT_SCHEMA = pa.schema([
    ("rank", pa.int32()), ("seq", pa.int64()), ("op", pa.string()),
    ("comm", pa.int32()), ("peer", pa.int32()), ("wildcard", pa.bool_()),
    ("tag", pa.int32()), ("sbytes", pa.int64()), ("rbytes", pa.int64()),
    ("req", pa.int64()), ("reqs", _I64_LIST),
    ("comp", pa.float64()), ("cpu", pa.float64()),
    ("t_start", pa.float64()), ("t_end", pa.float64()), ("site", pa.int32()),
    ("rpeer", pa.int32()), ("rtag", pa.int32()), ("newcomm", pa.int32()),
    ("flags", pa.int16()), ("started", pa.string()),
    ("scounts", _I64_LIST), ("rcounts", _I64_LIST),
    ("polls", pa.int64()), ("poll_cpu", pa.float64()), ("poll_gap", pa.float64()),
    ("faults", pa.int64()),
])
# columns that traces merged by an older tracer lack: read as -1 (not counted)
LATER_COLUMNS = ("faults",)

COMMS_COLUMNS = ["comm", "key", "kind", "how", "members", "remote", "size", "parent_local",
                 "created_by_rank"]

# completions of one request, which keep its id in `req` while tracing
COMPLETIONS_ONE = ops.COMPLETE_ONE
# requests whose matched source, tag and size are known only at completion
RECV_REQUEST_OPS = ops.ops_of("irecv", "isendrecv") | {"start"}


SITES_COLUMNS = ["site", "file", "line", "function"]
TOPOLOGY_COLUMNS = ["comm", "rank", "sources", "destinations", "dims", "periods", "coords"]
TABLES = ("events.parquet", "comms.parquet", "sites.parquet", "topology.parquet")


def event_writer(path: str) -> pq.ParquetWriter:
    """A writer of events.parquet, one rank's rows per ``write_table``.
    Page checksums: a flipped byte is refused on reading, never read as
    another op (one turned rank 0's init into an isend, and every stage
    took it)."""
    return pq.ParquetWriter(path, EVENT_SCHEMA, compression="zstd", write_page_checksum=True)


def write_tables(out_dir: str, meta: dict, comms: pd.DataFrame, sites: pd.DataFrame,
                 topology: pd.DataFrame) -> None:
    """Finish a trace directory whose events.parquet is written: the three
    other tables, then meta.json (last: it carries every table's digest
    and marks the trace merged)."""
    comms.to_parquet(os.path.join(out_dir, "comms.parquet"), index=False,
                     write_page_checksum=True)
    sites.to_parquet(os.path.join(out_dir, "sites.parquet"), index=False,
                     write_page_checksum=True)
    topology.to_parquet(os.path.join(out_dir, "topology.parquet"), index=False,
                        write_page_checksum=True)
    meta["digests"] = {name: table_digest(os.path.join(out_dir, name)) for name in TABLES}
    meta["merged"] = True
    write_json(os.path.join(out_dir, "meta.json"), meta)


def table_digest(path: str) -> str:
    """SHA-256 of a table file: the page checksums cover the pages' data,
    not their headers or the footer (schema, page index), where one flipped
    byte can rename a column or cut a page short."""
    import hashlib
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def read_side(path: str):
    """All side records of one rank, and whether the file was cut short (a
    truncated last line is dropped; any other damage raises TraceError)."""
    records: list = []
    if not file_there(path, "the tracer", "raw trace"):
        return records, False
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    truncated = lines[-1] != b""            # the last flush did not finish
    for no, line in enumerate(lines[:-1], 1):
        try:
            chunk = json.loads(line)
        except ValueError:
            chunk = None
        if not isinstance(chunk, list) or not all(
                isinstance(r, list) and r and isinstance(r[0], str) for r in chunk):
            raise TraceError(f"{path}: line {no} is not a list of side records: the raw "
                             f"trace is damaged")
        records.extend(chunk)
    return records, truncated


def read_events(path: str) -> np.ndarray:
    if not file_there(path, "the tracer", "raw trace"):
        return np.zeros(0, RAW_DTYPE)
    size = os.path.getsize(path)
    n = size // RAW_DTYPE.itemsize      # a partially written last record is dropped
    return np.fromfile(path, dtype=RAW_DTYPE, count=n)


# a rank's raw .json: each key and its type (events and unmodelled once closed)
RANK_INFO_TYPES = {"rank": int, "host": str, "pid": int, "complete": bool, "status": str,
                   "events": int, "unmodelled": dict}
# written when the rank closes its trace: absent while it runs
AT_CLOSE = ("events", "unmodelled")
# optional at close: the process's CPU seconds and those of its threads
# besides the main one (instrument/writer.py: threads_cpu), and the calls
# another thread began while the rank was inside MPI (overlapped_calls)
THREAD_KEYS = ("cpu", "other_threads_cpu", "overlapped_calls")
# threads besides the main one above this share of a rank's CPU seconds,
# and above OTHER_THREADS_SECONDS, are said (trace_warnings): the tracer's
# own watcher and the clock's ticks (10 ms) stay below both
OTHER_THREADS_SHARE, OTHER_THREADS_SECONDS = 0.10, 0.25


def _valid_info(info, rank: int) -> bool:
    """Whether a rank's status file holds what the tracer writes there."""
    if not isinstance(info, dict) or type(info.get("rank")) is not int or info["rank"] != rank:
        return False
    running = info.get("status") == "running"
    for key, kind in RANK_INFO_TYPES.items():
        if not (running and key in AT_CLOSE) and not isinstance(info.get(key), kind):
            return False
    counts = (info.get("unmodelled") or {}).values()
    return all(type(v) is int and v >= 0 for v in counts) and (info.get("events") or 0) >= 0


def rank_info(trace_dir: str, rank: int, warn=None) -> dict:
    """A rank's raw status file, checked.  Missing (the rank never started)
    or damaged, the rank counts as incomplete; ``warn`` is told which."""
    path = rank_path(trace_dir, rank, "json")
    try:
        with open(path, "rb") as f:
            info = json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        # written when the rank starts: events without it mean a lost file
        if warn and os.path.exists(rank_path(trace_dir, rank, "ev")):
            warn(f"{path}: missing beside the rank's events; rank {rank} counts as "
                 f"incomplete")
        return {"rank": rank, "complete": False, "status": "missing"}
    except (OSError, ValueError, UnicodeDecodeError):
        info = None
    if not _valid_info(info, rank):
        if warn:
            warn(f"{path}: damaged; rank {rank} counts as incomplete")
        return {"rank": rank, "complete": False, "status": "damaged status file"}
    return info


class _Globals:
    """Global ids of communicators and call sites, assigned in rank order."""

    def __init__(self):
        self.comm_ids: dict[str, int] = {}
        self.comm_rows: list[dict] = []
        self.topo_rows: list[dict] = []
        self.site_ids: dict[tuple, int] = {}
        self.site_rows: list[dict] = []

    def comm(self, rank, rec):
        _, idx, key, kind, members, remote, parent_idx, how, topo = rec
        gid = self.comm_ids.get(key)
        if gid is None:
            gid = self.comm_ids[key] = len(self.comm_ids)
            self.comm_rows.append({"comm": gid, "key": key, "kind": kind, "how": how,
                                   "members": list(members), "remote": list(remote or []),
                                   "size": len(members), "parent_local": parent_idx,
                                   "created_by_rank": rank})
        if topo:
            row = {"comm": gid, "rank": rank, "sources": topo["sources"],
                   "destinations": topo["destinations"],
                   "dims": topo.get("dims", []), "periods": topo.get("periods", []),
                   "coords": topo.get("coords", [])}
            self.topo_rows.append(row)
        return gid

    def site(self, rec):
        key = tuple(rec[2:5])
        sid = self.site_ids.get(key)
        if sid is None:
            sid = self.site_ids[key] = len(self.site_ids)
            self.site_rows.append({"site": sid, "file": key[0], "line": key[1],
                                   "function": key[2]})
        return sid


def _int(v) -> bool:
    return type(v) is int


def _id(v) -> bool:
    return type(v) is int and v >= 0


def _int_list(v) -> bool:
    return isinstance(v, list) and all(type(x) is int and x >= 0 for x in v)


# each kind of side record: a check per field after the kind letter
SIDE_FIELDS = {
    "x": (_id, lambda v: isinstance(v, list) and len(v) > 0 and isinstance(v[0], str)),
    "f": (_int, _int, _int, _id),
    "s": (_id, lambda v: isinstance(v, str), _id, lambda v: isinstance(v, str)),
    "c": (_id, lambda v: isinstance(v, str), lambda v: isinstance(v, str), _int_list,
          lambda v: v is None or _int_list(v), lambda v: v is None or _int(v),
          lambda v: isinstance(v, str), lambda v: v is None or isinstance(v, dict)),
    "o": (lambda v: _id(v) and v < 4096, lambda v: isinstance(v, str)),
}


def _side_tables(side: list, rank: int, g: _Globals):
    """A rank's side records, by kind: op names (``o``), communicators
    (``c``, as global ids), call sites (``s``), per-event extras (``x``)
    and receive-request fix-ups (``f``)."""
    names: dict = {}
    comm_map: dict = {}
    site_map: dict = {}
    extras: dict = {}
    fixups: dict = {}
    for no, rec in enumerate(side):
        kind = rec[0]
        checks = SIDE_FIELDS.get(kind)
        if checks is None or len(checks) != len(rec) - 1 or \
                not all(ok(v) for ok, v in zip(checks, rec[1:])):
            raise TraceError(f"rank {rank}: side record {no} ({str(rec)[:80]}) is not a "
                             f"valid record: the raw trace is damaged")
        if kind == "x":
            extras.setdefault(rec[1], []).append(rec[2])
        elif kind == "f":
            fixups[rec[1]] = rec[2:]
        elif kind == "s":
            site_map[rec[1]] = g.site(rec)
        elif kind == "c":
            comm_map[rec[1]] = g.comm(rank, rec)
        elif kind == "o":
            names[rec[1]] = rec[2]
    return names, comm_map, site_map, extras, fixups


def _remap(values: np.ndarray, mapping: dict) -> np.ndarray:
    """Local ids to global ones (-1 where unknown).  Ids may be sparse
    (communicators made below Python number from 2**30)."""
    if not mapping:
        return np.where(values >= 0, -1, values)
    keys = np.array(sorted(mapping), dtype=np.int64)
    got = np.array([mapping[k] for k in keys], dtype=np.int64)
    pos = np.minimum(np.searchsorted(keys, values), len(keys) - 1)
    hit = (values >= 0) & (keys[pos] == values)
    out = np.full(len(values), -1, dtype=np.int64)
    out[hit] = got[pos[hit]]
    return out


def _op_names(op_codes: np.ndarray, names: dict) -> np.ndarray:
    """Each event's op name from its code (this run's names first)."""
    if not len(op_codes):
        return np.array([], dtype=object)
    limit = max(len(ops.NAMES), max(names, default=-1) + 1)
    table = np.array([names.get(c) or (ops.NAMES[c] if c < len(ops.NAMES) else "unknown")
                      for c in range(limit)] + ["unknown"], dtype=object)
    # a code no name stands for (a damaged file) reads "unknown", which the
    # events' check then reports
    return table[np.where((op_codes >= 0) & (op_codes < limit), op_codes, limit)]


def _extras(df: pd.DataFrame, ev: np.ndarray, op: np.ndarray, extras: dict, names: dict) -> None:
    """The list columns: completed requests, per-peer counts, started ops."""
    n = len(df)
    reqs: list[list] = [[] for _ in range(n)]
    scounts, rcounts, started = [None] * n, [None] * n, [None] * n
    # single-request completions keep their id in `req` while tracing
    one = np.isin(op, list(COMPLETIONS_ONE)) if n else np.zeros(0, bool)
    for i in np.nonzero(one & (ev["req"] >= 0))[0]:
        reqs[i] = [int(ev["req"][i])]
    df.loc[one, "req"] = -1
    for i, items in extras.items():
        if i >= n:
            continue
        for x in items:
            if x[0] == "r":
                reqs[i] = list(x[1])
            elif x[0] == "c":
                scounts[i], rcounts[i] = x[1], x[2]
            elif x[0] == "p":
                started[i] = names.get(x[1]) or ops.NAMES[x[1]]
                if x[2] is not None and x[2][0] == "c":
                    scounts[i], rcounts[i] = x[2][1], x[2][2]
    df["reqs"], df["scounts"], df["rcounts"], df["started"] = reqs, scounts, rcounts, started


def _fix_receives(df: pd.DataFrame, ev: np.ndarray, op: np.ndarray, fixups: dict) -> None:
    """Receive requests: what matched (source, tag, bytes) is only known at
    completion, which the tracer noted as a fix-up of the request."""
    if not fixups or not len(df):
        return
    started = df["started"].to_numpy()
    for i in np.nonzero(np.isin(op, list(RECV_REQUEST_OPS)) & (ev["req"] >= 0))[0]:
        fx = fixups.get(int(ev["req"][i]))
        if fx is None:
            continue
        source, tag, nb = fx
        if op[i] in ("isendrecv", "isendrecv_replace"):
            df.at[i, "rpeer"], df.at[i, "rtag"] = source, tag
        elif op[i] == "start" and started[i] != "irecv":
            continue
        else:
            df.at[i, "peer"], df.at[i, "tag"] = source, tag
        df.at[i, "rbytes"] = nb


def _source_frame(trace_dir: str, rank: int, g: _Globals, ev_ext: str, side_ext: str,
                  comms: dict) -> tuple[pd.DataFrame, dict]:
    """One source of a rank's events (the Python-level tracer's raw files,
    or the shim's of calls below Python) in the contract's columns, less
    ``seq``, ``comp`` and ``cpu`` (which need the whole stream); with its
    ``cpu_start``/``cpu_end`` kept for that.  ``comms``: communicator ids
    already known (the Python tracer's, which calls below Python use);
    returns the frame and the communicator map grown by this source's."""
    ev_path, side_path = rank_path(trace_dir, rank, ev_ext), rank_path(trace_dir, rank, side_ext)
    ev = read_events(ev_path)
    if len(ev) and not os.path.exists(side_path):
        # both are opened when the rank starts: events without it lost their
        # op names, communicators and call sites
        raise TraceError(f"{side_path}: missing, while rank {rank} wrote {len(ev)} events: "
                         f"the raw trace is damaged")
    side, cut = read_side(side_path)
    if cut:
        # the rank died while writing (or the file was cut): events that need
        # the lost records lose their call sites or request lists
        print(f"instrument: warning: {side_path}: cut short; the side records of rank "
              f"{rank}'s last events are lost", file=sys.stderr)
    names, comm_map, site_map, extras, fixups = _side_tables(side, rank, g)
    comm_map = {**comms, **comm_map}
    op = _op_names(ev["op"], names)
    # CPU time is never negative (it may step back: short spans are
    # estimated), and the merged table keeps only its differences, clipped:
    # checked here, with the folded polls' counts and times.  The wall
    # clock's order is checked on the merged table (checks.check_events,
    # which merge runs on every rank)
    wrong = ev["polls"] < 0
    for c in ("cpu_start", "cpu_end", "poll_cpu", "poll_gap"):
        wrong |= ~(np.isfinite(ev[c]) & (ev[c] >= 0) & (ev[c] <= MAX_SECONDS))
    if wrong.any():
        i = int(np.argmax(wrong))
        got = ", ".join(f"{c} {ev[c][i].item()!r}" for c in
                        ("cpu_start", "cpu_end", "polls", "poll_cpu", "poll_gap"))
        raise TraceError(f"{ev_path}: rank {rank}, event {i}: {got}: CPU times, poll counts "
                         f"and poll times must be finite, >= 0 and at most "
                         f"{MAX_SECONDS:g} s: the raw trace is damaged")
    n = len(ev)
    df = pd.DataFrame({
        "rank": np.full(n, rank, dtype=np.int32),
        "op": op,
        "comm": _remap(ev["comm"], comm_map),
        "peer": ev["peer"], "wildcard": (ev["flags"] & (FLAG_ANY_SOURCE | FLAG_ANY_TAG)) != 0,
        "tag": ev["tag"], "sbytes": ev["sbytes"], "rbytes": ev["rbytes"],
        "req": ev["req"],
        "t_start": ev["t_start"], "t_end": ev["t_end"],
        "site": _remap(ev["site"], site_map),
        "rpeer": ev["rpeer"], "rtag": ev["rtag"],
        "newcomm": _remap(ev["newcomm"], comm_map),
        "flags": ev["flags"].astype(np.int16),
        "polls": ev["polls"],
        "poll_cpu": ev["poll_cpu"], "poll_gap": ev["poll_gap"],
        "faults": ev["faults"],
        "cpu_start": ev["cpu_start"], "cpu_end": ev["cpu_end"],
    })
    _extras(df, ev, op, extras, names)
    _fix_receives(df, ev, op, fixups)
    return df, comm_map


def rank_frame(trace_dir: str, rank: int, g: _Globals) -> pd.DataFrame:
    """One rank's events as a DataFrame in the contract's columns: the
    Python-level tracer's, and the calls below Python where the shim traced
    them, interleaved in return order (as the tracer orders the calls of
    several threads)."""
    df, comms = _source_frame(trace_dir, rank, g, "ev", "side", {})
    if os.path.exists(rank_path(trace_dir, rank, "cev")):
        below, _ = _source_frame(trace_dir, rank, g, "cev", "cside", comms)
        if len(below):
            df = pd.concat([df, below], ignore_index=True) if len(df) else below
            df = df.sort_values("t_end", kind="stable").reset_index(drop=True)
    n = len(df)
    t_start, t_end = df["t_start"].to_numpy(), df["t_end"].to_numpy()
    cpu_start, cpu_end = df.pop("cpu_start").to_numpy(), df.pop("cpu_end").to_numpy()
    prev_end = np.concatenate([[0.0], t_end[:-1]]) if n else t_end
    prev_cpu = np.concatenate([[cpu_start[0]], cpu_end[:-1]]) if n else cpu_end
    df.insert(1, "seq", np.arange(n, dtype=np.int64))
    df.insert(list(df.columns).index("t_start"), "comp", np.maximum(t_start - prev_end, 0.0))
    df.insert(list(df.columns).index("t_start"), "cpu", np.maximum(cpu_start - prev_cpu, 0.0))
    return df


def merge(trace_dir: str, keep_raw: bool | None = None, quiet: bool = False,
          out_dir: str | None = None) -> dict:
    """Build events/comms/sites/topology parquet files and update meta.json.

    Returns the updated meta dictionary.  Raw files are removed after a merge
    in which every rank is complete (unless ``keep_raw``), kept otherwise.
    ``out_dir``: write the tables and meta.json there instead, leaving the
    trace directory as it is (what a reader that must not write does).
    """
    meta_path = os.path.join(trace_dir, "meta.json")
    if not os.path.exists(meta_path):
        raise TraceError(f"{meta_path}: no meta.json; is {trace_dir} a trace directory?")
    meta = read_meta(meta_path)
    size = meta["size"]
    in_place = out_dir is None
    out_dir = trace_dir if out_dir is None else out_dir
    g = _Globals()
    out = os.path.join(out_dir, "events.parquet")
    tmp = out + ".tmp"
    writer = event_writer(tmp)
    ranks = []
    unmodelled: dict[str, int] = {}
    total = 0
    try:
        for rank in range(size):
            info = rank_info(trace_dir, rank, warn=lambda m: print(
                f"instrument: warning: {m}", file=sys.stderr))
            try:
                df = rank_frame(trace_dir, rank, g)
                check_events(df, {"size": size, "complete": False},
                             rank_path(trace_dir, rank, "ev"))
                table = pa.Table.from_pandas(df, schema=EVENT_SCHEMA, preserve_index=False) \
                    if len(df) else None
            except (ValueError, TypeError, KeyError, IndexError, AttributeError,
                    pa.ArrowException) as e:
                # pyarrow's conversion errors are ValueErrors
                raise TraceError(f"{rank_path(trace_dir, rank, 'ev')}: rank {rank}: its raw "
                                 f"events and side records do not fit together "
                                 f"({type(e).__name__}: {e}): the raw trace is "
                                 f"damaged") from None
            complete = bool(info.get("complete"))
            if complete and info.get("events") not in (None, len(df)):
                complete = False
                info["status"] = (f"lost events: {info.get('events')} recorded, "
                                  f"{len(df)} readable")
                print(f"instrument: warning: rank {rank}: {info['status']}; it counts as "
                      f"incomplete", file=sys.stderr)
            if info.get("status") == "running":
                # nobody wrote its end: SIGKILL (the launcher's, after another
                # rank failed, or the batch system's), a crash, a lost node
                info["status"] = ("ended without closing its trace (SIGKILL, a crash of the "
                                  "interpreter, or a lost node)")
            for k, v in (info.get("unmodelled") or {}).items():
                unmodelled[k] = unmodelled.get(k, 0) + v
            ranks.append({"rank": rank, "host": info.get("host"), "pid": info.get("pid"),
                          "complete": complete, "status": info.get("status"),
                          "events": len(df)})
            for key in THREAD_KEYS:      # written at close since tracer 2026-11-28
                if isinstance(info.get(key), (int, float)) and info[key] >= 0:
                    ranks[-1][key] = float(info[key])
            total += len(df)
            if table is not None:
                writer.write_table(table)
            if not quiet and size >= 64 and rank % max(1, size // 10) == 0:
                print(f"instrument: merged rank {rank}/{size}", file=sys.stderr)
    except BaseException:
        writer.close()
        os.remove(tmp)              # no half-merged table left behind
        raise
    writer.close()
    os.replace(tmp, out)
    comms = pd.DataFrame(g.comm_rows, columns=COMMS_COLUMNS)
    sites = pd.DataFrame(g.site_rows, columns=SITES_COLUMNS)
    topo = pd.DataFrame(g.topo_rows, columns=TOPOLOGY_COLUMNS)
    meta["ranks"] = ranks
    meta["complete"] = all(r["complete"] for r in ranks)
    meta["incomplete_ranks"] = [r["rank"] for r in ranks if not r["complete"]]
    meta["hosts"] = sorted({r["host"] for r in ranks if r["host"]})
    meta["events"] = total
    meta["unmodelled"] = unmodelled
    ccount_files = sorted(glob.glob(os.path.join(trace_dir, "raw", "ccount*.tsv")))
    if ccount_files:
        # C-level call counts (--c-calls): kept beside the trace, and the
        # calls no Python-level event stands for named in meta.json
        from .raw_trace import read_counts
        counts = read_counts(ccount_files)
        counts.to_csv(os.path.join(out_dir, "c_calls.csv"), index=False)
        meta["invisible_calls"] = {str(r.function): int(r.invisible)
                                   for r in counts.itertuples() if r.invisible}
        meta["below_python_calls"] = {str(r.function): int(r.traced)
                                      for r in counts.itertuples() if r.traced}
        meta["c_calls_counted_ranks"] = len(ccount_files)
    write_tables(out_dir, meta, comms, sites, topo)
    if keep_raw is None:
        keep_raw = not meta["complete"]
    if in_place and not keep_raw:
        shutil.rmtree(os.path.join(trace_dir, "raw"), ignore_errors=True)
    return meta


def trace_warnings(meta: dict) -> dict:
    """What a merged trace's meta says later stages cannot account for, in
    words: ``{"invisible": ..., "below_python": ..., "threads": ...,
    "overlapped": ..., "unmodelled": ...}``
    (keys present only when there is something to say).  The tracer, ``show``, netsim and the report
    all say it this way."""
    def most(calls: dict) -> str:           # the most frequent functions, with counts
        top = sorted(calls.items(), key=lambda kv: -kv[1])[:8]
        return ", ".join(f"{k} x{v}" for k, v in top)

    out = {}
    calls = meta.get("invisible_calls") or {}
    if calls:
        out["invisible"] = (
            f"this application issues {sum(calls.values())} MPI calls the tracer cannot see "
            f"(made below Python, not through mpi4py: {most(calls)}); the prediction will be "
            f"wrong")
    below = meta.get("below_python_calls") or {}
    if below:
        what = ("of this compiled program were" if meta.get("native")
                else "made below Python were")
        out["below_python"] = (
            f"{sum(below.values())} MPI calls {what} traced "
            f"({most(below)}): the simulation includes them, and a replay answers them "
            f"from the C log that `instrument record` keeps beside the message log (where "
            f"it loads the PMPI shim)")

    def seconds(r, key) -> float:           # a damaged or older meta: nothing to say
        v = r.get(key) if isinstance(r, dict) else None
        return float(v) if isinstance(v, (int, float)) and v >= 0 else 0.0
    listed = meta.get("ranks")
    ranks: list = listed if isinstance(listed, list) else []
    threaded = [r for r in ranks
                if seconds(r, "other_threads_cpu") > max(OTHER_THREADS_SHARE * seconds(r, "cpu"),
                                                         OTHER_THREADS_SECONDS)]
    if threaded:
        share = (sum(seconds(r, "other_threads_cpu") for r in threaded)
                 / max(sum(seconds(r, "cpu") for r in threaded), 1e-9))
        out["threads"] = (
            f"{len(threaded)} of {len(ranks)} ranks ran "
            f"{100 * share:.0f} % of their CPU seconds on threads besides the main one (a "
            f"threaded BLAS, OpenMP): the trace's CPU seconds count those threads' work and, "
            f"where the threads outnumber the cores, their spinning for a turn, so they "
            f"overstate the computation wherever they stand for it (python -m extrapolate): "
            f"trace with one thread per rank (OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1) or "
            f"extrapolate replayed computation (--compute)")
    overlapped = [(r.get("rank"), int(seconds(r, "overlapped_calls"))) for r in ranks
                  if seconds(r, "overlapped_calls") > 0]
    if overlapped:
        out["overlapped"] = (
            f"{sum(k for _, k in overlapped)} MPI calls began on one thread while another "
            f"thread of the same rank was inside MPI ("
            + ", ".join(f"rank {r}: {k}" for r, k in overlapped[:8])
            + (", ..." if len(overlapped) > 8 else "")
            + "): a rank's trace is one sequence in the order its calls returned, each "
            "starting where the one before it ended, so the threads' overlap is not "
            "simulated (each such call waited, in the trace, for the one before it)")
    unmodelled = meta.get("unmodelled") or {}
    if unmodelled:
        out["unmodelled"] = (
            "calls no later stage models (not simulated: the prediction misses their "
            "traffic): " + ", ".join(f"{k} x{v}" for k, v in sorted(unmodelled.items())))
    return out


def needs_merge(trace_dir: str) -> bool:
    return not os.path.exists(os.path.join(trace_dir, "events.parquet")) and \
        bool(glob.glob(os.path.join(trace_dir, "raw", "r*.ev")))
