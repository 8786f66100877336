"""Max-min fair sharing of links among the messages crossing them at once.

With a topology and ``sharing: flows`` (netsim/topology.py), a message
between nodes is a *flow* from the moment it leaves its sender's CPU until
its last byte is through: it holds its sender's NIC, every link of its
route and its receiver's NIC at once, at one rate.  Whenever flows start
or end, the engine (netsim/engine.py) asks ``resolve`` for the new rates:
the max-min fair allocation (progressive filling; ``share`` computes it
from scratch for all flows in flight, the reference).  All flows'
rates rise together until a link is full; the flows on it are frozen at
that rate, their use of other links is set aside, and the rest rise on,
until every flow is frozen.  A flow never runs faster than its NIC alone
would send it (rate 1).  With ``sharing: rtt_flows`` each flow carries a
weight, the inverse of its route's latency, and rises in proportion to
it: TCP's sharing of a bottleneck (a longer round trip grows its window
more slowly), and SimGrid's flow model.

Flows are numbered by the caller (the engine numbers the flows in flight
from 0, reusing a number once its flow ends): below, ``op`` is such a
number, and ``route[op]``, ``unit[op]``, ... are that flow's.

Units: a flow's work is its message's NIC occupancy (seconds at its NIC's
speed), its rate a fraction of that speed.  A link of its own speed
(``link_bt``, seconds per byte; 0: as the message's network level) takes
``link_bt / unit`` of its capacity per unit of rate, where ``unit`` is the
flow's own seconds per byte at its NIC: a link twice as slow is full with
half the rate.

What it costs: one solve is linear in the flows in flight times their
route's length, plus the links' search per bottleneck; the engine solves
once per instant at which flows start or end (not once per message when
many start together), and then ``reshare`` solves again only the flows
the change can move (``affected``): those frozen at or above a level
below which nothing changes, and linked to the flows that started or
ended through links they hold.  Progressive filling freezes every flow
below that level exactly as before, so those keep their rates; flows
that share no link with the change, directly or through other such
flows, are a max-min problem of their own, unchanged; the rest start
from what the others leave of each link.  For flows that ended, the
level is the lowest they were frozen at (a link a removed flow held had
not filled below its level, and with less on it fills later still); for
flows that started, a bound on where their links can fill first
(``quiet_below``).  Each link keeps the list of its flows in flight for
that.  An all-to-all whose every rank posts all its sends at once keeps
P^2 flows in flight: use the default queues there at scale.

The reach (the topology's ``reach``, default 2): linked flows can span
the whole machine (a periodic halo links every node to the next through
the NICs), so that one start or end moves thousands of flows at 16,384
ranks, each by less the farther it is.  With ``reach`` R the walk stops
R links from the change: the flows on the changed flows' links, and
(R = 2) on those flows' other links, are solved again on what the others
leave of each link; the flows beyond keep their rates until a change
comes near them.  No link is ever over-full (the flows solved again
share only what the others leave) and no rate drops to zero, but a flow
beyond the reach may run slower or faster than max-min would let it for
a while.  Measured against the exact solve (reach 0), halo + allreduce
on a 4:1 tree (bench/netsim_speed.py): predictions +0.04 % at 2,048
ranks and +0.02 % at 16,384, and the same to the last digit on all 55
cases of the SimGrid comparison, while the run at 16,384 ranks took
26 s rather than 976 s (NIC contention alone: 7.9 s).  With so few
flows solved a time, the engine keeps each flow's end in a heap (one
entry a flow, moved as it is solved again) rather than scanning every
flow in flight for the next, and numbers the flows in flight rather
than indexing them by op: 9 s against 4 s for NIC contention alone.
"""
from __future__ import annotations

import numpy as np
from numba import njit

FULL = 1.0            # a flow's fastest rate: its NIC's speed


@njit(cache=True, inline="always")
def _span(op, route, route_ptr, nic):
    """Where flow ``op``'s links are: positions ``lo`` to ``end``, those
    below ``hi`` in its route's links, then its two NICs (``out_nic[op]``
    at ``hi``, ``in_nic[op]`` after).  The loops read these once per flow
    and write each link's expression out: a function per link (even
    inlined) made each solve four to six times slower."""
    r = route[op]
    lo, hi = (route_ptr[r], route_ptr[r + 1]) if r >= 0 else (0, 0)
    return lo, hi, hi + (2 if nic else 0)


@njit(cache=True, inline="always")
def _use(i, op, unit, link_bt):
    """How much of link ``i``'s capacity flow ``op`` takes per unit of rate."""
    return link_bt[i] / unit[op] if i < len(link_bt) and link_bt[i] > 0.0 else 1.0


@njit(cache=True)
def workspace(nlinks):
    """The per-link arrays ``share`` works in, for ``nlinks`` links (each
    solve leaves the first five as it found them, so they are made once per
    run), and ``load`` and ``held``: each link's capacity taken by the
    flows in flight and their weights on it (use per unit of rate times
    weight), kept from solve to solve for ``reshare`` and ``quiet_below``."""
    return (np.ones(nlinks), np.zeros(nlinks), np.zeros(nlinks, np.int64),
            np.zeros(nlinks, np.int64), np.zeros(nlinks, np.int64), np.zeros(nlinks),
            np.zeros(nlinks))


@njit(cache=True, inline="always")
def _taken(i, op, level, unit, phi, link_bt):
    """Link ``i``'s capacity that flow ``op``, frozen at ``level[op]``, takes."""
    return level[op] * _use(i, op, unit, link_bt) * phi[op] if level[op] < np.inf else 0.0


@njit(cache=True)
def share(act, na, rate, level, unit, phi, route, route_ptr, route_links, link_bt, nic,
          out_nic, in_nic, cap, weight, count, first, used, load, held):
    """Set ``rate[op]`` for the ``na`` flows ``act[:na]`` from scratch: max-min fair on
    links of capacity 1 (a flow's NICs are links ``out_nic[op]`` and
    ``in_nic[op]`` when ``nic``), weighted by ``phi[op]`` (a flow of twice
    the weight gets twice the rate where they share a bottleneck), each at
    most FULL; ``level[op]``: the fill level it was frozen at (its rate
    over its weight), and ``load`` and ``held``: what they take of each
    link, and their weight on it.  ``cap``, ``weight``, ``count``,
    ``first``, ``used``, ``load`` and ``held`` are a ``workspace``: only
    the links these flows hold are touched."""
    if na == 0:
        return
    nused, flows = _rows(act, na, unit, phi, route, route_ptr, route_links, link_bt, nic,
                         out_nic, in_nic, weight, count, first, used)
    for u in range(nused):
        held[used[u]] = weight[used[u]]
    _fill(act, na, rate, level, unit, phi, route, route_ptr, route_links, link_bt, nic,
          out_nic, in_nic, cap, weight, count, first, used, nused, flows)
    _settle(used, nused, cap, weight, count, load)


@njit(cache=True)
def _settle(used, nused, cap, weight, count, load):
    """Each used link's load from what the solve left of it, and the
    workspace as it was."""
    for u in range(nused):
        i = used[u]
        load[i] = 1.0 - cap[i]
        cap[i] = 1.0
        weight[i] = 0.0
        count[i] = 0


@njit(cache=True)
def lists(nlinks, nflows, route_ptr, nic):
    """Each link's flows in flight, as doubly linked lists through the
    flows' memberships (flow ``op``'s ``k``-th link is slot ``op * per +
    k``, ``per`` a power of two: a slot's flow is a shift away, where a
    division per hop cost more than the rest of the walk): ``per``, the
    heads per link, next and previous per slot, and marks for
    ``affected`` (per link, per flow)."""
    longest = 0
    for r in range(len(route_ptr) - 1):
        longest = max(longest, route_ptr[r + 1] - route_ptr[r])
    per = 1
    while per < longest + (2 if nic else 0):
        per *= 2
    # 32-bit slots: half the memory, and enough for 2**31 memberships
    return (per, np.full(nlinks, -1, np.int64), np.empty(nflows * per, np.int32),
            np.empty(nflows * per, np.int32), np.zeros(nlinks, np.bool_),
            np.zeros(nflows, np.bool_))


@njit(cache=True)
def enter(op, level, unit, phi, route, route_ptr, route_links, link_bt, nic, out_nic, in_nic,
          held, per, head, nxt, prv):
    """Flow ``op`` started: its weight on each of its links, and it on
    their lists; no rate yet (its level infinite until solved: it takes
    nothing)."""
    level[op] = np.inf
    lo, hi, end = _span(op, route, route_ptr, nic)
    for q in range(lo, end):
        i = route_links[q] if q < hi else out_nic[op] if q == hi else in_nic[op]
        held[i] += _use(i, op, unit, link_bt) * phi[op]
        s = op * per + q - lo
        nxt[s] = head[i]
        prv[s] = -1
        if head[i] >= 0:
            prv[head[i]] = s
        head[i] = s


@njit(cache=True)
def release(op, level, unit, phi, route, route_ptr, route_links, link_bt, nic, out_nic,
            in_nic, load, held, per, head, nxt, prv):
    """Flow ``op`` ended: give back what it took of each of its links, and
    leave their lists."""
    lo, hi, end = _span(op, route, route_ptr, nic)
    for q in range(lo, end):
        i = route_links[q] if q < hi else out_nic[op] if q == hi else in_nic[op]
        load[i] -= _taken(i, op, level, unit, phi, link_bt)
        held[i] -= _use(i, op, unit, link_bt) * phi[op]
        s = op * per + q - lo
        if prv[s] >= 0:
            nxt[prv[s]] = nxt[s]
        else:
            head[i] = nxt[s]
        if nxt[s] >= 0:
            prv[nxt[s]] = prv[s]


@njit(cache=True)
def affected(seeds, nseeds, started, above, na, level, route, route_ptr, route_links, nic,
             out_nic, in_nic, per, head, nxt, seen_link, seen_op, reach=0):
    """The flows whose rates the flows ``seeds[:nseeds]`` (the first
    ``started`` started, the others ended) can move: the started ones; on
    the seeds' links, every flow frozen at ``above`` or higher (or not
    solved yet), then on those flows' links, and so on.  Beyond them,
    every flow is either frozen below ``above`` (as before) or shares no
    link with them (a max-min problem of its own, unchanged).  ``na``:
    the flows in flight.  ``reach`` > 0 stops the walk that many links
    from the seeds (1: the flows on the seeds' own links; 2: also those on
    these flows' other links): the module's docstring says what that
    costs in accuracy."""
    # flows frozen with the ended ones, at the same level but computed in
    # another solve, may differ from it in the last bits: a margin takes
    # them in (solving more flows again is exact too)
    above = above * (1.0 - 1e-9)
    sub = np.empty(na, np.int64)
    ns = 0
    # room for every link at once (each is marked when listed), so that the
    # list is never replaced: a list the walk could rebind made numba count
    # its references at every step (a tenth of rtt_flows' time)
    todo = np.empty(len(seen_link), np.int64)
    nt = 0
    for k in range(nseeds):
        op = seeds[k]
        lo, _, end = _span(op, route, route_ptr, nic)
        if k < started and end == lo:    # on no link: on no list either
            seen_op[op] = True
            sub[ns] = op
            ns += 1
        nt = _to_visit(op, route, route_ptr, route_links, nic, out_nic, in_nic, seen_link,
                       todo, nt)
    shift = 0
    while (1 << shift) < per:
        shift += 1
    t = 0
    layer_end = nt                       # the links found so far are one link away
    depth = 1
    while t < nt:
        if t == layer_end:
            depth += 1
            layer_end = nt
        s = head[todo[t]]
        t += 1
        while s >= 0:
            op = s >> shift
            s = nxt[s]
            if seen_op[op] or level[op] < above:
                continue
            seen_op[op] = True
            sub[ns] = op
            ns += 1
            if reach <= 0 or depth < reach:
                nt = _to_visit(op, route, route_ptr, route_links, nic, out_nic, in_nic,
                               seen_link, todo, nt)
    for k in range(nt):                  # the marks as they were
        seen_link[todo[k]] = False
    for k in range(ns):
        seen_op[sub[k]] = False
    return sub, ns


# inlined: a call per flow walked counted the references of seven arrays
@njit(cache=True, inline="always")
def _to_visit(op, route, route_ptr, route_links, nic, out_nic, in_nic, seen_link, todo, nt):
    """Flow ``op``'s links not yet seen, marked and appended to
    ``todo[:nt]`` (room for every link); the list's new length."""
    lo, hi, end = _span(op, route, route_ptr, nic)
    for q in range(lo, end):
        i = route_links[q] if q < hi else out_nic[op] if q == hi else in_nic[op]
        if not seen_link[i]:
            seen_link[i] = True
            todo[nt] = i
            nt += 1
    return nt


@njit(cache=True)
def quiet_below(new, nn, unit, phi, route, route_ptr, route_links, link_bt, nic, out_nic,
                in_nic, weight, load, held):
    """A level below which no link of the ``nn`` flows ``new[:nn]`` (just
    started, ``enter``ed) can fill when they join: a link with load l, the
    new flows' weight w_new and all its flows' weight w fills no lower
    than (1 - l) / w_new (what the others take at most, their final load)
    nor than 1 / w (all rising alike), so below the least of those over
    the new flows' links every freeze happens as before."""
    for s in range(nn):                  # the new flows' weight per link
        op = new[s]
        lo, hi, end = _span(op, route, route_ptr, nic)
        for q in range(lo, end):
            i = route_links[q] if q < hi else out_nic[op] if q == hi else in_nic[op]
            weight[i] += _use(i, op, unit, link_bt) * phi[op]
    low = np.inf
    for s in range(nn):
        op = new[s]
        lo, hi, end = _span(op, route, route_ptr, nic)
        for q in range(lo, end):
            i = route_links[q] if q < hi else out_nic[op] if q == hi else in_nic[op]
            if weight[i] > 0.0:
                low = min(low, max((1.0 - load[i]) / weight[i], 1.0 / held[i]))
    for s in range(nn):                  # the workspace as it was
        op = new[s]
        lo, hi, end = _span(op, route, route_ptr, nic)
        for q in range(lo, end):
            weight[route_links[q] if q < hi else out_nic[op] if q == hi else in_nic[op]] = 0.0
    return low


@njit(cache=True)
def resolve(t, seeds, nseeds, ngone, above, act, na, left, since, end_at, rate, level, unit,
            phi, route, route_ptr, route_links, link_bt, nic, out_nic, in_nic, cap, weight,
            count, first, used, load, held, per, head, nxt, seen_link, seen_op, reach=0):
    """The engine's solve at time ``t``: ``seeds[:nseeds]`` the flows that
    started since the last solve (``enter``ed), then the ``ngone`` that
    ended now (``release``d, ``above`` the lowest level they were frozen
    at); ``act[:na]`` the flows in flight.  The flows the change can move
    get their new rates, their work ``left`` counted to ``t`` (``since``)
    and when they end at the new rate (``end_at``); ``reach``: as
    ``affected``'s.  Returns those flows (``sub[:ns]``)."""
    started = nseeds - ngone
    if started == na:                    # all in flight are new: all solved
        sub, ns = act, na
    else:
        if started > 0:
            above = min(above, quiet_below(seeds, started, unit, phi, route, route_ptr,
                                           route_links, link_bt, nic, out_nic, in_nic, weight,
                                           load, held))
        sub, ns = affected(seeds, nseeds, started, above, na, level, route, route_ptr,
                           route_links, nic, out_nic, in_nic, per, head, nxt, seen_link,
                           seen_op, reach)
    for k in range(ns):                  # only their rates change
        m = sub[k]
        left[m] -= rate[m] * (t - since[m])
        since[m] = t
    reshare(sub, ns, rate, level, unit, phi, route, route_ptr, route_links, link_bt, nic,
            out_nic, in_nic, cap, weight, count, first, used, load)
    for k in range(ns):
        m = sub[k]
        end_at[m] = t + left[m] / rate[m] if rate[m] > 0.0 else np.inf
    return sub, ns


@njit(cache=True)
def reshare(sub, ns, rate, level, unit, phi, route, route_ptr, route_links, link_bt, nic,
            out_nic, in_nic, cap, weight, count, first, used, load):
    """``share`` again after flows ended (``release``d) or started
    (``enter``ed), for the flows ``sub[:ns]`` they can move (``affected``)
    only, on what the others leave of each link; the others keep their
    rates (the module's docstring says why that is exact)."""
    if ns == 0:
        return
    # cap: 1 + what the flows solved again took of each link, then less
    # the link's whole load: what the flows kept leave of it
    for s in range(ns):
        op = sub[s]
        lo, hi, end = _span(op, route, route_ptr, nic)
        for q in range(lo, end):
            i = route_links[q] if q < hi else out_nic[op] if q == hi else in_nic[op]
            cap[i] += _taken(i, op, level, unit, phi, link_bt)
    nused, flows = _rows(sub, ns, unit, phi, route, route_ptr, route_links, link_bt, nic,
                         out_nic, in_nic, weight, count, first, used)
    for u in range(nused):
        i = used[u]
        cap[i] -= load[i]
    _fill(sub, ns, rate, level, unit, phi, route, route_ptr, route_links, link_bt, nic,
          out_nic, in_nic, cap, weight, count, first, used, nused, flows)
    _settle(used, nused, cap, weight, count, load)


@njit(cache=True)
def _rows(act, na, unit, phi, route, route_ptr, route_links, link_bt, nic, out_nic, in_nic,
          weight, count, first, used):
    """The links the flows hold (``used``, how many: returned), each one's
    flows and their use of it per unit of rate (``count``, ``weight``),
    and its flows' positions in ``act`` as compressed rows (``flows``
    from ``first[link]``, rows in the order of ``used``)."""
    nused = 0
    total = 0
    for a in range(na):
        op = act[a]
        lo, hi, end = _span(op, route, route_ptr, nic)
        total += end - lo
        for q in range(lo, end):
            i = route_links[q] if q < hi else out_nic[op] if q == hi else in_nic[op]
            if count[i] == 0:
                used[nused] = i
                nused += 1
            count[i] += 1
            weight[i] += _use(i, op, unit, link_bt) * phi[op]
    at = 0
    for u in range(nused):
        i = used[u]
        first[i] = at
        at += count[i]
    flows = np.empty(total, np.int64)
    for a in range(na):
        op = act[a]
        lo, hi, end = _span(op, route, route_ptr, nic)
        for q in range(lo, end):
            i = route_links[q] if q < hi else out_nic[op] if q == hi else in_nic[op]
            flows[first[i]] = a
            first[i] += 1
    for u in range(nused):             # back to each row's start
        i = used[u]
        first[i] -= count[i]
    return nused, flows


@njit(cache=True)
def _fill(act, na, rate, level_of, unit, phi, route, route_ptr, route_links, link_bt, nic,
          out_nic, in_nic, cap, weight, count, first, used, nused, flows):
    """Progressive filling: raise every unfrozen flow's rate alike (in
    proportion to its weight) until a link is full, freeze the flows on
    it, and go on with the rest."""
    frozen = np.zeros(na, np.bool_)
    left = na
    # the level at which each link fills, kept as its flows freeze: the
    # scan below then compares (a division per link and bottleneck cost
    # more than the rest of the solve)
    fills = np.empty(len(cap))
    for u in range(nused):
        i = used[u]
        fills[i] = cap[i] / weight[i] if count[i] > 0 else np.inf
    while left > 0:
        # the link that fills first (a scan: a heap of the links was slower,
        # the solve's cost being the flows' links, not the bottlenecks)
        level, full = np.inf, -1
        for u in range(nused):
            i = used[u]
            if fills[i] < level:
                level, full = fills[i], i
        if full < 0:                   # no link holds them back (no NICs)
            for a in range(na):
                if not frozen[a]:
                    rate[act[a]] = FULL
                    level_of[act[a]] = np.inf
            return
        level = max(level, 0.0)
        # freeze its flows at that rate; their other links have that much less
        row = first[full]
        while count[full] > 0:
            a = flows[row]
            row += 1
            if frozen[a]:
                continue
            frozen[a] = True
            left -= 1
            op = act[a]
            rate[op] = min(level * phi[op], FULL)
            level_of[op] = level
            lo, hi, end = _span(op, route, route_ptr, nic)
            for q in range(lo, end):
                i = route_links[q] if q < hi else out_nic[op] if q == hi else in_nic[op]
                w = _use(i, op, unit, link_bt) * phi[op]
                cap[i] -= level * w
                weight[i] -= w
                count[i] -= 1
                fills[i] = cap[i] / weight[i] if count[i] > 0 else np.inf
