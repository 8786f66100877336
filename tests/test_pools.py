"""Task pools dealt anew in the simulation (netsim/pools.py), on real traces
of examples/master_worker.py: a worker on a slower core gets fewer tasks,
as in a real pool, where the traced schedule kept its traced share."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import EXAMPLES, ROOT, trace

from contracts.trace import load_trace
from contracts.variability import nil
from netsim import load_platform
from netsim import run as simulate
from netsim.pools import DealtLowering, deal, dealt, find_pool, master_order
from netsim.schedule import from_trace
from netsim.variability import Variability

TASK = 10e-3          # every task's cost, on a worker of speed 1
TASKS = 30


@pytest.fixture(scope="module")
def pool_trace(tmp_path_factory):
    """master_worker at 4 ranks: a master and three workers."""
    out = tmp_path_factory.mktemp("pool") / "trace"
    trace(4, out, [EXAMPLES / "master_worker.py", "--tasks", str(TASKS), "--size", "40"])
    return load_trace(str(out))


def task_costs(t) -> np.ndarray:
    """Per event: TASK before each worker's result send, nothing elsewhere."""
    ev = t.events
    return np.where((ev["rank"] > 0) & (ev["op"] == "send") & (ev["peer"] == 0), TASK, 0.0)


def test_the_pool_is_recognised_and_every_task_dealt_once(pool_trace):
    pool, why = find_pool(pool_trace.events)
    assert why is None and pool.master == 0 and sorted(pool.workers) == [1, 2, 3]
    assert pool.tasks == TASKS and (~pool.is_task).sum() == 3     # one stop per worker
    assert (pool.answers >= 0).sum() == TASKS                      # the first 3: fixed
    speed = {0: 1.0, 1: 1.0, 2: 1.0, 3: 2.0}                  # worker 3 twice as slow
    work = task_costs(pool_trace)

    def span(rows, r):
        return float(work[rows].sum() * speed[r])
    dest, source = deal(pool, span, lambda w, nbytes: 1e-6)
    got = {w: int(((dest == w) & pool.is_task).sum()) for w in (1, 2, 3)}
    # by time 12 TASK the fast workers did 12 each, the slow one 6
    assert got[1] + got[2] + got[3] == TASKS
    assert got[1] == pytest.approx(12, abs=1) and got[2] == pytest.approx(12, abs=1)
    assert got[3] == pytest.approx(6, abs=1)
    assert ((dest == np.array([1, 2, 3])[:, None]) & ~pool.is_task).sum(axis=1).tolist() == \
        [1, 1, 1]
    ev, order = dealt(pool_trace.events, pool, dest, source)
    assert sorted(order.tolist()) == list(range(len(pool_trace.events)))
    for w in (1, 2, 3):
        mine = ev[ev["rank"] == w]
        assert list(mine["seq"]) == list(range(len(mine)))
        assert (mine["op"] == "send").sum() == got[w]
    # the master's k-th result comes from the worker its next task goes to
    m = ev[ev["rank"] == 0].reset_index(drop=True)
    recv = np.flatnonzero(m["op"] == "recv")
    assert (m["peer"].to_numpy()[recv] == m["peer"].to_numpy()[recv + 1]).all()


def test_a_slow_worker_no_longer_sets_the_pace(pool_trace):
    """Simulated with the traced deal, the slow worker does its traced
    share at half speed, and the master takes the results in their traced
    order; dealt anew, the pool ends when 2.5 workers' worth of speed has
    done the tasks."""
    plat = load_platform(str(ROOT / "config" / "platforms" / "ib-cluster.yaml"))
    pool, _ = find_pool(pool_trace.events)
    work = task_costs(pool_trace)
    f = np.array([1.0, 1.0, 1.0, 2.0])
    z = np.zeros(len(work))
    var = Variability(nil([0, 1, 2, 3]), samples=1)
    sigma = np.zeros(4)
    lower = DealtLowering(pool_trace, pool, plat, work, None, sigma)
    s, zs = lower(0, f, z)
    redealt = simulate(dataclasses.replace(s, dur=var.durations(s, f, zs, sigma)),
                       plat).predicted_time
    traced_s = from_trace(pool_trace, plat, work)
    traced = simulate(dataclasses.replace(traced_s, dur=var.durations(traced_s, f, z, sigma)),
                      plat).predicted_time
    # the traced deal waits at least for the slow worker's share, and for
    # the results in their traced order
    slow_share = int(((pool_trace.events["rank"] == 3) & (work > 0)).sum())
    assert traced >= 2 * TASK * slow_share * 0.99
    assert redealt == pytest.approx(TASKS * TASK / 2.5, rel=0.05)
    assert redealt < traced


def test_a_pool_in_rounds_with_tagged_results_is_dealt_anew(tmp_path):
    """schwimmbad's MPIPool shape (tests/apps/pool_rounds.py): per round a
    fixed first deal, results found by Iprobe and tagged with their task,
    the round's last results collected unanswered, a sentinel at the
    end.  Dealt anew with a slow worker, every receive, probe and tag
    still matches (no deadlock) and the slow worker does fewer tasks."""
    from conftest import APPS
    trace(3, tmp_path / "t", [APPS / "pool_rounds.py", "--rounds", "3", "--tasks", "8"])
    t = load_trace(str(tmp_path / "t"))
    pool, why = find_pool(t.events)
    assert why is None and pool.tasks == 24
    # each round's first deal and the sentinels are fixed, except that the
    # first send after a round's last result reads as its answer when it
    # goes to that result's worker (at most one per later round and one
    # among the sentinels)
    assert 2 + 1 + 1 + 1 <= (pool.answers < 0).sum() <= 3 * 2 + 2
    assert (pool.probes >= 0).all()
    plat = load_platform(str(ROOT / "config" / "platforms" / "ib-cluster.yaml"))
    work = np.where((t.events["rank"] > 0) & (t.events["op"] == "ssend"), TASK, 0.0)
    f = np.array([1.0, 1.0, 3.0])
    lower = DealtLowering(t, pool, plat, work, None, np.zeros(3))
    s, zs = lower(0, f, np.zeros(len(work)))
    var = Variability(nil([0, 1, 2]), samples=1)
    res = simulate(dataclasses.replace(s, dur=var.durations(s, f, zs, np.zeros(3))), plat)
    done = {w: int(((s.rank == w) & (s.work > 0)).sum()) for w in (1, 2)}
    assert done[1] + done[2] == 24 and done[2] < done[1]
    # per round of 8 tasks: speeds 1 and 1/3 share them 6:2
    assert res.predicted_time == pytest.approx(3 * 6 * TASK, rel=0.1)
    # whichever worker is slow, no task goes to a worker whose result is
    # still to be taken (a round's first send read as an answer must not
    # leave the round's fixed deal to a busy worker): with tasks over the
    # eager limit that worker would block in its result's ssend while the
    # master blocks sending it the next task, and the simulation with it
    rendezvous = dataclasses.replace(plat, eager_limit=16)
    for speeds in ([1.0, 3.0, 1.0], [1.0, 1.0, 3.0], [1.0, 1.0, 1.0]):
        f = np.array(speeds)
        lower = DealtLowering(t, pool, rendezvous, work, None, np.zeros(3))
        dest, source = deal(pool, lambda rows, r, f=f: float(work[rows].sum() * f[r]),
                            lower.message)
        busy: set = set()
        for _, is_recv, i in master_order(pool):
            if is_recv:
                busy.discard(int(source[i]))
            else:
                assert int(dest[i]) not in busy, (f, i)
                if pool.is_task[i]:
                    busy.add(int(dest[i]))
        s, zs = lower(0, f, np.zeros(len(work)))
        res = simulate(dataclasses.replace(s, dur=var.durations(s, f, zs, np.zeros(3))),
                       rendezvous)
        assert res.predicted_time >= 3 * 4 * TASK


def test_a_fixed_deal_never_goes_to_a_busy_worker():
    """Two rounds of a pool on two workers, written out by hand: round 2's
    first send went to worker 2, whose result round 1's last receive took,
    so it reads as an answer; round 2's send to worker 1 is fixed.  Dealt
    anew with worker 1 three times slower, round 1's last result comes
    from worker 1, the "answer" goes to it, and the fixed deal would give
    it a second task before its first result is taken (over the eager
    limit, a deadlock): it goes to the free worker 2 instead."""
    import pandas as pd
    rows = []

    def ev(rank, op, peer, tag, wildcard=False):
        rows.append(dict(rank=rank, op=op, peer=peer, comm=0, tag=tag, wildcard=wildcard,
                         sbytes=64 if "send" in op else 0, rbytes=64 if "recv" in op else 0))
    for w, tag in ((1, 0), (2, 1)):                    # round 1: fixed deals
        ev(0, "send", w, tag)
    ev(0, "recv", 1, 0, True)
    ev(0, "recv", 2, 1, True)                          # round 1's last result
    ev(0, "send", 2, 2)                                # round 2: reads as its answer
    ev(0, "send", 1, 3)                                # fixed
    ev(0, "recv", 2, 2, True)
    ev(0, "recv", 1, 3, True)
    for w in (1, 2):
        ev(0, "send", w, 9)                            # the stops
    for w, tags in ((1, (0, 3)), (2, (1, 2))):
        for tag in tags:
            ev(w, "recv", 0, tag)
            ev(w, "ssend", 0, tag)
        ev(w, "recv", 0, 9)
    events = pd.DataFrame(rows).sort_values("rank", kind="stable").reset_index(drop=True)
    events["seq"] = events.groupby("rank").cumcount()
    pool, why = find_pool(events)
    assert why is None and pool.tasks == 4
    assert list(pool.answers) == [-1, -1, 1, -1, 3, -1]     # the stop to 1 answers too
    speed = {0: 1.0, 1: 3.0, 2: 1.0}
    cost = np.where(events["op"] == "ssend", TASK, 0.0)
    dest, source = deal(pool, lambda r, w: float(cost[r].sum() * speed[w]),
                        lambda w, n: 1e-6)
    # round 1: worker 2 answers first, worker 1 last; round 2's "answer"
    # goes to worker 1, and the fixed deal to worker 1 to worker 2
    assert list(source) == [2, 1, 2, 1]
    assert list(dest) == [1, 2, 1, 2, 1, 2]
