"""Task pools dealt anew in the simulation, as a real pool deals them.

A master that takes results from any source and sends the next task to
whoever answered deals its tasks by arrival: which worker did which task
is a property of the traced run (the host's speeds), not of the program.
Simulated with the traced schedule, a worker on a slower core of the
target keeps the tasks it got on the host, and the prediction waits for
its share; a real pool gives it fewer.  So, where the trace has that
shape, each simulated run deals the tasks again: a task goes to the
worker whose previous result reaches the master first in simulated time,
with that task's cost (its replayed spans, times the worker's own speed
in a sample of the variability: netsim/variability.py).

The shape recognised (:func:`find_pool`), on one communicator:

* the master: the one rank whose blocking receives from any source (or
  from the source a probe from any source found just before: Probe, or
  Iprobe polled until it found one) got messages from two ranks or more.  A receive
  followed at once by a blocking send back to its source *answers* it
  (the next task, or the order to stop); one that is not collects a
  result only (the end of a round of ``map``; a next round's first send
  that happens to go to the source of the round's last result reads as
  its answer).  Every other blocking
  send to a worker on that communicator is a *fixed* deal (the first
  deal of a round, which does not depend on arrival): kept as traced
  where that worker is free in the new deal, else given to a free one
  (a misread answer can have kept the traced one busy: dealt twice, a
  worker would block in its result's send while the master blocks in
  sending it the next task, where the task is over the eager limit);
* each worker: blocking receives from the master, each followed at once
  by a blocking send of the result to the master, except perhaps the last
  (the stop); nothing else passes between it and the master.

A *content* is what one of the master's sends carries: a task (the
worker's receive, the spans of its work and its result send) or a stop
(the receive alone).  Dealing keeps the master's calls and their order,
and moves contents between workers: an answer goes to the worker whose
result the receive before it took, a receive takes the result that
reaches the master first.  Anything else (several masters, tasks that
communicate, nonblocking receives such as mpi4py.futures') keeps the
traced schedule, and the warning says why.
"""
from __future__ import annotations

import dataclasses
import heapq
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .schedule import from_trace
from .variability import mean_one


def _blocking(op: str, kinds) -> bool:
    return op in kinds and not op.startswith("i")


@dataclass
class Pool:
    """A recognised task pool over the trace's events (row indices)."""
    master: int
    comm: int
    workers: list                    # world ranks
    sends: np.ndarray                # the master's rows: each deal's send, in order
    answers: np.ndarray              # per deal: the receive it answers (-1: a fixed deal)
    recvs: np.ndarray                # the master's rows: each receive from any source
    probes: np.ndarray               # per receive: the probe that found it (-1: none)
    contents: list                   # per deal: the rows it carries (a worker's)
    is_task: np.ndarray              # per deal: a task (True) or a stop
    first: dict                      # worker -> its rows before its first receive
    last: dict                       # worker -> its rows after its last
    rank_of: np.ndarray              # every event row's rank
    sbytes: np.ndarray               # per deal: the bytes the master sends
    rbytes: np.ndarray               # per deal: the bytes of its result (0: a stop)

    @property
    def tasks(self) -> int:
        return int(self.is_task.sum())

    def describe(self) -> str:
        return (f"rank {self.master} deals {self.tasks} tasks to {len(self.workers)} workers "
                f"by arrival")


PROBES = ("probe", "iprobe", "mprobe", "improbe")


def find_pool(ev: pd.DataFrame) -> tuple[Pool | None, str | None]:
    """The task pool of a trace's events, or (None, why not) where the
    events have a rank that takes messages from any source from several
    ranks but not the shape above; (None, None) where there is no pool."""
    from mpimodel import ops
    rank, op, peer, comm = (ev[c].to_numpy() for c in ("rank", "op", "peer", "comm"))
    wild = ev["wildcard"].to_numpy(bool)
    recv = np.isin(op, list(ops.RECVS)) & (peer >= 0)
    # a probe from any source that found the message the next call receives
    found = np.zeros(len(op), bool)
    found[1:] = (np.isin(op[:-1], PROBES) & wild[:-1] & (rank[:-1] == rank[1:])
                 & (peer[:-1] == peer[1:]) & (comm[:-1] == comm[1:]))
    recv_any = recv & (wild | found)          # a result taken from whoever sent first
    sources = ev.loc[recv_any].groupby("rank")["peer"].nunique()
    masters = sources[sources >= 2].index.tolist()
    if not masters:
        return None, None
    if len(masters) > 1:
        return None, f"ranks {masters[:5]} each deal tasks by arrival (one master is modelled)"
    m = int(masters[0])
    rows = np.flatnonzero(rank == m)
    mine = rows[recv_any[rows]]
    if not all(_blocking(o, ops.RECVS) for o in op[mine]):
        return None, f"rank {m} takes its results with nonblocking receives"
    comms = set(comm[mine].tolist())
    if len(comms) != 1:
        return None, f"rank {m} takes results on several communicators"
    c = comms.pop()
    answered = {}                            # send row -> the receive it answers
    for k, i in enumerate(mine):
        j = i + 1
        if j < len(op) and rank[j] == m and _blocking(op[j], ops.SENDS) and \
                peer[j] == peer[i] and comm[j] == c:
            answered[int(j)] = k
    probes = np.where(found[mine], mine - 1, -1)
    sends = rows[np.isin(op[rows], list(ops.SENDS)) & (comm[rows] == c) & (peer[rows] >= 0)]
    if not all(_blocking(o, ops.SENDS) for o in op[sends]):
        return None, f"rank {m} deals with nonblocking sends"
    answers = np.array([answered.get(int(i), -1) for i in sends])
    workers = sorted(set(peer[sends].tolist()) | set(peer[mine].tolist()))
    contents: list = [None] * len(sends)
    is_task = np.zeros(len(sends), bool)
    before: dict = {}
    after: dict = {}
    for w in workers:
        why = _worker(ev, m, c, w, np.flatnonzero(peer[sends] == w), contents, is_task,
                      before, after)
        if why:
            return None, why
    if int(is_task.sum()) != len(mine):
        return None, f"rank {m} took {len(mine)} results for {int(is_task.sum())} tasks"
    sb = ev["sbytes"].to_numpy()
    rbytes = np.array([sb[cn[1]] if t else 0 for cn, t in zip(contents, is_task)], np.int64)
    return Pool(m, int(c), workers, sends, answers, mine, probes, contents, is_task, before,
                after, rank, sb[sends].astype(np.int64), rbytes), None


def _worker(ev, m, c, w, deals, contents, is_task, before, after) -> str | None:
    """Worker ``w``'s contents of the master's ``deals`` (indices into its
    sends), its rows before and after them; why not, where it has not the
    shape."""
    from mpimodel import ops
    rank, op, peer, comm = (ev[k].to_numpy() for k in ("rank", "op", "peer", "comm"))
    wrows = np.flatnonzero(rank == w)
    talk = wrows[(comm[wrows] == c) & (peer[wrows] == m)]
    got = talk[np.isin(op[talk], list(ops.RECVS))]
    if len(got) != len(deals):
        return f"rank {w} received {len(got)} messages from rank {m}, which sent it {len(deals)}"
    if not len(got):
        return f"rank {w} sends results to rank {m} but gets no task from it"
    if not all(_blocking(o, ops.RECVS) for o in op[got]):
        return f"rank {w} receives its tasks with nonblocking calls"
    for k, (g, n) in enumerate(zip(got, deals)):
        s = g + 1
        if s < len(op) and rank[s] == w and _blocking(op[s], ops.SENDS) and peer[s] == m and \
                comm[s] == c:
            contents[n] = [int(g), int(s)]    # a task: answered at once by its result
            is_task[n] = True
        elif k + 1 == len(got):
            contents[n] = [int(g)]            # the stop
        else:
            return (f"rank {w} event {int(ev['seq'].iat[g])}: a task not answered at once by "
                    f"a result to rank {m}")
    if len(talk) != len(got) + int(is_task[deals].sum()):
        return f"rank {w} talks to rank {m} outside its tasks"
    before[w] = [int(i) for i in wrows if i < got[0]]
    after[w] = [int(i) for i in wrows if i > talk[-1]]
    return None


def master_order(pool: Pool) -> list[tuple[int, bool, int]]:
    """The master's deals and receives in its call order: (event row, is
    a receive, index into ``pool.sends`` or ``pool.recvs``)."""
    return sorted([(int(r), False, n) for n, r in enumerate(pool.sends)]
                  + [(int(r), True, k) for k, r in enumerate(pool.recvs)])


def deal(pool: Pool, span, message) -> tuple[np.ndarray, np.ndarray]:
    """Each deal's worker and each receive's source (world ranks), dealt
    by arrival.

    ``span(rows, rank)``: the seconds of these event rows' spans computed
    by ``rank`` (a task's rows on the worker that gets it);
    ``message(rank, nbytes)``: seconds from the sender's call to the
    message's receipt between the master and that worker.  A fixed deal
    goes where it went, unless the new deal keeps that worker busy (its
    result not yet taken) or stopped: then to the free worker that has
    waited longest, as a pool deals only to free workers; an answer to
    the worker whose result the receive before it took; a receive takes
    the result that reaches the master first."""
    dest = np.full(len(pool.sends), -1, np.int64)
    source = np.full(len(pool.recvs), -1, np.int64)
    busy: set = set()                            # workers whose result is still to be taken
    stopped: set = set()
    mine = np.flatnonzero(pool.rank_of == pool.master)
    done_rows = 0                                # the master's rows accounted for

    def master_until(row):
        """The master's spans up to and including the one before ``row``."""
        nonlocal done_rows
        j = int(np.searchsorted(mine, row, "right"))
        t = span(mine[done_rows:j], pool.master)
        done_rows = j
        return t
    ready = {w: span(np.array(pool.first[w], np.int64), w) for w in pool.workers}
    results: list = []                           # (arrival at the master, deal, worker)

    def give(n, w, sent):
        rows = np.array(pool.contents[n], np.int64)
        posted = ready[w] + span(rows[:1], w)     # the worker reaches its receive
        if pool.is_task[n]:
            done = max(sent + message(w, pool.sbytes[n]), posted) + span(rows[1:], w)
            ready[w] = done
            heapq.heappush(results, (done + message(w, pool.rbytes[n]), n, w))
        else:
            ready[w] = posted
    clock = 0.0
    for row, is_recv, i in master_order(pool):
        clock += master_until(row)
        if is_recv:
            arrive, _, w = heapq.heappop(results)
            clock = max(clock, arrive)
            source[i] = w
            busy.discard(w)
        else:
            k = pool.answers[i]
            w = int(source[k] if k >= 0 else pool.rank_of[pool.contents[i][0]])
            if w in busy or w in stopped:
                # a fixed deal to a worker the new deal keeps busy: a pool
                # deals only to free workers (which the traced one was),
                # so the free worker that has waited longest takes it
                w = min((r for r in pool.workers if r not in busy and r not in stopped),
                        key=lambda r: (ready[r], r), default=w)
            dest[i] = w
            give(i, w, clock)
            (busy if pool.is_task[i] else stopped).add(w)
    return dest, source


def dealt(ev: pd.DataFrame, pool: Pool, dest: np.ndarray,
          source: np.ndarray) -> tuple[pd.DataFrame, np.ndarray]:
    """The events with the deals ``dest`` and the receives' ``source`` in
    place of the traced ones, and the original row of each new row (to
    carry per-event arrays along).  Every worker keeps its rows before
    its first task and after its last; the contents it gets go between,
    in the master's order; the master's receives (and the probes that
    found them) take their results from the new sources, each worker's
    in the order it was dealt them, with their size and tag."""
    rows_in_order: list[int] = []
    new_rank: list[int] = []
    for r in range(int(ev["rank"].max()) + 1):
        if r in pool.first:
            got = [pool.contents[n] for n in np.flatnonzero(dest == r)]
            rows = pool.first[r] + [i for c in got for i in c] + pool.last[r]
        else:
            rows = np.flatnonzero(pool.rank_of == r).tolist()
        rows_in_order += rows
        new_rank += [r] * len(rows)
    order = np.asarray(rows_in_order, np.int64)
    out = ev.iloc[order].reset_index(drop=True)
    out["rank"] = np.asarray(new_rank, dtype=out["rank"].dtype)
    out["seq"] = out.groupby("rank").cumcount().astype(ev["seq"].dtype)
    at = np.empty(len(order), np.int64)
    at[order] = np.arange(len(order))            # original row -> new row
    peer, rbytes = out["peer"].to_numpy().copy(), out["rbytes"].to_numpy().copy()
    tag, old_tag = out["tag"].to_numpy().copy(), ev["tag"].to_numpy()
    peer[at[pool.sends]] = dest
    held = {w: [n for n in np.flatnonzero(dest == w) if pool.is_task[n]] for w in pool.workers}
    for k in np.argsort(pool.recvs):
        w = int(source[k])
        task = held[w].pop(0)
        for row in (pool.recvs[k], pool.probes[k]):
            if row >= 0:
                # the result's source, size and tag (a pool may tag each
                # result with its task's number)
                peer[at[row]] = w
                rbytes[at[row]] = pool.rbytes[task]
                tag[at[row]] = old_tag[pool.contents[task][1]]
    out["peer"], out["rbytes"], out["tag"] = peer, rbytes, tag
    return out, order


class DealtLowering:
    """Lowers a trace with its task pool dealt anew, once per sample
    (``run_samples``'s ``lower``): the deal depends on the sample's speeds.

    ``comp``: per event, the application's seconds before it (what the
    lowering takes, netsim.schedule.from_trace, and the deal weighs at each
    worker's speed); ``inside``: the computation table's column; ``sigma``:
    each rank's span noise."""

    def __init__(self, trace, pool: Pool, platform, comp: np.ndarray,
                 inside: np.ndarray | None, sigma: np.ndarray):
        self.trace, self.pool, self.platform = trace, pool, platform
        self.comp, self.inside, self.sigma = np.asarray(comp, float), inside, sigma
        self.work = self.comp * platform.compute_scale
        self._core = platform.core_of(trace.size)
        self._lat = platform.level_arrays()[1]
        self.fixed = platform.o_send + platform.o_recv + platform.call_overhead

    def message(self, w: int, nbytes: int) -> float:
        """Seconds from the master's (or worker's) send call to the other's receipt."""
        p, a, b = self.platform, self._core[[self.pool.master]], self._core[[w]]
        return float(self.fixed + self._lat[p.level_of(a, b)[0]]
                     + p.wire(a, b, np.array([float(nbytes)]))[0])

    def __call__(self, m: int, factors: np.ndarray, z: np.ndarray):
        def span(rows, r):
            return float((self.work[rows] * mean_one(self.sigma[r], z[rows])).sum() * factors[r])
        dest, source = deal(self.pool, span, self.message)
        ev, order = dealt(self.trace.events, self.pool, dest, source)
        t = dataclasses.replace(self.trace, events=ev)
        inside = None if self.inside is None else self.inside[order]
        return from_trace(t, self.platform, self.comp[order], inside=inside), z[order]
