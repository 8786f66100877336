"""LogGOPSim-compatible event loop, for GOAL schedules (``--loggops``).

The default engine (netsim/engine.py) models a rendezvous handshake, wire
time and NIC contention.  LogGOPSim (Hoefler, Schneider, Lumsdaine, HPDC
2010) charges messages differently, and its users compare numbers, so this
loop follows its rules exactly (with the same L, o, g, G, O, S):

* an operation waits until its CPU (and for a send, the NIC's send gap) is
  free: it is put back into the queue at that time, not started early;
* a send starting at t occupies the CPU until t + o + (s-1) O and the
  NIC until t + g + (s-1) G; its message is at the receiver at t + o + L;
  an eager send (s <= S) is complete at t;
* the receiver handles an arriving message once its CPU and its NIC's
  receive gap are free, at t': CPU busy until t' + o + max((s-1) O,
  (s-1) G), NIC until t' + g + (s-1) G; a posted matching receive is then
  complete at t'; otherwise the message waits, and a later receive is
  complete when it is posted;
* a rendezvous send (s > S) completes when its message is matched, and its
  rank's CPU and NIC clocks are moved up to that time;
* a rank finishes when its CPU is last free;
* operations that become ready are queued at their rank's clock, by rank,
  sends before receives before computations; ties in time go in order of
  first queueing; a receive is posted at its queued time;
* (s-1) is charged even for empty messages, with LogGOPSim's unsigned
  arithmetic.

Only CALC, SEND and RECV: GOAL has no collective op.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .engine import CALC, OUT_OF_ROOM, READY, RECV, SEND, _clear_queued, _matches, _pop, _push

MSG = 1


# The matching queues as helpers (the default engine keeps the same few
# lines inline: as helpers they cost it 11-15 % of its speed)
@njit(cache=True, inline="always")
def _unlink(head, tail, link, r, prev, m):
    """Remove entry m (after prev) from rank r's queue."""
    if prev < 0:
        head[r] = link[m]
    else:
        link[prev] = link[m]
    if tail[r] == m:
        tail[r] = prev
    link[m] = -1


@njit(cache=True, inline="always")
def _take_message(head, tail, link, r, ctx, peer, tag, rank, recv):
    """The oldest unexpected message of rank r that receive ``recv`` matches,
    removed from the queue (a list linked through ``link``); -1 if none."""
    prev, m = -1, head[r]
    while m >= 0 and not _matches(ctx, peer, tag, rank, recv, m):
        prev, m = m, link[m]
    if m >= 0:
        _unlink(head, tail, link, r, prev, m)
    return m


@njit(cache=True, inline="always")
def _take_receive(head, tail, link, r, ctx, peer, tag, rank, msg):
    """The oldest posted receive of rank r that matches message ``msg``,
    removed from the queue; -1 if none."""
    prev, m = -1, head[r]
    while m >= 0 and not _matches(ctx, peer, tag, rank, m, msg):
        prev, m = m, link[m]
    if m >= 0:
        _unlink(head, tail, link, r, prev, m)
    return m


@njit(cache=True, inline="always")
def _append(head, tail, link, r, op):
    """Add op at the end of rank r's queue."""
    if tail[r] < 0:
        head[r] = op
    else:
        link[tail[r]] = op
    tail[r] = op





@njit(cache=True, inline="always")
def _recv_charge(sz, O, G):
    """max((s-1) O, (s-1) G) as LogGOPSim computes it, in unsigned 64-bit
    arithmetic: for an empty message both terms wrap around, and the
    larger wrapped value is the smaller of -O, -G that is not zero."""
    if sz > 0:
        return max((sz - 1) * O, (sz - 1) * G)
    if O == 0:
        return -G
    if G == 0:
        return -O
    return -min(O, G)


# Ties in time go in order of first queueing (LogGOPSim's STRICT_ORDER): a
# heap entry's payload is (queueing number << 32) | (op << 1) | event, so
# that the payload orders ties by that number and still says what it is.
# Hence at most 2**30 ops (the queueing numbers, at most two per op, stay
# below 2**31).
MAX_OPS = 2**30


@njit(cache=True, inline="always")
def _entry(nseq, op, ev):
    return (nseq << 32) | (op << 1) | ev


@njit(cache=True)
def simulate_loggops(kind, rank, peer, size, tag, ctx, dur, ndeps, succ_ptr, succ_idx,
                     isucc_ptr, isucc_idx, nranks, L, o, g, G, O, S, room):
    """Returns (start, end, matched, finish per rank, events); events is
    OUT_OF_ROOM if the heap needed more than ``room`` entries (see
    netsim/engine.py).  ``ndeps`` is counted down in place; at most
    MAX_OPS ops."""
    n = len(kind)
    start = np.full(n, np.nan)
    end = np.full(n, np.nan)
    left = ndeps
    index = succ_idx.dtype
    cpu = np.zeros(nranks)            # nexto
    gs = np.zeros(nranks)             # nextgs: the NIC's send gap
    gr = np.zeros(nranks)             # nextgr: the NIC's receive gap
    post_head = np.full(nranks, -1, np.int64)
    post_tail = np.full(nranks, -1, np.int64)
    unex_head = np.full(nranks, -1, np.int64)
    unex_tail = np.full(nranks, -1, np.int64)
    # the matching queues are lists linked through ``link``, which once an
    # op is matched holds its partner instead
    link = np.full(n, -1, index)
    ht = np.empty(room)
    hp = np.empty(room, np.int64)
    hn = 0
    nseq = 0
    for i in range(n):
        if left[i] == 0:
            _push(ht, hp, hn, 0.0, _entry(nseq, i, READY))
            hn += 1
            nseq += 1
    events = 0
    note_op = np.empty(4, np.int64)
    note_st = np.empty(4, np.bool_)
    freed = np.empty(16, np.int64)
    while hn > 0:
        t, payload = _pop(ht, hp, hn)
        hn -= 1
        op = (payload & 0xFFFFFFFF) >> 1
        ev = payload & 1
        events += 1
        nn = 0
        if ev == READY:
            h = rank[op]
            k = kind[op]
            # sends wait for CPU and send gap, computations for the CPU; a
            # receive is posted at its queued time (LogGOPSim checks nothing)
            busy = max(cpu[h], gs[h]) if k == SEND else (cpu[h] if k == CALC else t)
            if busy > t:                          # not yet: back into the queue
                _push(ht, hp, hn, busy, payload)
                hn += 1
                continue
            start[op] = t
            note_op[0] = op
            note_st[0] = True
            nn = 1
            if k == CALC:
                cpu[h] = t + dur[op]
                end[op] = t + dur[op]
                note_op[1] = op
                note_st[1] = False
                nn = 2
            elif k == SEND:
                sz = size[op]
                cpu[h] = t + o + (sz - 1) * O
                gs[h] = t + g + (sz - 1) * G
                _push(ht, hp, hn, t + o + L, _entry(nseq, op, MSG))
                hn += 1
                nseq += 1
                if sz <= S:
                    end[op] = t
                    note_op[1] = op
                    note_st[1] = False
                    nn = 2
            else:                                 # RECV: an already handled message?
                m = _take_message(unex_head, unex_tail, link, h, ctx, peer, tag, rank, op)
                if m >= 0:
                    link[op] = m
                    link[m] = op
                    end[op] = t
                    note_op[1] = op
                    note_st[1] = False
                    nn = 2
                    if size[m] > S:               # rendezvous: the sender is released
                        s_ = rank[m]
                        cpu[s_] = max(cpu[s_], t)
                        gs[s_] = max(gs[s_], t)
                        end[m] = t
                        note_op[2] = m
                        note_st[2] = False
                        nn = 3
                else:
                    _append(post_head, post_tail, link, h, op)
        else:                                     # MSG at the receiver
            r = peer[op]
            busy = max(cpu[r], gr[r])
            if busy > t:
                _push(ht, hp, hn, busy, payload)
                hn += 1
                continue
            sz = size[op]
            cpu[r] = t + o + _recv_charge(sz, O, G)
            gr[r] = t + g + (sz - 1) * G
            m = _take_receive(post_head, post_tail, link, r, ctx, peer, tag, rank, op)
            if m >= 0:
                link[m] = op
                link[op] = m
                end[m] = t
                note_op[0] = m
                note_st[0] = False
                nn = 1
                if sz > S:
                    s_ = rank[op]
                    cpu[s_] = max(cpu[s_], t)
                    gs[s_] = max(gs[s_], t)
                    end[op] = t
                    note_op[1] = op
                    note_st[1] = False
                    nn = 2
            else:
                _append(unex_head, unex_tail, link, r, op)
        # deliver: ops whose dependencies are now all satisfied are queued
        # at their rank's clock (CPU, and the send gap for sends), by rank,
        # sends before receives before computations
        nf = 0
        for j in range(nn):
            o_ = note_op[j]
            if note_st[j]:
                lo, hi, lst = isucc_ptr[o_], isucc_ptr[o_ + 1], isucc_idx
            else:
                lo, hi, lst = succ_ptr[o_], succ_ptr[o_ + 1], succ_idx
            for q in range(lo, hi):
                w = lst[q]
                left[w] -= 1
                if left[w] == 0:
                    if nf == len(freed):
                        freed = np.concatenate((freed, np.empty(nf, np.int64)))
                    freed[nf] = w
                    nf += 1
        if nf:
            keys = np.empty(nf, np.int64)
            for j in range(nf):
                w = freed[j]
                kw = 0 if kind[w] == SEND else (1 if kind[w] == RECV else 2)
                keys[j] = (rank[w] * 3 + kw) * n + w
            for j in np.argsort(keys, kind="mergesort"):
                w = freed[j]
                h = rank[w]
                tw = max(cpu[h], gs[h]) if kind[w] == SEND else cpu[h]
                if hn == room:
                    return start, end, link, cpu, OUT_OF_ROOM
                _push(ht, hp, hn, tw, _entry(nseq, w, READY))
                hn += 1
                nseq += 1
    finish = cpu.copy()
    for i in range(n):
        if end[i] > finish[rank[i]]:
            finish[rank[i]] = end[i]
    _clear_queued(link, post_head)                # never matched
    _clear_queued(link, unex_head)
    return start, end, link, finish, events
