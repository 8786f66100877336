"""The trace at a target N, built from traces of the same application at
several small N (docs/METHODS.md, "Trace extrapolation").

1. Lay every small trace out on its process grid (layout.py) and cut its
   ranks into position classes, each with one sequence of calls in
   relative form (classes.py).
2. Match the classes across the small traces: the same classes, the same
   calls to the same relative peers on the same communicators; only the
   message sizes and the computation may change with N.
3. Fit the sizes exactly and the computation with its interval (fit.py).
4. Lay the target N out on the grid MPI_Dims_create gives it, give each
   rank its class's calls with the peers its offsets reach, and write the
   trace (contracts/merge.py's writers), marked ``extrapolated`` in
   meta.json.
"""
from __future__ import annotations

import copy
import datetime
import hashlib
import os
import shutil
import sys

import numpy as np
import pandas as pd
import pyarrow as pa

from contracts.compute import REP, ComputeError, read_compute
from contracts.merge import (
    COMMS_COLUMNS,
    EVENT_SCHEMA,
    TOPOLOGY_COLUMNS,
    event_writer,
    trace_warnings,
    write_tables,
)
from contracts.trace import TraceError, load_trace

from .classes import IDENTITY, ClassSequence, class_sequences, comm_roles, said
from .fit import UNEVEN, bytes_at, computation_at, total_model
from .layout import ExtrapolationError, Layout, grid_dims, layout_of

CHUNK_RANKS = 4096          # ranks built and written at once


def _say(msg: str) -> None:
    print(f"extrapolate: {msg}", file=sys.stderr, flush=True)


def _check_same_application(traces) -> None:
    argv = [t.meta["argv"] for t in traces]
    if len({a[0] if a else "" for a in argv}) > 1:
        raise ExtrapolationError(
            "the traces are of different applications: "
            + "; ".join(f"{t.path}: {a[0] if a else '?'}" for t, a in zip(traces, argv)))
    sizes = [t.size for t in traces]
    if len(set(sizes)) != len(sizes):
        raise ExtrapolationError(f"two traces have the same N ({sorted(sizes)}): give one "
                                 f"trace per N")
    bad = [t.path for t in traces if not t.meta.get("complete")]
    if bad:
        raise ExtrapolationError(f"{bad[0]}: the traced run did not finish (incomplete "
                                 f"ranks {traces[0].incomplete_ranks[:8]}): trace it again")


def _layouts(traces, target: int) -> tuple[list[Layout], Layout]:
    lays = [layout_of(t) for t in traces]
    first = lays[-1]
    for t, lay in zip(traces, lays):
        if len(lay.dims) != len(first.dims) or lay.periods != first.periods:
            raise ExtrapolationError(
                f"{t.path}: a {len(lay.dims)}-D grid (periods {list(lay.periods)}) where "
                f"{traces[-1].path} has a {len(first.dims)}-D one (periods "
                f"{list(first.periods)})")
    # an axis of extent 1 at every small N stays 1 (a slab decomposition)
    fixed = tuple(1 if all(lay.dims[j] == 1 for lay in lays) else 0
                  for j in range(len(first.dims))) if len(lays) > 1 else ()
    if fixed and not any(fixed):
        fixed = ()
    for t, lay in zip(traces, lays):
        want = grid_dims(t.size, lay, fixed)
        if lay.dims != want:
            raise ExtrapolationError(
                f"{t.path}: the application chose the grid {list(lay.dims)} for {t.size} "
                f"ranks, not MPI_Dims_create's {list(want)}: its grid at another N is "
                f"unknown")
    return lays, Layout(grid_dims(target, first, fixed), first.periods, first.grid_comm)


def _match(seqs: list[dict[str, ClassSequence]], traces, target_classes: set[str]) -> None:
    """The same classes at every N, each with the same calls."""
    names = set(seqs[-1])
    for t, s in zip(traces, seqs):
        if set(s) != names:
            miss = sorted(names ^ set(s))
            raise ExtrapolationError(
                f"{t.path}: position class(es) {miss} present at one N and missing at "
                f"another (a grid extent below 3 has no inside ranks): start from traces "
                f"whose every grid extent is at least 3")
    missing = target_classes - names
    if missing:
        raise ExtrapolationError(f"the target grid has position classes {sorted(missing)} "
                                 f"that no small trace shows")
    last = seqs[-1]
    for name in sorted(names):
        ref = last[name].calls
        for t, s in zip(traces[:-1], seqs[:-1]):
            c = s[name].calls
            if len(c) != len(ref):
                raise ExtrapolationError(
                    f"{t.path}: rank {s[name].members[0]} (position class {name}) makes "
                    f"{len(c)} calls, rank {last[name].members[0]} of {traces[-1].path} "
                    f"{len(ref)}: the number of calls changes with N (iterations, a task "
                    f"pool): not extrapolated")
            cols = IDENTITY + [x for x in ref.columns if x[0] in "pr" and x[1:].isdigit()]
            for col in cols:
                a, b = c[col].to_numpy(), ref[col].to_numpy()
                diff = np.flatnonzero(a != b)
                if len(diff):
                    i = int(diff[0])
                    raise ExtrapolationError(
                        f"{t.path}: rank {s[name].members[0]}, event {i} ({c['op'].iat[i]}): "
                        f"{said(col, a[i])}, and {said(col, b[i])} at rank "
                        f"{last[name].members[0]} of {traces[-1].path} (position class "
                        f"{name}): the calls change with N otherwise than in their sizes")


def _scaling_kind(sizes, totals) -> str:
    """strong, weak or between, from how a rank's computation changes with N."""
    lo, hi = float(np.mean(totals[0])), float(np.mean(totals[-1]))
    if lo <= 0 or hi <= 0:
        return "unknown"
    slope = np.log(hi / lo) / np.log(sizes[-1] / sizes[0])
    return "strong" if slope < -0.5 else "weak" if slope > -0.2 else "between"


def _key(role: str, rank: int) -> str:
    return hashlib.sha256(f"extrapolated:{role}:{rank}".encode()).hexdigest()[:16]


class _Target:
    """The communicator ids, comms and topology tables at the target N,
    numbered as the merge numbers them: in rank order, each rank's
    communicators in the order it met them (the world, its self, then
    those it made), an id for each one not met before."""

    def __init__(self, trace, layout: Layout, made: dict[str, list[str]],
                 class_of: list[str]):
        """``trace``: the largest small trace; ``made``: per position
        class, the roles of the communicators its ranks make, in order;
        ``class_of``: each target rank's position class."""
        n = layout.size
        roles, self.axes = comm_roles(trace, layout_of(trace))
        by_role = {roles[int(c)]: row for c, row in
                   zip(trace.comms["comm"], trace.comms.to_dict("records")) if int(c) in roles}
        ranks = np.arange(n)
        # per role, each rank's instance: 0 for world-wide ones, the rank
        # for its self, its slice's index for a slice
        self.instance = {"world": np.zeros(n, np.int64), "self": ranks}
        for role in {r for rs in made.values() for r in rs}:
            kept = self.axes.get(role)
            if kept is None:
                self.instance[role] = np.zeros(n, np.int64)
            else:
                fixed = [j for j in range(len(layout.dims)) if j not in kept]
                c = layout.coords(ranks)
                self.instance[role] = np.ravel_multi_index(
                    tuple(c[:, fixed].T), tuple(layout.dims[j] for j in fixed)) if fixed \
                    else np.zeros(n, np.int64)
        self.ids: dict[str, np.ndarray] = {r: np.full(int(v.max()) + 1, -1, np.int64)
                                           for r, v in self.instance.items()}
        # Cartesian communicators: the grid, and slices that Cart_sub made
        carts = trace.topology[[d is not None and len(d) > 0 for d in trace.topology["dims"]]] \
            if len(trace.topology) else trace.topology
        topo_roles = {roles[int(c)] for c in carts["comm"].unique()
                      if int(c) in roles and (roles[int(c)] in self.axes
                                              or int(c) == layout.grid_comm)}
        groups: dict[str, list] = {}
        for role, inst in self.instance.items():
            if role in self.axes:
                by = np.argsort(inst, kind="stable")
                groups[role] = np.split(ranks[by], np.cumsum(np.bincount(inst))[:-1])
        rows: list[dict] = []
        topo: list[pd.DataFrame] = []
        met = {name: ["world", "self"] + list(rs) for name, rs in made.items()}
        for rank in range(n):
            for role in met[class_of[rank]]:
                k = int(self.instance[role][rank])
                if self.ids[role][k] >= 0:
                    continue
                gid = len(rows)
                self.ids[role][k] = gid
                members = groups[role][k] if role in groups else \
                    np.array([rank]) if role == "self" else ranks
                r = dict(by_role[role])
                r.update(comm=gid, key=_key(role, k if role != "world" else -1),
                         members=members.tolist(), remote=[], size=len(members),
                         created_by_rank=rank)
                rows.append(r)
        self.comms = pd.DataFrame(rows, columns=COMMS_COLUMNS)
        for role in sorted(topo_roles & set(self.instance)):
            kept = self.axes.get(role, tuple(range(len(layout.dims))))
            topo.append(_slice_topology(layout, kept, self.ids[role][self.instance[role]],
                                        by_role[role]))
        self.topology = pd.concat(topo, ignore_index=True) if topo else \
            pd.DataFrame(columns=TOPOLOGY_COLUMNS)

    def comm_ids(self, roles: np.ndarray, ranks: np.ndarray) -> np.ndarray:
        out = np.full(len(roles), -2, np.int64)
        out[roles == "none"] = -1
        for role in set(roles.tolist()) - {"none"}:
            at = np.flatnonzero(roles == role)
            if role in self.ids:
                out[at] = self.ids[role][self.instance[role][ranks[at]]]
        return out

    def world_rank(self, roles: np.ndarray, ranks: np.ndarray, local: np.ndarray,
                   layout: Layout) -> np.ndarray:
        """The world ranks of ranks ``local`` within the callers' slices."""
        out = np.empty(len(ranks), np.int64)
        for role in set(roles.tolist()):
            at = np.flatnonzero(roles == role)
            kept = list(self.axes[role])
            c = layout.coords(ranks[at])
            c[:, kept] = np.stack(np.unravel_index(
                local[at], tuple(layout.dims[j] for j in kept)), axis=1)
            out[at] = np.ravel_multi_index(tuple(c.T), layout.dims)
        return out


def _slice_topology(layout: Layout, kept: tuple, comm_of: np.ndarray, proto: dict) -> pd.DataFrame:
    """Topology rows of a Cartesian communicator over each slice of the
    grid keeping ``kept`` (all axes: the grid itself): its dimensions,
    each rank's coordinates in it and its Cart_shift neighbours (world
    ranks)."""
    n = layout.size
    ranks = np.arange(n)
    dims = tuple(layout.dims[j] for j in kept)
    periods = tuple(layout.periods[j] for j in kept)
    cols = []
    for j in kept:
        step = np.zeros((n, len(layout.dims)), np.int64)
        step[:, j] = 1
        cols += [layout.ranks_at(ranks, -step), layout.ranks_at(ranks, step)]
    lists = np.stack(cols, axis=1).tolist() if cols else [[]] * n
    return pd.DataFrame({"comm": comm_of, "rank": ranks, "sources": lists,
                         "destinations": lists, "dims": [list(dims)] * n,
                         "periods": [list(periods)] * n,
                         "coords": layout.coords(ranks)[:, list(kept)].tolist()})


def _templates(seqs, traces, lays: list[Layout], target_layout: Layout, target: int,
               level: float, uneven: str = "refuse", measured: dict | None = None,
               host: list | None = None, reps: list | None = None):
    """Per class: its call table at the target (bytes fitted) and each
    call's cpu and comp there, with the totals' model and interval.
    ``measured``: per class, the variability its replayed representative
    showed on the target (:func:`_replayed_variability`), in place of its
    members' spread in the largest trace.  ``host`` and ``reps``: with
    replayed computation, each small trace's own CPU seconds per rank and
    each rank's representative; each class's totals are then the
    replays' speed pooled over the run times the trace's CPU
    (:func:`_pooled_totals`)."""
    last = seqs[-1]
    dims_by_n = [lay.dims for lay in lays]
    sizes = [t.size for t in traces]
    pooled = _pooled_totals(seqs, traces, host, reps) if host and reps else None
    out, report = {}, []
    for name in sorted(last):
        calls = last[name].calls.copy()
        where = f"{traces[-1].path}: rank {last[name].members[0]} (position class {name})"
        fitted = bytes_at([s[name].calls for s in seqs], dims_by_n, target_layout.dims, where,
                          uneven)
        calls["sbytes"], calls["rbytes"] = fitted["sbytes"], fitted["rbytes"]
        row = {"class": name, "calls": len(calls)}
        for col in ("cpu", "comp"):
            totals = pooled[name] if pooled else [getattr(s[name], col).sum(axis=1)
                                                  for s in seqs]
            try:
                model = total_model(sizes, totals)
            except ValueError as e:
                raise ExtrapolationError(f"{where}: its computation cannot be fitted over "
                                         f"N: {e}") from None
            pred, lo, hi = computation_at(model, target, level)
            per_call = getattr(last[name], col).mean(axis=0)
            share = per_call / per_call.sum() if per_call.sum() > 0 else per_call * 0
            calls[col] = pred * share
            row.update({f"{col}_total": pred, f"{col}_low": lo, f"{col}_high": hi})
            if measured:
                rep, factors, sigma_run, sigma = measured[name]
                row["variability_of"] = rep
            else:
                factors, sigma = _class_variability(getattr(last[name], col),
                                                    last[name].calls["op"].to_numpy())
                sigma_run = 0.0
            row.update({f"{col}_factors": factors, f"{col}_sigma_run": sigma_run,
                        f"{col}_sigma_span": sigma})
            if col == "cpu":
                row["model"] = model.describe()
                row["kind"] = _scaling_kind(sizes, totals)
        out[name] = calls
        report.append(row)
    return out, pd.DataFrame(report)


def _pooled_totals(seqs, traces, host: list, reps: list) -> dict:
    """Per class, its members' replayed totals at each small N as the
    run's pooled speed times their traced CPU seconds: each class's
    representative is replayed on its own, minutes apart from the others,
    and the same work came out 3.0-4.1 s at 64 in cg's three classes (one
    replay per class and N, the slowest class pacing the prediction:
    bench/probes/class_spread_probe.py), while the trace timed every rank
    at once (ranks' totals 0.3-3 % apart in a run, replays of the same
    work 4-8 %).  So the replays give the target's speed against the
    host's, over all of a run's representatives (their summed totals over
    the traced ones), and the trace how the work is spread over the
    classes, which run the same program: each rank's CPU seconds averaged
    over its representative's cluster (``reps``: each rank's), as the
    clustering judged those ranks alike."""
    out: dict = {name: [] for name in seqs[-1]}
    for s, t, h, rep_of in zip(seqs, traces, host, reps):
        replayed = t.events.groupby("rank")["cpu"].sum()
        speed = float(replayed.sum() / h.sum()) if h.sum() > 0 else 0.0
        h = h.groupby(rep_of.reindex(h.index).to_numpy()).transform("mean")
        for name in out:
            members = s[name].members
            out[name].append(speed * h.reindex(members).to_numpy(float) if speed > 0 else
                             replayed.reindex(members).to_numpy(float))
    return out


def _class_variability(x: np.ndarray, op: np.ndarray) -> tuple[list[float], float]:
    """How the members of one position class differ, in the largest small
    trace (``x``: members x events, seconds): each member's persistent
    speed as a factor of mean 1 (its total against the class's mean), and
    the span-to-span noise of a member's own: the robust standard
    deviation of its log spans around each span's median over the
    members, its level taken out (spans of at least MIN_SPAN, weighted by
    length, as the replay measures it between a representative's copies:
    replay/variability.py).  What a run at N waits for at every
    synchronisation is the slowest of its ranks, which the class's mean
    alone does not show."""
    from replay.variability import MIN_SPAN, _robust_sd, _weighted_median
    spans = np.asarray(x, float)[:, op != "init"]
    k = spans.shape[0]
    if k < 2 or not spans.size or (spans.sum(axis=1) <= 0).any():
        return [1.0] * max(k, 1), 0.0
    total = spans.sum(axis=1)
    factors = total / total.mean()
    use = (np.median(spans, axis=0) >= MIN_SPAN) & (spans > 0).all(axis=0)
    if not use.any():
        return [float(f) for f in factors], 0.0
    ls = np.log(spans[:, use])
    w = np.median(spans[:, use], axis=0)
    resid = ls - np.median(ls, axis=0)
    for m in range(k):
        resid[m] -= _weighted_median(resid[m], w)
    # each span's centre is fitted over the k members
    sigma = _robust_sd(resid, np.tile(w, (k, 1))) * np.sqrt(k / (k - 1))
    return [float(f) for f in factors], float(sigma)


def _replayed_variability(path: str, seqs: dict, rep_of: pd.Series, where: str) -> dict:
    """Per class of the largest small run (``seqs``), the variability that
    its members' representative showed where it was replayed: the
    variability table at ``path`` (replay.expand --variability), each
    class taking the rows of the representative of most of its members
    (``rep_of``: each rank's representative).  Returns ``{class:
    (representative, core factors, sigma_run, sigma_span)}``.  A replayed
    small run's members all compute as their representative did, so
    their spread says nothing; the copies' does: the target's cores and
    runs, as the full-scale prediction samples them (netsim
    --variability)."""
    from contracts.variability import VariabilityError, read_variability
    try:
        table = read_variability(path)
    except VariabilityError as e:
        raise ExtrapolationError(str(e)) from None
    out = {}
    for name, seq in seqs.items():
        counts = rep_of.reindex(seq.members).value_counts()
        # the most members; a tie to the lowest rank
        rep = int(min(counts.index[counts == counts.max()])) if len(counts) else \
            int(seq.members[0])
        rows = table[table["representative"] == rep].sort_values("copy")
        if rows.empty:
            raise ExtrapolationError(
                f"{path}: no rows for representative {rep}, which stands for position "
                f"class {name} in {where}: give the variability table written beside "
                f"that run's computation table (replay.expand --variability)")
        out[name] = (rep, [float(f) for f in rows["factor"]], float(rows["sigma_run"].iat[0]),
                     float(rows["sigma_span"].iat[0]))
    return out


def _chunk(ranks: np.ndarray, cls: np.ndarray, stacked: pd.DataFrame, start: np.ndarray,
           length: np.ndarray, layout: Layout, target: _Target) -> pa.Table:
    """The event rows of ``ranks`` (in order; ``cls``: each one's class index)."""
    lens = length[cls]
    total = int(lens.sum())
    first_row = np.cumsum(lens) - lens
    local = np.arange(total) - np.repeat(first_row, lens)
    t = stacked.iloc[np.repeat(start[cls], lens) + local]
    rank = np.repeat(ranks, lens)
    nd = len(layout.dims)
    cols: dict = {"rank": rank, "seq": t["seq"].to_numpy()}
    for who, kcol, acol in (("peer", "pk", "pabs"), ("rpeer", "rk", "rabs")):
        k = t[kcol].to_numpy()
        peer = np.where(k == 2, t[acol].to_numpy(), -1)
        rel = np.flatnonzero(k == 1)
        if len(rel):
            off = np.stack([t[f"{who[0]}{j}"].to_numpy()[rel] for j in range(nd)], axis=1)
            at = layout.ranks_at(rank[rel], off)
            if (at < 0).any():
                i = rel[int(np.argmax(at < 0))]
                raise ExtrapolationError(
                    f"rank {rank[i]}, event {t['seq'].iat[i]} ({t['op'].iat[i]}): its "
                    f"peer's offset leads off the grid {list(layout.dims)}")
            peer[rel] = at
        cols[who] = peer
    k3 = np.flatnonzero(t["pk"].to_numpy() == 3)
    if len(k3):                     # a root given as its rank within the caller's slice
        cols["peer"][k3] = target.world_rank(t["crole"].to_numpy()[k3], rank[k3],
                                             t["pabs"].to_numpy()[k3], layout)
    cols["comm"] = target.comm_ids(t["crole"].to_numpy(), rank)
    cols["newcomm"] = target.comm_ids(t["nrole"].to_numpy(), rank)
    cols["newcomm"][t["nrole"].to_numpy() == "none"] = -1
    for c in ("op", "wildcard", "tag", "sbytes", "rbytes", "req", "comp", "cpu", "site",
              "rtag", "flags", "polls", "t_start", "t_end"):
        cols[c] = t[c].to_numpy()
    cols["started"] = [s or None for s in t["started"]]
    cols["reqs"] = [list(x) for x in t["reqs"]]
    for c in ("scounts", "rcounts"):
        cols[c] = [None if x is None else list(x) for x in t[c]]
    cols["poll_cpu"] = np.zeros(total)
    cols["poll_gap"] = np.zeros(total)
    cols["faults"] = np.full(total, -1, dtype=np.int64)      # not counted: no run made them
    return pa.Table.from_pydict({f.name: cols[f.name] for f in EVENT_SCHEMA}, schema=EVENT_SCHEMA)


def _replace_computation(trace, path: str, column: str = "comp") -> pd.Series:
    """Put the computation table at ``path`` (one time per event of
    ``trace``: replay.expand's compute.csv) in place of the trace's own
    CPU and wall seconds: its ``column`` (``comp``, the kept replay's
    spans, or ``mean``, each span's mean over the copies and rounds).
    Returns each rank's representative (a Series by rank)."""
    try:
        band = read_compute(path, trace.events[["rank", "seq"]], band=True)
    except ComputeError as e:
        raise ExtrapolationError(f"{e} (the computation given for {trace.path})") from None
    trace.events["cpu"] = band[column].to_numpy(float)
    trace.events["comp"] = band[column].to_numpy(float)
    return pd.Series(band[REP].to_numpy(np.int64),
                     index=trace.events["rank"].to_numpy()).groupby(level=0).first()


def _load(paths: list[str], compute: list[str] | None,
          column: str = "comp") -> tuple[list, list[int], list, list]:
    """The traces, smallest N first, each with its computation table's times
    where ``compute`` gives them (its ``column``), the order (indices into
    ``paths``) and, with ``compute``, each trace's representative of each
    rank and its own CPU seconds per rank (Series by rank)."""
    if compute is not None and len(compute) != len(paths):
        raise ExtrapolationError(f"{len(compute)} computation tables for {len(paths)} "
                                 f"traces: give one per trace, in the traces' order")
    try:
        loaded = [load_trace(p) for p in paths]
    except TraceError as e:
        raise ExtrapolationError(str(e)) from None
    host = [t.events.groupby("rank")["cpu"].sum() for t in loaded] if compute else []
    reps = [_replace_computation(t, c, column) for t, c in zip(loaded, compute or [])]
    order = sorted(range(len(paths)), key=lambda i: loaded[i].size)
    traces = [loaded[i] for i in order]
    _check_same_application(traces)
    for t in traces if not compute else []:
        threads = trace_warnings(t.meta).get("threads")
        if threads:
            _say(f"warning: {t.path}: {threads}")
    return (traces, order, [reps[i] for i in order] if reps else [],
            [host[i] for i in order] if host else [])


def extrapolate(paths: list[str], target: int, out: str, force: bool = False,
                level: float = 0.9, uneven: str = "refuse",
                compute: list[str] | None = None, variability: str | None = None) -> dict:
    """Write the trace of ``target`` ranks extrapolated from the traces at
    ``paths`` into ``out``; returns its meta.json.  ``uneven``: a message
    size that splits with a remainder at the target is refused, floored
    or rounded (extrapolate/fit.py, :func:`predict_bytes`).  ``compute``:
    one computation table per trace, in the order of ``paths`` (each
    small run's representatives replayed on the target and expanded,
    replay.expand), extrapolated in place of the traces' CPU seconds.
    ``variability``: the largest small run's variability table (beside
    its computation table): each class then carries its representative's
    measured variability, and the spans' means over the copies and
    rounds are extrapolated (what that variability is sampled around)."""
    if uneven not in UNEVEN:
        raise ExtrapolationError(f"uneven: {uneven!r}, not one of {', '.join(UNEVEN)}")
    if len(paths) < 2:
        raise ExtrapolationError("give traces at two N at least (three or more to judge the "
                                 "fits)")
    if variability and not compute:
        raise ExtrapolationError("a variability table needs the computation tables it was "
                                 "measured with (--compute): the traces' own spread is "
                                 "their members'")
    traces, order, reps, host = _load(paths, compute, "mean" if variability else "comp")
    paths = [paths[i] for i in order]
    if target <= traces[-1].size:
        _say(f"warning: the target N={target} is not beyond the largest trace "
             f"(N={traces[-1].size})")
    if os.path.exists(out) and os.listdir(out) and not force:
        raise ExtrapolationError(f"{out}: exists and is not empty (--force replaces it)")
    lays, target_layout = _layouts(traces, target)
    _say(f"grids {', '.join('x'.join(map(str, lay.dims)) for lay in lays)} -> "
         f"{'x'.join(map(str, target_layout.dims))}")
    seqs = [class_sequences(t, lay) for t, lay in zip(traces, lays)]
    target_names = target_layout.position_classes(np.arange(target))
    _match(seqs, traces, set(target_names))
    measured = _replayed_variability(variability, seqs[-1], reps[-1], traces[-1].path) \
        if variability else None
    templates, report = _templates(seqs, traces, lays, target_layout, target, level, uneven,
                                   measured, host, reps)
    names = sorted(templates)
    for calls in templates.values():
        comp = calls["comp"].to_numpy()
        calls["t_start"] = np.cumsum(comp)
        calls["t_end"] = calls["t_start"]
    stacked = pd.concat([templates[n] for n in names], ignore_index=True)
    length = np.array([len(templates[n]) for n in names])
    start = np.cumsum(length) - length
    index = {n: i for i, n in enumerate(names)}
    cls_of = np.array([index[n] for n in target_names])
    made = {n: [r for r in templates[n]["nrole"] if r not in ("none", "part")] for n in names}
    tgt = _Target(traces[-1], target_layout, made, target_names)
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    writer = event_writer(os.path.join(tmp, "events.parquet"))
    try:
        for lo in range(0, target, CHUNK_RANKS):
            ranks = np.arange(lo, min(target, lo + CHUNK_RANKS))
            writer.write_table(_chunk(ranks, cls_of[ranks], stacked, start, length,
                                      target_layout, tgt))
            if target >= 8 * CHUNK_RANKS and (lo // CHUNK_RANKS) % 8 == 0:
                _say(f"wrote ranks {lo}..{ranks[-1]} of {target}")
    except BaseException:
        writer.close()
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    writer.close()
    meta = _meta(traces, target, target_layout, length[cls_of], report, paths, level)
    meta["extrapolated"]["uneven"] = uneven
    meta["extrapolated"]["computation"] = (
        [compute[i] for i in order] if compute else "the traces' CPU seconds")
    meta["extrapolated"]["variability"] = (
        variability if variability else
        "the members' spread in the computation tables" if compute else
        "the members' spread in the largest trace")
    sites = traces[-1].sites
    write_tables(tmp, meta, tgt.comms, sites, tgt.topology)
    if os.path.exists(out):
        shutil.rmtree(out)
    os.replace(tmp, out)
    return meta


def _meta(traces, target: int, layout: Layout, events: np.ndarray, report: pd.DataFrame,
          paths, level: float) -> dict:
    base = traces[-1].meta
    meta = {k: copy.deepcopy(v) for k, v in base.items()
            if k not in ("digests", "invisible_calls", "below_python_calls",
                         "c_calls_counted_ranks")}
    now = datetime.datetime.now(datetime.UTC).isoformat()
    grow = target / traces[-1].size
    meta.update(size=target, start=now, end=now, complete=True, merged=True,
                incomplete_ranks=[], hosts=["extrapolated"], events=int(events.sum()),
                unmodelled={k: int(round(v * grow)) for k, v in base["unmodelled"].items()},
                ranks=[{"rank": r, "host": "extrapolated", "pid": -1, "complete": True,
                        "status": "complete", "events": int(e)} for r, e in enumerate(events)])
    kinds = set(report["kind"])
    meta["extrapolated"] = {
        "from": [{"path": p, "size": t.size} for p, t in zip(paths, traces)],
        "grid": list(layout.dims), "periods": list(layout.periods),
        "scaling": kinds.pop() if len(kinds) == 1 else "mixed",
        "level": level,
        "classes": [{k: (float(v) if isinstance(v, (float, np.floating)) else
                         int(v) if isinstance(v, (np.integer,)) else v)
                     for k, v in row.items()} for row in report.to_dict("records")],
    }
    return meta
