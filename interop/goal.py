"""LogGOPSim's GOAL text schedules: import and export.

GOAL (Hoefler et al.) describes per rank labelled operations and their
dependencies::

    num_ranks 2
    rank 0 {
    l1: calc 1000
    l2: send 8b to 1 tag 5
    l2 requires l1
    }

``send Nb to R tag T``, ``recv Nb from R tag T`` (R = -1: any source),
``calc T``; optional ``cpu``/``nic`` suffixes are accepted and ignored;
``lA requires lB`` (after completion), ``lA irequires lB`` (after start).
Times in GOAL files are integer nanoseconds here (LogGOPSim's unit is
whatever its L/o/g arguments use; give those in ns too).

Reading runs at compiled speed (interop/goal_scan.py: a quick pass that
bounds the sizes, then one that fills arrays, no Python object per line)
over the mapped file, a stretch at a time; errors name the file and line.

Export needs a schedule without analytic collectives (GOAL has no
collective op: simulate with decomposed algorithms).  Message contexts
(communicators) become distinct tags.
"""
from __future__ import annotations

import mmap
import os

import numpy as np

from netsim.engine import CALC, COLL, SEND
from netsim.schedule import Schedule, ScheduleError, constant, index_type

from . import goal_scan

# the keywords, in the order goal_scan.scan() takes them
_WORDS = tuple(np.frombuffer(w.encode(), np.uint8) for w in (
    "num_ranks", "rank", "{", "}", "send", "recv", "calc", "to", "from", "tag", "requires",
    "irequires"))

_WHAT = {
    goal_scan.NO_NUM_RANKS: "expected 'num_ranks N' first",
    goal_scan.RANK_RANGE: "rank beyond num_ranks {nranks}",
    goal_scan.OUTSIDE: "operation outside a 'rank N {{' block",
    goal_scan.SYNTAX: "cannot parse {line!r}",
    goal_scan.PEER_RANGE: "peer {peer} out of range (ranks 0..{last}, -1: any source)",
    goal_scan.UNKNOWN_LABEL: "dependency on a label its rank does not define: {line!r}",
    goal_scan.DUPLICATE_LABEL: "label defined twice in its rank: {line!r}",
    goal_scan.UNCLOSED: "this rank block is not closed by '}}' before the end of the file",
    goal_scan.TAG_RANGE: "tag out of range (a 32-bit integer): {line!r}",
}


# how much of the text is read before the pages behind are let go
CHUNK = 64 << 20


def _mapped(path: str):
    """The file mapped read-only: (mmap, uint8 array over it)."""
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                raise ScheduleError(f"{path}: empty GOAL file")
            m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as e:
        raise ScheduleError(f"{path}: cannot read GOAL file: {e.strerror}") from None
    return m, np.frombuffer(m, np.uint8)


def _let_go(m, upto: int) -> None:
    """Drop the mapped pages before byte ``upto`` from this process (they
    stay in the page cache): the text is read once, not held."""
    upto -= upto % mmap.PAGESIZE
    if upto > 0:
        m.madvise(mmap.MADV_DONTNEED, 0, upto)


def read_goal(path: str) -> Schedule:
    """Parse a GOAL file into a schedule (errors name the file and line).

    Compiled (interop/goal_scan.py): a quick pass bounds the operations
    and dependencies, a second fills arrays of that size, trimmed to what
    it found.  The file is mapped and read CHUNK bytes at a time, the pages
    behind let go, so that the text never takes its size in memory."""
    m, data = _mapped(path)
    n = len(data)
    ops = deps = p = 0
    while p < n:                                  # upper bounds: arrays trimmed below
        o, d, p = goal_scan.count(data, p, min(p + CHUNK, n))
        ops, deps = ops + o, deps + d
        _let_go(m, p)
    index = index_type(ops)                       # dependencies hold op indices
    a = (np.empty(ops, np.int32), np.empty(ops, np.int8), np.empty(ops, np.int32),
         np.empty(ops, np.int64), np.empty(ops, np.int32), np.empty(ops, np.float64),
         np.empty(deps, index), np.empty(deps, index), np.empty(deps, np.bool_))
    nops = ndeps = p = 0
    nranks, err = -1, goal_scan.MORE
    while err == goal_scan.MORE:
        nops, ndeps, nranks, err, p = goal_scan.scan(data, p, min(p + CHUNK, n), nops, ndeps,
                                                     nranks, *a, _WORDS)
        _let_go(m, p)
    if err == goal_scan.EMPTY:
        raise ScheduleError(f"{path}: empty GOAL file")
    if err:
        at = p
        lineno = int(np.count_nonzero(data[:at] == 10)) + 1
        stop = data[at:].tobytes().find(b"\n")
        line = data[at:at + stop if stop >= 0 else len(data)].tobytes()
        line = line.decode(errors="replace").split("//")[0].strip()
        w = line.replace(":", ": ", 1).split()          # "l1:send" as "l1: send"
        peer = next((w[i + 1] for i in range(len(w) - 1) if w[i] in ("to", "from")), "?")
        raise ScheduleError(f"{path}:{lineno}: " + _WHAT[err].format(
            line=line, nranks=nranks, peer=peer, last=nranks - 1))
    rank, kind, peer, size, tag, dur = (x[:nops] for x in a[:6])
    src, dst, start = (x[:ndeps] for x in a[6:])
    # GOAL has one context, no collectives, no trace events and no
    # synchronous sends: constant columns, which take no memory
    return Schedule(kind=kind, rank=rank, peer=peer, size=size, tag=tag,
                    ctx=np.zeros(nops, np.int32), dur=dur, coll=constant(-1, nops, np.int32),
                    event=constant(-1, nops, np.int64), sync=np.zeros(nops, bool),
                    dep_src=src, dep_dst=dst, dep_start=start,
                    coll_need=np.zeros(0, np.int32), nranks=nranks)


def write_goal(path: str, s: Schedule) -> None:
    """Write a schedule as GOAL (ranks in order, labels l<op index>)."""
    if (s.kind == COLL).any():
        raise ScheduleError("the schedule has analytic collectives, which GOAL cannot express; "
                            "set a decomposed algorithm (e.g. collectives: {default: binomial}) "
                            "in the platform")
    # one GOAL tag per (context, tag)
    keys = np.stack([s.ctx, s.tag], axis=1)
    _, tag_of = np.unique(keys, axis=0, return_inverse=True)
    tag_of = tag_of.reshape(-1)
    by_dst: dict = {}
    for a, b, st in zip(s.dep_src, s.dep_dst, s.dep_start):
        by_dst.setdefault(int(b), []).append((int(a), bool(st)))
    with open(path, "w") as f:
        f.write(f"num_ranks {s.nranks}\n")
        order = np.argsort(s.rank, kind="stable")
        cur = -1
        for i in order:
            r = int(s.rank[i])
            if r != cur:
                if cur >= 0:
                    f.write("}\n")
                for empty in range(cur + 1, r):
                    f.write(f"rank {empty} {{\n}}\n")
                f.write(f"rank {r} {{\n")
                cur = r
            k = int(s.kind[i])
            if k == CALC:
                f.write(f"l{i}: calc {int(round(s.dur[i] * 1e9))}\n")
            elif k == SEND:
                f.write(f"l{i}: send {int(s.size[i])}b to {int(s.peer[i])} tag {int(tag_of[i])}\n")
            else:
                f.write(f"l{i}: recv {int(s.size[i])}b from {int(s.peer[i])} "
                        f"tag {int(tag_of[i])}\n")
            for a, st in by_dst.get(int(i), []):
                f.write(f"l{i} {'irequires' if st else 'requires'} l{a}\n")
        if cur >= 0:
            f.write("}\n")
        for empty in range(cur + 1, s.nranks):
            f.write(f"rank {empty} {{\n}}\n")
