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

Export needs a schedule without analytic collectives (GOAL has no
collective op: simulate with decomposed algorithms).  Message contexts
(communicators) become distinct tags.
"""
from __future__ import annotations

import re

import numpy as np

from .engine import CALC, COLL, RECV, SEND
from .schedule import Builder, Schedule, ScheduleError

_OP = re.compile(r"^(\w+):\s*(send|recv|calc)\s+(.*)$")
_DEP = re.compile(r"^(\w+)\s+(requires|irequires)\s+(\w+)$")


def _operation(B: Builder, rank: int, nranks: int, what: str, w: list, where: str) -> int:
    """Add one ``send``/``recv``/``calc`` line's operation; its index."""
    if what == "calc":
        return B.op(CALC, rank, [], dur=int(w[0]) * 1e-9)
    size = int(w[0].rstrip("b"))
    peer = int(w[2])
    tag = int(w[4]) if len(w) > 4 and w[3] == "tag" else 0
    if not -1 <= peer < nranks:
        raise ScheduleError(f"{where}: peer {peer} out of range")
    return B.op(SEND if what == "send" else RECV, rank, [], peer=peer, size=size, tag=tag)


def _dependencies(B: Builder, deps: list, labels: dict, path: str, rank: int) -> None:
    """A rank's ``a requires b`` lines, once all its labels are known."""
    for a, how, b in deps:
        if a not in labels or b not in labels:
            raise ScheduleError(f"{path}: rank {rank}: dependency on unknown "
                                f"label {a if a not in labels else b}")
        B.src.append(labels[b])
        B.dst.append(labels[a])
        B.isstart.append(how == "irequires")


def read_goal(path: str) -> Schedule:
    """Parse a GOAL file into a schedule (errors name the file and line)."""
    nranks, rank, labels, deps, B = None, None, {}, [], None
    try:
        f = open(path)
    except OSError as e:
        raise ScheduleError(f"{path}: cannot read GOAL file: {e.strerror}") from None
    with f:
        for lineno, raw in enumerate(f, 1):
            line = raw.split("//")[0].strip()
            where = f"{path}:{lineno}"
            if not line:
                continue
            if line.startswith("num_ranks"):
                nranks = int(line.split()[1])
                B = Builder(nranks)
                continue
            if B is None:
                raise ScheduleError(f"{where}: expected 'num_ranks N' first")
            m = re.match(r"^rank\s+(\d+)\s*\{$", line)
            if m:
                rank, labels = int(m.group(1)), {}
                if rank >= nranks:
                    raise ScheduleError(f"{where}: rank {rank} >= num_ranks {nranks}")
            elif line == "}":
                _dependencies(B, deps, labels, path, rank)
                rank, deps = None, []
            elif rank is None:
                raise ScheduleError(f"{where}: operation outside a 'rank N {{' block")
            elif m := _OP.match(line):
                label, what, rest = m.groups()
                try:
                    labels[label] = _operation(B, rank, nranks, what, rest.split(), where)
                except (IndexError, ValueError):
                    raise ScheduleError(f"{where}: cannot parse {line!r}") from None
            elif m := _DEP.match(line):
                deps.append(m.groups())
            else:
                raise ScheduleError(f"{where}: cannot parse {line!r}")
    if B is None:
        raise ScheduleError(f"{path}: empty GOAL file")
    return B.done()


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
