"""The simulator's core: a discrete-event loop over a schedule (LogGOPS).

A schedule (netsim/schedule.py) is a dependency graph of operations, one
row per op, ranks' ops contiguous: CALC (busy the CPU for ``dur``), SEND,
RECV (``peer`` -1 = any source, ``tag`` -1 = any tag; matched per ``ctx``
in FIFO order) and COLL (an analytic collective: done for every member
``dur`` after the last member arrived).  An op becomes ready when every op
it *requires* has completed and every op it *irequires* has started, like
LogGOPSim's GOAL schedules.

Timing of a message of s bytes between ranks whose innermost common
network level has latency L; W is the message's time on the wire, given
per SEND row (``wire``, from the platform: (s-1)*G with G the level's byte
time, its rendezvous byte time over the eager limit, or the level's
measured curve, plus a new connection's warm-up; netsim/predict.py); P
its occupancy, how long it holds the NIC (``occupy``: W less the
warm-up, or the platform's measured streaming time per message, so that
a window of messages is spaced as measured); o/O send
and receive overheads per message/per byte, g the gap between two
messages of a NIC:

* send starts when the op is ready, the CPU and the NIC are free;
  the CPU is busy o + s*O, the NIC g + P; a *reply* (``reply`` per SEND
  row: what a target's MPI sends back from the call in which it received
  a one-sided request: data, a grant, an acknowledgement) does not wait
  for the CPU, whose o + s*O it takes after whatever the CPU is busy with;
* eager (``eager`` per SEND row: s <= eager limit): data arrives at
  start + o + L + W; the send completes locally at start + o + s*O;
* a synchronous send up to the eager limit (``ack`` per SEND row) moves
  its data as an eager one, but completes only once matched: when the
  receiver's acknowledgement, sent as the receive matches it, arrives L
  later (MPICH and Open MPI send small synchronous messages so);
* rendezvous (larger messages, synchronous ones too): a request-to-send
  arrives at start + o + L; when it matches
  a posted receive, the receiver spends o and a clear-to-send reaches the
  sender after L; the sender then starts the data as above and completes
  when it is injected;
* the receive completes o + s*O after the data arrived and the receive
  was posted (and the receiving CPU is free);
* with contention, the NICs of the two nodes serialise the bytes of the
  messages between nodes (P each, in order of arrival); with a topology
  (netsim/topology.py: a fat tree, a torus, a dragonfly), a message
  between nodes also enters the links of its route as it leaves its NIC
  (``route`` per op, the routes' links in compressed rows
  ``route_ptr``/``route_links``), adds P to each link's queue, in the
  order messages reach it, and arrives as many seconds later as the
  longest queue it met (and a link slower than its NIC: ``link_bt``),
  plus the latency of each link crossed (``link_lat``);
* with a topology's ``sharing: flows`` (or ``rtt_flows``), a message
  between nodes is instead a flow from its start (above) to its last
  byte, holding both NICs and its route's links at a rate that the
  FLOWS event solves again whenever flows start or end (netsim/flows.py:
  only the flows the change can move, within the topology's ``reach``;
  their ends wait in a heap); it arrives its route's latency after its
  last byte left.

These are LogGOPSim's rules (Hoefler, Schneider, Lumsdaine, HPDC 2010),
plus network levels (after Klinov's multi-level model) and NIC contention.
The loop is compiled with
numba: the same code as plain Python would read, at C speed.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .flows import enter, lists, release, resolve, workspace

CALC, SEND, RECV, COLL = 0, 1, 2, 3
# event kinds in the heap; HOP: a message entering the links of its route;
# FLOWS: flows started or ended, their rates to solve again (sharing: flows)
READY, ARRIVE, CTS, DATA, HOP, FLOWS = 0, 1, 2, 3, 4, 5


# The matching-queue search and unlink, and the injection through a node's
# NIC, appear twice in simulate() (for a receive and for an arriving
# message; for an eager send and for rendezvous data).  As helper functions
# (numba, inline="always") the loop ran 11-13 % slower: old and new
# alternated 3 times, `python bench/netsim_speed.py --ranks 1024`,
# 2026-11-24.  netsim/loggops.py, whose speed matters less, uses helpers.

# ---- a binary heap of (time, payload) keys; payload = op * 8 + event kind,
# which also breaks ties deterministically.  It holds what is in flight,
# usually a few entries per rank, not one per op: the caller gives it
# ``room`` entries, and a run that needs more stops and says so (events
# -1), to be run again with more (netsim/predict.py).  Growing the arrays
# inside the loop instead made it 20 % slower (numba reloads arrays that
# may be replaced): old and new alternated 3 times, `python
# bench/netsim_speed.py --ranks 1024`, 2026-11-25.
OUT_OF_ROOM = -1


def heap_room(graph, nranks: int, most: int) -> int:
    """A first heap size: the ops ready at the start, plus for every rank a
    few entries and as many as one op releases at once (a computation
    followed by a collective's independent sends and receives: up to 64),
    and never more than ``most`` (the most it can ever hold).  Too little
    costs a second run; too much only memory."""
    ndeps, succ_ptr = graph[0], graph[1]
    fan = min(_widest_row(succ_ptr), 64)
    return min(int(most), int(np.count_nonzero(ndeps == 0)) + (4 + fan) * nranks + 1024)


@njit(cache=True)
def _widest_row(ptr):
    """The longest row of compressed rows given by their pointers."""
    most = 0
    for i in range(len(ptr) - 1):
        most = max(most, ptr[i + 1] - ptr[i])
    return int(most)


@njit(cache=True, inline="always")
def _push(ht, hp, n, t, payload):
    i = n
    while i > 0:
        parent = (i - 1) >> 1
        pt = ht[parent]
        if pt < t or (pt == t and hp[parent] < payload):
            break
        ht[i] = pt
        hp[i] = hp[parent]
        i = parent
    ht[i] = t
    hp[i] = payload


@njit(cache=True, inline="always")
def _pop(ht, hp, n):
    """Remove the smallest entry of a heap of n; returns (time, payload)."""
    t, payload = ht[0], hp[0]
    n -= 1
    lt, lp = ht[n], hp[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and (ht[c + 1] < ht[c] or (ht[c + 1] == ht[c] and hp[c + 1] < hp[c])):
            c += 1
        if lt < ht[c] or (lt == ht[c] and lp < hp[c]):
            break
        ht[i] = ht[c]
        hp[i] = hp[c]
        i = c
    ht[i] = lt
    hp[i] = lp
    return t, payload


# ---- the flows' ends: a heap of (end time, flow) entries with each flow's
# place in it, so that a flow solved again moves within it rather than
# leaving a stale entry behind; ties go to the lower op (``tie``: each
# flow's), as the event heap breaks them.  The times live in the heap
# itself: comparisons read small arrays, not per-op arrays.
@njit(cache=True, inline="always")
def _ends_place(ht, hq, at, i, t, f):
    """Put (t, f) at place i."""
    ht[i] = t
    hq[i] = f
    at[f] = i


@njit(cache=True, inline="always")
def _ends_up(ht, hq, at, tie, i, t, f):
    """Place (t, f) at i or above, as far toward the root as it ends
    sooner than the parents there; returns its place."""
    while i > 0:
        parent = (i - 1) >> 1
        if ht[parent] < t or (ht[parent] == t and tie[hq[parent]] < tie[f]):
            break
        _ends_place(ht, hq, at, i, ht[parent], hq[parent])
        i = parent
    _ends_place(ht, hq, at, i, t, f)
    return i


@njit(cache=True, inline="always")
def _ends_down(ht, hq, at, tie, n, i, t, f):
    """Place (t, f) at i or below, as far from the root as a child there
    ends sooner."""
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and (ht[c + 1] < ht[c]
                          or (ht[c + 1] == ht[c] and tie[hq[c + 1]] < tie[hq[c]])):
            c += 1
        if t < ht[c] or (t == ht[c] and tie[f] < tie[hq[c]]):
            break
        _ends_place(ht, hq, at, i, ht[c], hq[c])
        i = c
    _ends_place(ht, hq, at, i, t, f)


@njit(cache=True, inline="always")
def _ends_set(ht, hq, at, tie, n, t, f):
    """Flow f now ends at t (a new entry if it has none); returns the
    heap's size."""
    i = at[f]
    if i < 0:
        _ends_up(ht, hq, at, tie, n, t, f)
        return n + 1
    _ends_down(ht, hq, at, tie, n, _ends_up(ht, hq, at, tie, i, t, f), t, f)
    return n


@njit(cache=True, inline="always")
def _ends_remove(ht, hq, at, tie, n, f):
    """Take flow f out of the heap of n; returns the new size."""
    i = at[f]
    at[f] = -1
    n -= 1
    if i < n:
        t, last = ht[n], hq[n]
        _ends_down(ht, hq, at, tie, n, _ends_up(ht, hq, at, tie, i, t, last), t, last)
    return n


@njit(cache=True)
def _level(a, b, span):
    """Index of the innermost network level joining cores a and b."""
    for i in range(len(span) - 1):
        if a // span[i] == b // span[i]:
            return i
    return len(span) - 1


@njit(cache=True)
def _matches(ctx, peer, tag, rank, recv, send):
    return (ctx[recv] == ctx[send] and (peer[recv] < 0 or peer[recv] == rank[send])
            and (tag[recv] < 0 or tag[recv] == tag[send]))


@njit(cache=True, inline="always")
def _route_latency(r, lv, lat, route_ptr, route_links, link_lat):
    """A message's latency: its level's, plus that of its route's links."""
    through = 0.0
    if r >= 0:
        for q in range(route_ptr[r], route_ptr[r + 1]):
            through += link_lat[route_links[q]]
    return lat[lv] + through


@njit(cache=True, inline="always")
def _flow_latency(op, r, lv, lat, route_ptr, route_links, link_lat, wire, occupy):
    """From a flow's last byte leaving to its arrival: its route's
    latency and its wire time beyond its NIC's."""
    return _route_latency(r, lv, lat, route_ptr, route_links, link_lat) + wire[op] - occupy[op]


@njit(cache=True)
def _clear_queued(link, head):
    """Set ``link`` to -1 for every op in the lists starting at ``head``."""
    for r in range(len(head)):
        m = head[r]
        while m >= 0:
            nx = link[m]
            link[m] = -1
            m = nx


@njit(cache=True)
def simulate(kind, rank, peer, size, tag, ctx, dur, coll, coll_need,
             ndeps, succ_ptr, succ_idx, isucc_ptr, isucc_idx,
             core, cores_per_node, span, lat, wire, occupy,
             o_s, o_r, O_s, O_r, gap, eager, reply, ack, contention, nranks, room,
             route, route_ptr, route_links, link_lat, link_bt, level_bt, flows, rtt,
             reach=0):
    """Run the schedule.  Returns (start, end, matched, coll_last,
    link_busy, events); events is OUT_OF_ROOM if the heap needed more than
    ``room`` entries; link_busy the seconds each topology link carried a
    message.  ``route`` is empty without a topology; ``link_bt`` gives each
    link's byte time (0: the message's level's, ``level_bt``), ``link_lat``
    its latency.  With ``flows`` (a topology's ``sharing: flows``), a
    message between nodes is a flow instead, sharing its NICs and links
    max-min fairly with the others in flight (netsim/flows.py); with
    ``rtt`` too (``sharing: rtt_flows``), in inverse proportion to its
    route's latency, as TCP shares a bottleneck; ``reach`` > 0 bounds
    how far one flow's start or end moves the others' rates, in links
    (netsim/flows.py, ``affected``; 0: as far as they are linked).

    ``ndeps`` (each op's number of dependencies) is counted down in place;
    the graph's arrays give op indices in one integer type, which the
    per-op state uses too.  ``end`` is NaN for ops that never completed
    (a deadlock); ``matched`` gives each RECV its SEND and each SEND its
    RECV (-1: none); ``coll_last`` the time each collective's last member
    arrived; ``events`` the number of events processed."""
    n = len(kind)
    start = np.full(n, np.nan)
    end = np.full(n, np.nan)
    ready_at = np.zeros(n)
    left = ndeps
    index = succ_idx.dtype
    arrive = np.zeros(n)                        # message arrival (SEND rows)
    cpu_free = np.zeros(nranks)
    nic_free = np.zeros(nranks)
    nnodes = core.max() // cores_per_node + 1 if nranks > 0 else 1
    out_free = np.zeros(nnodes)
    in_free = np.zeros(nnodes)
    # a topology's links: when each is free, and how long it carried messages
    routed = len(route) == n
    link_free = np.zeros(len(link_bt))
    link_busy = np.zeros(len(link_bt))
    # flows in flight (sharing: flows), each under a number of its own while
    # it flows (reused once it ends): its op and route, work left (seconds
    # at the NIC's speed) when it was last counted (fl_since), rate, when it
    # ends at that rate; the links' numbers for the NICs come after the
    # topology's.  Numbered so, not by op, the few thousand flows in flight
    # share cache lines (by op, each took a line of every array: the run
    # at 16,384 ranks took 1.5 times as long); a run that needs more
    # numbers than ``room`` stops as a full heap does.
    flows = flows and routed
    rtt = rtt and flows
    nf = min(room, n) if flows else 0
    fl_op = np.empty(nf, np.int64)
    fl_route = np.empty(nf, route.dtype)
    free = np.arange(nf - 1, -1, -1)       # the numbers free, the next one last
    nfree = nf
    fl_left = np.zeros(nf)
    fl_since = np.zeros(nf)
    fl_rate = np.zeros(nf)
    fl_level = np.zeros(nf)                # the fill level each was frozen at
    fl_end = np.zeros(nf)
    fl_unit = np.ones(nf)
    fl_phi = np.ones(nf)                   # each flow's weight in the sharing
    fl_out = np.zeros(nf, np.int64)
    fl_in = np.zeros(nf, np.int64)
    act = np.empty(nf, np.int64)
    na = 0
    fl_pos = np.full(nf, -1, np.int64)     # each flow's place in act (-1: none)
    # the flows' ends, soonest first (``_ends_set``): a heap of at most
    # the flows in flight, and each flow's place in it (-1: none).  A heap
    # that passed over stale entries instead grew to 600 k entries for
    # 2.5 k flows in flight at 16k ranks.
    fe_t = np.empty(nf)
    fe_op = np.empty(nf, np.int64)
    fe_at = np.full(nf, -1, np.int64)
    fe_n = 0
    fl_due = -1.0                          # when the pending FLOWS event is
    solve_at = -1.0                        # when this event wants the rates solved
    fl_new = np.empty(nf, np.int64)        # flows started since the last solve, then ended
    nnew = 0
    cap, weight, count, first, used, load, held = workspace(len(link_bt) + 2 * nnodes
                                                            if flows else 0)
    per, on_head, on_next, on_prev, seen_link, seen_op = lists(len(cap), nf, route_ptr,
                                                               contention)
    # matching queues per rank (posted receives, unexpected messages) and
    # each collective's arrived members: singly linked lists through
    # ``link``, which once an op is matched holds its partner instead
    post_head = np.full(nranks, -1, np.int64)
    post_tail = np.full(nranks, -1, np.int64)
    unex_head = np.full(nranks, -1, np.int64)
    unex_tail = np.full(nranks, -1, np.int64)
    link = np.full(n, -1, index)
    ncoll = len(coll_need)
    coll_count = np.zeros(ncoll, np.int64)
    coll_last = np.zeros(ncoll)
    coll_head = np.full(ncoll, -1, np.int64)

    ht = np.empty(room)
    hp = np.empty(room, np.int64)
    hn = 0
    for i in range(n):
        if left[i] == 0:
            _push(ht, hp, hn, 0.0, i * 8 + READY)
            hn += 1
    events = 0
    # completions and starts notify dependants; done through a small stack
    # so that both paths share one piece of code; room for the most one
    # event can notify (a collective's members, the flows ending at once,
    # plus three), so that the arrays are never replaced: arrays the loop
    # could replace had their references counted at every event (a tenth
    # of the run with flows)
    most = 3 + max(np.max(coll_need) if ncoll > 0 else 0, nf)
    note_op = np.empty(most, np.int64)
    note_t = np.empty(most)
    note_isstart = np.empty(most, np.bool_)
    while hn > 0:
        t, payload = _pop(ht, hp, hn)
        hn -= 1
        op = payload >> 3
        ev = payload & 7
        events += 1
        nn = 0                                   # notifications to deliver
        if ev == READY:
            h = rank[op]
            k = kind[op]
            if k == CALC:
                s = max(t, cpu_free[h])
                cpu_free[h] = s + dur[op]
                start[op] = s
                end[op] = s + dur[op]
                note_op[0] = op
                note_t[0] = s
                note_isstart[0] = True
                note_op[1] = op
                note_t[1] = end[op]
                note_isstart[1] = False
                nn = 2
            elif k == SEND:
                d = peer[op]
                lv = _level(core[h], core[d], span)
                L, W = lat[lv], wire[op]
                sz = size[op]
                # a reply leaves from the call that got the request: it waits
                # for the NIC only, its overhead follows what the CPU is busy with
                s = max(t, nic_free[h]) if reply[op] else max(t, cpu_free[h], nic_free[h])
                busy = max(s, cpu_free[h])
                # a flow shares its NIC with the others instead of queueing
                fl = flows and core[h] // cores_per_node != core[d] // cores_per_node
                if eager[op]:
                    cpu_free[h] = busy + o_s + sz * O_s
                    nic_free[h] = s + gap + (0.0 if fl else occupy[op])
                else:                            # a request to send: no payload yet
                    cpu_free[h] = busy + o_s
                    nic_free[h] = s + gap
                start[op] = s
                note_op[0] = op
                note_t[0] = s
                note_isstart[0] = True
                nn = 1
                if eager[op]:
                    dep = s + o_s
                    if contention and lv > 0 and not fl and (core[h] // cores_per_node
                                                             != core[d] // cores_per_node):
                        node = core[h] // cores_per_node
                        dep = max(dep, out_free[node])
                        out_free[node] = dep + occupy[op]
                    if fl or (routed and route[op] >= 0):
                        _push(ht, hp, hn, dep, op * 8 + HOP)
                    else:
                        _push(ht, hp, hn, dep + L + W, op * 8 + ARRIVE)
                    hn += 1
                    if not ack[op]:              # else done when acknowledged
                        end[op] = s + o_s + sz * O_s
                        note_op[1] = op
                        note_t[1] = end[op]
                        note_isstart[1] = False
                        nn = 2
                else:                            # request to send
                    _push(ht, hp, hn, s + o_s + L, op * 8 + ARRIVE)
                    hn += 1
            elif k == RECV:
                start[op] = t
                note_op[0] = op
                note_t[0] = t
                note_isstart[0] = True
                nn = 1
                # the oldest matching unexpected message, else queue the receive
                prev, m = -1, unex_head[h]
                while m >= 0 and not _matches(ctx, peer, tag, rank, op, m):
                    prev, m = m, link[m]
                if m >= 0:
                    if prev < 0:
                        unex_head[h] = link[m]
                    else:
                        link[prev] = link[m]
                    if unex_tail[h] == m:
                        unex_tail[h] = prev
                    link[op] = m                 # partners from now on
                    link[m] = op
                    ev = -1                      # handled below as a match at time t
                else:
                    if post_tail[h] < 0:
                        post_head[h] = op
                    else:
                        link[post_tail[h]] = op
                    post_tail[h] = op
            else:                                # COLL: wait for the last member
                c = coll[op]
                start[op] = t
                note_op[0] = op
                note_t[0] = t
                note_isstart[0] = True
                nn = 1
                coll_count[c] += 1
                coll_last[c] = max(coll_last[c], t)
                link[op] = coll_head[c]
                coll_head[c] = op
                if coll_count[c] == coll_need[c]:
                    done = coll_last[c] + dur[op]
                    m = coll_head[c]
                    while m >= 0:
                        end[m] = done
                        cpu_free[rank[m]] = max(cpu_free[rank[m]], done)
                        note_op[nn] = m
                        note_t[nn] = done
                        note_isstart[nn] = False
                        nn += 1
                        nx = link[m]
                        link[m] = -1
                        m = nx
        elif ev == ARRIVE or ev == DATA:
            d = peer[op]                          # the receiving rank
            h = rank[op]
            sz = size[op]
            if (ev == DATA or eager[op]) and contention and not flows:
                if core[h] // cores_per_node != core[d] // cores_per_node:
                    node = core[d] // cores_per_node
                    t = max(t, in_free[node] + occupy[op])
                    in_free[node] = t
            if ev == DATA:
                r = link[op]
                s = max(t, cpu_free[d])
                cpu_free[d] = s + o_r + sz * O_r
                end[r] = cpu_free[d]
                note_op[0] = r
                note_t[0] = end[r]
                note_isstart[0] = False
                nn = 1
            else:
                arrive[op] = t
                prev, m = -1, post_head[d]
                while m >= 0 and not _matches(ctx, peer, tag, rank, m, op):
                    prev, m = m, link[m]
                if m >= 0:
                    if prev < 0:
                        post_head[d] = link[m]
                    else:
                        link[prev] = link[m]
                    if post_tail[d] == m:
                        post_tail[d] = prev
                    link[m] = op                 # partners from now on
                    link[op] = m
                    op = m                        # continue as a match of receive m
                    ev = -1
                else:
                    if unex_tail[d] < 0:
                        unex_head[d] = op
                    else:
                        link[unex_tail[d]] = op
                    unex_tail[d] = op
        elif ev == HOP and flows:
            # a flow starts: it holds its NICs and route until its work is
            # done at the rates the FLOWS event solves for (at this instant,
            # once every flow starting now has joined)
            lv = _level(core[rank[op]], core[peer[op]], span)
            r = route[op]
            if r >= 0:
                for q in range(route_ptr[r], route_ptr[r + 1]):
                    i = route_links[q]
                    link_busy[i] += (occupy[op] * link_bt[i] / level_bt[lv]
                                     if link_bt[i] > 0.0 and level_bt[lv] > 0.0
                                     else size[op] * link_bt[i] if link_bt[i] > 0.0
                                     else occupy[op])
            if occupy[op] <= 0.0:
                _push(ht, hp, hn, t + _flow_latency(op, r, lv, lat, route_ptr, route_links,
                                                    link_lat, wire, occupy),
                      op * 8 + (ARRIVE if eager[op] else DATA))
                hn += 1
            else:
                if nfree == 0:
                    return start, end, link, coll_last, link_busy, OUT_OF_ROOM
                nfree -= 1
                f = free[nfree]
                fl_op[f] = op
                fl_route[f] = r
                fl_left[f] = occupy[op]
                fl_since[f] = t
                fl_rate[f] = 0.0
                fl_end[f] = np.inf
                fl_unit[f] = (level_bt[lv] if level_bt[lv] > 0.0
                              else occupy[op] / size[op] if size[op] > 0 else 1.0)
                if rtt:                            # TCP-like: rate ~ 1 / round trip
                    fl_phi[f] = 1.0 / max(_route_latency(r, lv, lat, route_ptr, route_links,
                                                         link_lat), 1e-12)
                fl_out[f] = len(link_bt) + core[rank[op]] // cores_per_node
                fl_in[f] = len(link_bt) + nnodes + core[peer[op]] // cores_per_node
                fl_pos[f] = na
                act[na] = f
                na += 1
                enter(f, fl_level, fl_unit, fl_phi, fl_route, route_ptr, route_links, link_bt,
                      contention, fl_out, fl_in, held, per, on_head, on_next, on_prev)
                fl_new[nnew] = f
                nnew += 1
                solve_at = t
        elif ev == FLOWS:
            if t == fl_due:                       # else superseded by a later one
                fl_due = -1.0
                # the flows done now: their last byte is through
                above = np.inf                    # the lowest level among them
                ngone = 0
                while fe_n > 0 and fe_t[0] <= t:
                    f = fe_op[0]
                    fe_n = _ends_remove(fe_t, fe_op, fe_at, fl_op, fe_n, f)
                    last = act[na - 1]
                    act[fl_pos[f]] = last
                    fl_pos[last] = fl_pos[f]
                    fl_pos[f] = -1
                    na -= 1
                    above = min(above, fl_level[f])
                    release(f, fl_level, fl_unit, fl_phi, fl_route, route_ptr, route_links,
                            link_bt, contention, fl_out, fl_in, load, held, per, on_head,
                            on_next, on_prev)
                    fl_new[nnew] = f              # a seed of the change, as a start is
                    nnew += 1
                    ngone += 1
                    m = fl_op[f]
                    lv = _level(core[rank[m]], core[peer[m]], span)
                    _push(ht, hp, hn, t + _flow_latency(m, route[m], lv, lat, route_ptr,
                                                        route_links, link_lat, wire, occupy),
                          m * 8 + (ARRIVE if eager[m] else DATA))
                    hn += 1
                    if not eager[m]:               # rendezvous data: the send is done
                        end[m] = t + wire[m] - occupy[m]
                        note_op[nn] = m
                        note_t[nn] = end[m]
                        note_isstart[nn] = False
                        nn += 1
                sub, ns = resolve(t, fl_new, nnew, ngone, above, act, na, fl_left, fl_since,
                                  fl_end, fl_rate, fl_level, fl_unit, fl_phi, fl_route,
                                  route_ptr, route_links, link_bt, contention, fl_out, fl_in, cap,
                                  weight, count, first, used, load, held, per, on_head, on_next,
                                  seen_link, seen_op, reach)
                for k in range(nnew - ngone, nnew):  # the ended flows' numbers are free
                    free[nfree] = fl_new[k]
                    nfree += 1
                nnew = 0
                for k in range(ns):                # their new ends
                    f = sub[k]
                    if fl_end[f] < np.inf:
                        fe_n = _ends_set(fe_t, fe_op, fe_at, fl_op, fe_n, fl_end[f], f)
                    elif fe_at[f] >= 0:
                        fe_n = _ends_remove(fe_t, fe_op, fe_at, fl_op, fe_n, f)
                if fe_n > 0:
                    solve_at = fe_t[0]
        elif ev == HOP:
            # a message entering the links of its route (cut-through: all at
            # once, as its bytes stream through them): each link is a queue
            # of work in the order messages reach it; the message is through
            # once the longest of those queues ahead of it has drained, not
            # their sum, as links drain at the same time.  A route that is
            # free adds only its hops' latency.
            r = route[op]
            lv = _level(core[rank[op]], core[peer[op]], span)
            late = 0.0                             # beyond the NIC's own time
            through = 0.0                          # the links' latencies
            for q in range(route_ptr[r], route_ptr[r + 1]):
                i = route_links[q]
                through += link_lat[i]
                hold = occupy[op]
                if link_bt[i] > 0.0:               # a link of its own speed
                    hold = (occupy[op] * link_bt[i] / level_bt[lv] if level_bt[lv] > 0.0
                            else size[op] * link_bt[i])
                s = max(t, link_free[i])
                late = max(late, s - t + hold - occupy[op])
                link_free[i] = s + hold
                link_busy[i] += hold
            _push(ht, hp, hn, t + late + lat[lv] + through + wire[op],
                  op * 8 + (ARRIVE if eager[op] else DATA))
            hn += 1
        elif ev == CTS:                            # the sender may now send the data
            h = rank[op]
            d = peer[op]
            lv = _level(core[h], core[d], span)
            L, W = lat[lv], wire[op]
            sz = size[op]
            s = max(t, nic_free[h]) if reply[op] else max(t, cpu_free[h], nic_free[h])
            fl = flows and core[h] // cores_per_node != core[d] // cores_per_node
            cpu_free[h] = max(s, cpu_free[h]) + o_s + sz * O_s
            nic_free[h] = s + gap + (0.0 if fl else occupy[op])
            dep = s + o_s
            if (contention and lv > 0 and not fl
                    and core[h] // cores_per_node != core[d] // cores_per_node):
                node = core[h] // cores_per_node
                dep = max(dep, out_free[node])
                out_free[node] = dep + occupy[op]
            if fl or (routed and route[op] >= 0):
                _push(ht, hp, hn, dep, op * 8 + HOP)
            else:
                _push(ht, hp, hn, dep + L + W, op * 8 + DATA)
            hn += 1
            if not fl:                             # a flow's send is done when it is
                end[op] = dep + W
                note_op[0] = op
                note_t[0] = end[op]
                note_isstart[0] = False
                nn = 1
        if ev == -1:
            # a receive (op) met its message (link[op]) at time t
            r = op
            m = link[r]
            d = rank[r]
            tm = max(t, start[r], arrive[m])
            sz = size[m]
            if eager[m]:
                s = max(tm, cpu_free[d])
                cpu_free[d] = s + o_r + sz * O_r
                end[r] = cpu_free[d]
                note_op[nn] = r
                note_t[nn] = end[r]
                note_isstart[nn] = False
                nn += 1
                if ack[m]:                       # a synchronous send: acknowledged
                    end[m] = s + lat[_level(core[d], core[rank[m]], span)]
                    note_op[nn] = m
                    note_t[nn] = end[m]
                    note_isstart[nn] = False
                    nn += 1
            else:                                # clear to send, back to the sender
                s = max(tm, cpu_free[d])
                cpu_free[d] = s + o_r
                lv = _level(core[d], core[rank[m]], span)
                _push(ht, hp, hn, s + o_r + lat[lv], m * 8 + CTS)
                hn += 1
        if solve_at >= 0.0:
            # one FLOWS event pending at a time: a flow that starts now, or
            # the next to end, moves it (the one it replaces is passed over)
            if solve_at != fl_due:
                if hn == room:
                    return start, end, link, coll_last, link_busy, OUT_OF_ROOM
                _push(ht, hp, hn, solve_at, n * 8 + FLOWS)
                hn += 1
                fl_due = solve_at
            solve_at = -1.0
        # deliver notifications: dependants become ready when nothing is left
        for j in range(nn):
            o_, tt = note_op[j], note_t[j]
            began = note_isstart[j]
            lo, hi = (isucc_ptr[o_], isucc_ptr[o_ + 1]) if began else (succ_ptr[o_],
                                                                       succ_ptr[o_ + 1])
            for q in range(lo, hi):
                # (not one name for either array: a name bound to one array
                # or the other had its references counted per notification)
                w = isucc_idx[q] if began else succ_idx[q]
                if tt > ready_at[w]:
                    ready_at[w] = tt
                left[w] -= 1
                if left[w] == 0:
                    if hn == room:
                        return start, end, link, coll_last, link_busy, OUT_OF_ROOM
                    _push(ht, hp, hn, ready_at[w], w * 8 + READY)
                    hn += 1
    # what is still queued was never matched: its link is no partner
    _clear_queued(link, post_head)
    _clear_queued(link, unex_head)
    _clear_queued(link, coll_head)
    return start, end, link, coll_last, link_busy, events
