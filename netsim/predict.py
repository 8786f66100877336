"""Run a schedule on a platform and turn the result into a prediction.

Per rank (JSON ``ranks`` and :attr:`Result.per_rank`):

* ``computation``: seconds of CALC ops;
* ``waiting``: seconds blocked on a partner that was late: a receive
  posted before its sender started waits until that start; a collective
  member waits for the last member to arrive;
* ``communication``: the rest of the rank's time up to its finish
  (overheads, transfers, collective costs, not hidden by computation);
* ``finish``: when the rank's last op completed.

``predicted_time`` is the latest finish (seconds from MPI init).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numba import njit

if TYPE_CHECKING:
    import pandas as pd

from . import engine
from .engine import CALC, COLL, RECV, SEND
from .schedule import Schedule, ScheduleError


@dataclass
class Result:
    predicted_time: float
    ranks: dict                       # rank, computation, communication, waiting, finish:
    start: np.ndarray                 # one numpy array each, one entry per rank
    end: np.ndarray
    events: int
    seconds: float                    # wall time of the engine
    # with a topology: per link carrying anything, its name, seconds busy and
    # that over the predicted time (``link``, ``busy``, ``load``), busiest first
    links: pd.DataFrame | None = None

    @property
    def per_rank(self) -> pd.DataFrame:
        """``ranks`` as a table (pandas is imported only here: a simulation
        from a GOAL file needs none of it)."""
        import pandas as pd
        return pd.DataFrame(self.ranks)


def run(s: Schedule, platform) -> Result:
    """Simulate; raises ScheduleError with a report of blocked ranks on deadlock.

    The dependency graph is built inside the engine's call, so that its
    arrays are gone before the breakdown allocates its own."""
    core = platform.core_of(s.nranks)
    span, lat, bt = platform.level_arrays()
    if platform.semantics == "loggopsim":
        return _run_loggops(s, platform, lat[0], bt)
    # each message's time on the wire, from the network model (send rows)
    sends = s.kind == SEND
    # the protocol per message: eager up to the limit, rendezvous over it; a
    # synchronous send up to it moves its data eagerly and completes when
    # the receiver acknowledges the match
    eager = sends & (s.size <= platform.eager_limit)
    ack = eager & s.sync
    wire = np.zeros(len(s.kind))
    wire[sends] = platform.wire(core[s.rank[sends]], core[s.peer[sends]], s.size[sends],
                                rendezvous=~eager[sends])
    # how long each holds its NIC (the same array unless a level has a stream curve)
    occupy = wire
    if any(lv.stream for lv in platform.levels):
        occupy = np.zeros(len(s.kind))
        occupy[sends] = platform.occupancy(core[s.rank[sends]], core[s.peer[sends]],
                                           s.size[sends], wire[sends])
    if any(lv.warmup for lv in platform.levels):
        # a new connection is slower on the wire, not on the NIC: other
        # connections may use the NIC meanwhile
        occupy = occupy.copy() if occupy is wire else occupy
        wire[sends] += _warmup(s, sends, core, platform)
    if s.held is not None:
        # data its sender moves only at its polls (schedule._held_by_polls)
        # (on the wire, not on the NIC: a new array, occupy keeps its own)
        wire = wire + s.held
    ctx, coll = np.ascontiguousarray(s.ctx), np.ascontiguousarray(s.coll)
    route, route_ptr, route_links, link_lat, link_bt = _routes(s, sends, core, platform)
    sharing = platform.topology.sharing if platform.topology is not None else "queues"
    (start, end, matched, coll_last, busy, events), secs = _with_room(
        # numba's compiled functions: mypy cannot count the unpacked graph
        s, lambda graph, room: engine.simulate(  # type: ignore[call-arg]
            s.kind, s.rank, s.peer, s.size, s.tag, ctx, s.dur, coll, s.coll_need, *graph, core,
            platform.cores_per_node, span, lat, wire, occupy, platform.o_send, platform.o_recv,
            platform.O_send, platform.O_recv, platform.gap, eager, s.reply, ack,
            platform.contention,
            s.nranks, room, route, route_ptr, route_links, link_lat, link_bt, bt,
            sharing in ("flows", "rtt_flows"), sharing == "rtt_flows",
            platform.topology.reach if platform.topology is not None else 0))
    if np.isnan(end).any():
        raise ScheduleError(deadlock_report(s, start, end, matched))
    _finite(end)
    predicted = float(end.max()) if len(end) else 0.0
    return Result(predicted, _breakdown(s, start, end, matched, coll_last), start, end,
                  int(events), secs, _link_loads(platform, busy, predicted))


def _routes(s: Schedule, sends: np.ndarray, core: np.ndarray, platform):
    """The topology lowered for this run (netsim/topology.py): per op its
    route (-1: none; an empty array without a topology), the routes' links
    as compressed rows, each link's latency and its byte time (0: the
    message's level's).
    Routes are computed once per pair of nodes that exchanges a message,
    not per message."""
    topo = platform.topology
    if topo is None:
        return (np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int64),
                np.zeros(0), np.zeros(0))
    from .topology import lower
    nnodes = platform.nodes
    route = np.full(len(s.kind), -1, np.int64)
    idx = np.flatnonzero(sends)
    cpn = platform.cores_per_node
    route[idx], ptr, links = lower(topo, core[s.rank[idx]] // cpn, core[s.peer[idx]] // cpn,
                                   nnodes)
    return route, ptr, links, topo.latencies(nnodes), topo.byte_times(nnodes)


def _link_loads(platform, busy: np.ndarray, predicted: float):
    """The links that carried anything, busiest first (Result.links)."""
    if platform.topology is None:
        return None
    import pandas as pd
    used = np.flatnonzero(busy > 0)
    used = used[np.argsort(-busy[used], kind="stable")]
    return pd.DataFrame({"link": platform.topology.link_names(used, platform.nodes),
                         "busy": busy[used],
                         "load": busy[used] / predicted if predicted > 0 else 0.0})


def _finite(end: np.ndarray) -> None:
    """A simulation whose times overflowed is refused, not written as an
    infinite prediction its own reader would refuse later."""
    if len(end) and not np.isfinite(end).all():
        raise ScheduleError("the simulated times overflowed (an operation ends at infinity): "
                            "a platform value or a computation time is far too large")


def _warmup(s: Schedule, sends: np.ndarray, core: np.ndarray, platform) -> np.ndarray:
    """Seconds of connection warm-up each SEND adds (platform.warmup_extra),
    the connection being the ordered pair of ranks, its earlier bytes
    those of the pair's earlier sends in the schedule's order (a rank's ops
    are in call order), and its first send the one that opens it."""
    idx = np.flatnonzero(sends)
    if not len(idx):
        return np.zeros(0)
    src, dst = s.rank[idx].astype(np.int64), s.peer[idx].astype(np.int64)
    size = s.size[idx].astype(np.float64)
    order = np.lexsort((idx, dst, src))             # by connection, then in order
    pair = (src * s.nranks + dst)[order]
    sent = np.cumsum(size[order]) - size[order]     # bytes of all sends before, sorted
    starts = np.flatnonzero(np.r_[True, pair[1:] != pair[:-1]])
    before = np.empty(len(idx))                     # less those of earlier connections
    before[order] = sent - np.repeat(sent[starts], np.diff(np.r_[starts, len(pair)]))
    first = np.zeros(len(idx), bool)
    first[order[starts]] = True
    level = platform.level_of(core[src], core[dst])
    return platform.warmup_extra(level, before, size, first)


def _with_room(s: Schedule, simulate):
    """``simulate(graph, room)``, an engine's run, with a heap of ``room``
    entries, run again with four times the room while that is too little.
    The graph is built for each run (the engine counts its dependencies
    down) and gone when this returns.  Returns (what the engine returned,
    seconds in the engine)."""
    most = len(s) + int(np.count_nonzero(s.kind == SEND)) + 1
    room, secs = 0, 0.0
    while True:
        graph = s.graph()
        room = min(most, 4 * room if room else engine.heap_room(graph, s.nranks, most))
        t0 = time.perf_counter()
        out = simulate(graph, room)
        secs += time.perf_counter() - t0
        if out[-1] != engine.OUT_OF_ROOM:
            return out, secs


def _run_loggops(s, platform, L, bt) -> Result:
    G = bt[0]
    from .loggops import MAX_OPS, simulate_loggops
    if len(s) > MAX_OPS:
        raise ScheduleError(f"loggopsim semantics run at most {MAX_OPS} operations, not "
                            f"{len(s)}: use a platform without them")
    if (s.kind == COLL).any():
        raise ScheduleError("loggopsim semantics have no analytic collectives: choose "
                            "decomposed algorithms (collectives: {default: binomial})")
    if (platform.rendezvous_byte_times() != bt).any():
        raise ScheduleError("loggopsim semantics take one G: drop rendezvous_byte_time")
    if platform.o_send != platform.o_recv or platform.O_send != platform.O_recv:
        raise ScheduleError("loggopsim semantics take one o and one O for sends and receives")
    ctx = np.ascontiguousarray(s.ctx)
    (start, end, matched, finish, events), secs = _with_room(
        s, lambda graph, room: simulate_loggops(  # type: ignore[call-arg]
            s.kind, s.rank, s.peer, s.size, s.tag, ctx, s.dur, *graph, s.nranks, L,
            platform.o_send, platform.gap, G, platform.O_send, platform.eager_limit, room))
    if np.isnan(end).any():
        raise ScheduleError(deadlock_report(s, start, end, matched))
    _finite(end)
    return Result(float(finish.max()) if len(finish) else 0.0,
                  _breakdown(s, start, end, matched, np.zeros(0), finish), start, end,
                  int(events), secs)


def _breakdown(s, start, end, matched, coll_last, finish=None) -> dict:
    n = s.nranks
    comp, waiting, last_end = _tally(s.kind, s.rank, s.dur, start, end, matched, n)
    if len(coll_last):
        cl = s.kind == COLL
        wait = np.clip(coll_last[s.coll[cl]] - start[cl], 0.0, None)
        waiting += np.bincount(s.rank[cl], weights=wait, minlength=n)
    if finish is None:
        finish = last_end
    comm = np.clip(finish - comp - waiting, 0.0, None)
    return {"rank": np.arange(n), "computation": comp, "communication": comm,
            "waiting": waiting, "finish": finish}


def _tally(kind, rank, dur, start, end, matched, nranks):
    """Per rank: seconds of computation, seconds it waited for a late
    sender, and when its last op ended.  A receive waits from its start to
    its sender's start (at most its own duration); the receives a rank has
    posted at once wait together, so its waiting is the union of those
    spans, not their sum (which could exceed the run)."""
    comp, last = _comp_last(kind, rank, dur, end, nranks)
    rv = np.flatnonzero((kind == RECV) & (matched >= 0))
    # the receives by rank, then start; the spans are made in _union, one
    # at a time: per-receive temporaries raised the peak at 262,144 ranks
    order = np.lexsort((start[rv], rank[rv]))
    return comp, _union(rv, order, rank, start, end, matched, nranks), last


@njit(cache=True)
def _comp_last(kind, rank, dur, end, nranks):
    """Per rank: seconds of computation and when its last op ended.  One
    pass, no per-op temporaries (they raised the process's peak at 262,144
    ranks)."""
    comp = np.zeros(nranks)
    last = np.zeros(nranks)
    for i in range(len(kind)):
        r = rank[i]
        if kind[i] == CALC:
            comp[r] += dur[i]
        if end[i] > last[r]:
            last[r] = end[i]
    return comp, last


@njit(cache=True)
def _union(rv, order, rank, start, end, matched, nranks):
    """Per rank, the length of the union of its receives' waits: receive
    ``rv[order[i]]`` waits from its start to its sender's start, at most
    its own duration; ``order`` sorts them by rank, then start."""
    out = np.zeros(nranks)
    reach = -np.inf
    last = -1
    for i in range(len(order)):
        j = rv[order[i]]
        r = rank[j]
        if r != last:
            reach, last = -np.inf, r
        a = start[j]
        b = a + min(max(start[matched[j]] - a, 0.0), end[j] - a)
        lo = max(a, reach)
        if b > lo:
            out[r] += b - lo
            reach = b
    return out


def deadlock_report(s: Schedule, start, end, matched, events=None, limit: int = 20) -> str:
    """Which ranks are blocked and on what (first unfinished op per rank)."""
    undone = np.nonzero(np.isnan(end))[0]
    ranks = np.unique(s.rank[undone])
    lines = [f"the simulation cannot finish: {len(ranks)} rank(s) blocked "
             f"(deadlock or inconsistent trace)"]
    for r in ranks[:limit]:
        ops = undone[s.rank[undone] == r]
        # the first op that was ready (started) but never finished, else the first
        started = ops[~np.isnan(start[ops])]
        op = started[0] if len(started) else ops[0]
        k = s.kind[op]
        what = {CALC: "computation", SEND: "send", RECV: "receive", COLL: "collective"}[int(k)]
        coll = " (collective traffic)" if s.ctx[op] % 2 else ""
        comm = s.ctx[op] // 2
        if k == RECV:
            src = "any source" if s.peer[op] < 0 else f"rank {s.peer[op]}"
            tag = "any tag" if s.tag[op] < 0 else f"tag {s.tag[op]}"
            desc = f"waits for a message from {src}, {tag}, {s.size[op]} B on comm {comm}{coll}"
        elif k == SEND:
            desc = (f"its send to rank {s.peer[op]} ({s.size[op]} B, tag {s.tag[op]}, comm "
                    f"{comm}{coll}) is never received")
        elif k == COLL:
            desc = (f"waits in collective #{s.coll[op]} on comm {comm} for members that "
                    f"never arrive ({int(s.coll_need[s.coll[op]])} expected)")
        else:
            desc = "cannot start its computation (an earlier call never completed)"
        if np.isnan(start[op]):
            desc += " [not reached: an earlier call of this rank never completed]"
        ev = int(s.event[op])
        seq = int(s.seq_of[ev]) if s.seq_of is not None and ev >= 0 else ev
        lines.append(f"  rank {r}: event {seq}: {what}: {desc}")
    if len(ranks) > limit:
        lines.append(f"  ... and {len(ranks) - limit} more rank(s)")
    return "\n".join(lines)


def write_timeline(path: str, s: Schedule, res: Result, max_ranks: int = 64,
                   max_ops: int = 200_000) -> None:
    """Chrome trace event JSON (opens in Perfetto / chrome://tracing)."""
    names = {CALC: "compute", SEND: "send", RECV: "recv", COLL: "collective"}
    sel = np.nonzero(s.rank < max_ranks)[0][:max_ops]
    evs = []
    for i in sel:
        k = int(s.kind[i])
        dur = (res.end[i] - res.start[i]) * 1e6
        if k == CALC and dur <= 0:
            continue
        args = {"event": int(s.event[i])}
        if k in (SEND, RECV):
            args.update(peer=int(s.peer[i]), bytes=int(s.size[i]), tag=int(s.tag[i]))
        evs.append({"name": names[k] + (f" {int(s.peer[i])}" if k in (SEND, RECV) else ""),
                    "cat": names[k], "ph": "X", "pid": 0, "tid": int(s.rank[i]),
                    "ts": res.start[i] * 1e6, "dur": dur, "args": args})
    meta = [{"name": "thread_name", "ph": "M", "pid": 0, "tid": int(r),
             "args": {"name": f"rank {r}"}} for r in range(min(s.nranks, max_ranks))]
    from contracts.output import write_json
    write_json(path, {"traceEvents": meta + evs, "displayTimeUnit": "ns"}, indent=None)
