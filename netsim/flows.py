"""Max-min fair sharing of links among the messages crossing them at once.

With a topology and ``sharing: flows`` (netsim/topology.py), a message
between nodes is a *flow* from the moment it leaves its sender's CPU until
its last byte is through: it holds its sender's NIC, every link of its
route and its receiver's NIC at once, at one rate.  Whenever a flow starts
or ends, the engine (netsim/engine.py) asks ``share`` for every flow's new
rate: the max-min fair allocation (progressive filling).  All flows'
rates rise together until a link is full; the flows on it are frozen at
that rate, their use of other links is set aside, and the rest rise on,
until every flow is frozen.  A flow never runs faster than its NIC alone
would send it (rate 1).  With ``sharing: rtt_flows`` each flow carries a
weight, the inverse of its route's latency, and rises in proportion to
it: TCP's sharing of a bottleneck (a longer round trip grows its window
more slowly), and SimGrid's flow model.

Units: a flow's work is its message's NIC occupancy (seconds at its NIC's
speed), its rate a fraction of that speed.  A link of its own speed
(``link_bt``, seconds per byte; 0: as the message's network level) takes
``link_bt / unit`` of its capacity per unit of rate, where ``unit`` is the
flow's own seconds per byte at its NIC: a link twice as slow is full with
half the rate.

What it costs: one solve is linear in the flows in flight times their
route's length, plus the links' search per bottleneck; the engine solves
once per instant at which flows start or end (not once per message when
many start together).  When flows only end, ``reshare`` solves again only
the flows frozen at or above the lowest level among those that ended:
progressive filling freezes every flow below that level exactly as before
(a link a removed flow held had not filled below its level, and with less
on it fills later still), so those keep their rates, and the rest start
from what they leave of each link.  Fast flows end first, so most ends
touch few flows.  An all-to-all whose every rank posts all its sends at
once keeps P^2 flows in flight: use the default queues there at scale.
"""
from __future__ import annotations

import numpy as np
from numba import njit

FULL = 1.0            # a flow's fastest rate: its NIC's speed


@njit(cache=True, inline="always")
def _nlinks_of(op, route, route_ptr, nic):
    """How many links flow ``op`` holds: its route's, plus two NICs."""
    r = route[op]
    n = route_ptr[r + 1] - route_ptr[r] if r >= 0 else 0
    return n + (2 if nic else 0)


@njit(cache=True, inline="always")
def _link_of(op, j, route, route_ptr, route_links, nic, out_nic, in_nic):
    """The ``j``-th link flow ``op`` holds (its NICs last)."""
    r = route[op]
    n = route_ptr[r + 1] - route_ptr[r] if r >= 0 else 0
    if j < n:
        return route_links[route_ptr[r] + j]
    return out_nic[op] if j == n else in_nic[op]


@njit(cache=True, inline="always")
def _use(i, op, unit, link_bt):
    """How much of link ``i``'s capacity flow ``op`` takes per unit of rate."""
    return link_bt[i] / unit[op] if i < len(link_bt) and link_bt[i] > 0.0 else 1.0


@njit(cache=True)
def workspace(nlinks):
    """The per-link arrays ``share`` works in, for ``nlinks`` links (each
    solve leaves the first five as it found them, so they are made once per
    run), and ``load``: each link's capacity taken by the flows in flight,
    kept from solve to solve for ``reshare``."""
    return (np.ones(nlinks), np.zeros(nlinks), np.zeros(nlinks, np.int64),
            np.zeros(nlinks, np.int64), np.zeros(nlinks, np.int64), np.zeros(nlinks))


@njit(cache=True, inline="always")
def _taken(i, op, level, unit, phi, link_bt):
    """Link ``i``'s capacity that flow ``op``, frozen at ``level[op]``, takes."""
    return level[op] * _use(i, op, unit, link_bt) * phi[op] if level[op] < np.inf else 0.0


@njit(cache=True)
def share(act, na, rate, level, unit, phi, route, route_ptr, route_links, link_bt, nic,
          out_nic, in_nic, cap, weight, count, first, used, load):
    """Set ``rate[op]`` for the ``na`` flows ``act[:na]``: max-min fair on
    links of capacity 1 (a flow's NICs are links ``out_nic[op]`` and
    ``in_nic[op]`` when ``nic``), weighted by ``phi[op]`` (a flow of twice
    the weight gets twice the rate where they share a bottleneck), each at
    most FULL; ``level[op]``: the fill level it was frozen at (its rate
    over its weight), and ``load``: what they take of each link.  ``cap``,
    ``weight``, ``count``, ``first``, ``used`` and ``load`` are a
    ``workspace``: only the links these flows hold are touched."""
    if na == 0:
        return
    nused, flows = _rows(act, na, unit, phi, route, route_ptr, route_links, link_bt, nic,
                         out_nic, in_nic, weight, count, first, used)
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
def release(op, level, unit, phi, route, route_ptr, route_links, link_bt, nic, out_nic,
            in_nic, load):
    """Flow ``op`` ended: give back what it took of each of its links."""
    for j in range(_nlinks_of(op, route, route_ptr, nic)):
        i = _link_of(op, j, route, route_ptr, route_links, nic, out_nic, in_nic)
        load[i] -= _taken(i, op, level, unit, phi, link_bt)


@njit(cache=True)
def reshare(act, na, above, rate, level, unit, phi, route, route_ptr, route_links, link_bt,
            nic, out_nic, in_nic, cap, weight, count, first, used, load):
    """``share`` again after flows that were frozen at ``above`` or higher
    ended (and were ``release``d), none having started: only the flows
    frozen at ``above`` or higher are solved again, on what the others
    leave of each link; the others keep their rates (the module's
    docstring says why that is exact)."""
    # flows frozen with the ended ones, at the same level but computed in
    # another solve, may differ from it in the last bits: a margin takes
    # them in (solving more flows again is exact too)
    above = above * (1.0 - 1e-9)
    sub = np.empty(na, np.int64)
    ns = 0
    for a in range(na):
        if level[act[a]] >= above:
            sub[ns] = act[a]
            ns += 1
    if ns == 0:
        return
    # cap: 1 + what the flows solved again took of each link, then less
    # the link's whole load: what the flows kept leave of it
    for s in range(ns):
        op = sub[s]
        for j in range(_nlinks_of(op, route, route_ptr, nic)):
            i = _link_of(op, j, route, route_ptr, route_links, nic, out_nic, in_nic)
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
        k = _nlinks_of(op, route, route_ptr, nic)
        total += k
        for j in range(k):
            i = _link_of(op, j, route, route_ptr, route_links, nic, out_nic, in_nic)
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
        for j in range(_nlinks_of(op, route, route_ptr, nic)):
            i = _link_of(op, j, route, route_ptr, route_links, nic, out_nic, in_nic)
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
    while left > 0:
        # the link that fills first (a scan: a heap of the links was slower,
        # the solve's cost being the flows' links, not the bottlenecks)
        level, full = np.inf, -1
        for u in range(nused):
            i = used[u]
            if count[i] > 0:
                x = cap[i] / weight[i]
                if x < level:
                    level, full = x, i
        if full < 0:                   # no link holds them back (no NICs)
            for a in range(na):
                if not frozen[a]:
                    rate[act[a]] = FULL
                    level_of[act[a]] = np.inf
            return
        level = max(level, 0.0)
        # freeze its flows at that rate; their other links have that much less
        q = first[full]
        while count[full] > 0:
            a = flows[q]
            q += 1
            if frozen[a]:
                continue
            frozen[a] = True
            left -= 1
            op = act[a]
            rate[op] = min(level * phi[op], FULL)
            level_of[op] = level
            for j in range(_nlinks_of(op, route, route_ptr, nic)):
                i = _link_of(op, j, route, route_ptr, route_links, nic, out_nic, in_nic)
                w = _use(i, op, unit, link_bt) * phi[op]
                cap[i] -= level * w
                weight[i] -= w
                count[i] -= 1
