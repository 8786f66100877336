"""Rank classes of one small trace, each with its communication sequence
in relative form: peers as grid offsets, communicators as roles.

``class_sequences(trace, layout)`` gives, per position class, the calls
every member makes (checked identical across members) and each member's
computation per call.  What the extrapolation matches across the small
traces is exactly these sequences.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mpimodel import ops

from .layout import ExtrapolationError, Layout

# ops whose peer is a partner rank (relative to the caller) rather than a root
_RELATIVE = ops.POINT_TO_POINT | {o.op for o in ops.TABLE if o.kind == "onesided"}
# what must be the same for every member of a class and at every N
IDENTITY = ["op", "crole", "pk", "pabs", "tag", "rk", "rabs", "rtag", "nrole", "flags",
            "started", "wildcard", "req", "reqs", "scounts", "rcounts"]
BYTES = ["sbytes", "rbytes"]


@dataclass
class ClassSequence:
    """One position class at one N: ``calls`` (one row per event: the
    IDENTITY columns, the peer offsets ``p0..``/``r0..``, ``sbytes``,
    ``rbytes``, ``site``, ``polls``), ``members`` (world ranks), ``cpu``
    and ``comp`` (members x events, seconds)."""
    name: str
    calls: pd.DataFrame
    members: np.ndarray
    cpu: np.ndarray
    comp: np.ndarray


def slice_axes(members, layout: Layout) -> tuple[int, ...] | None:
    """The axes a communicator keeps when it is a slice of the process
    grid: its members are the ranks that share their coordinates along
    every other axis, in row-major order (as Cart_sub makes them, or a
    Split by row or column keyed by rank).  None for any other group."""
    members = np.asarray(members, np.int64)
    if not len(members) or members.max() >= layout.size:
        return None
    c = layout.coords(members)
    fixed = tuple(j for j in range(len(layout.dims)) if (c[:, j] == c[0, j]).all())
    kept = tuple(j for j in range(len(layout.dims)) if j not in fixed)
    if len(members) != int(np.prod([layout.dims[j] for j in kept])):
        return None
    return kept if np.array_equal(members, np.sort(members)) else None


def local_rank(ranks, axes: tuple[int, ...], layout: Layout) -> np.ndarray:
    """Each world rank's rank within its slice keeping ``axes``."""
    c = layout.coords(ranks)
    if not axes:
        return np.zeros(len(c), np.int64)
    return np.ravel_multi_index(tuple(c[:, list(axes)].T), tuple(layout.dims[j] for j in axes))


def comm_roles(trace, layout: Layout | None = None) -> tuple[dict[int, str], dict[str, tuple]]:
    """Communicator id -> role, and role -> the grid axes its instances
    keep.  Roles: ``world``, ``self``, ``<how>#<k>`` for the k-th
    communicator over every world rank in order (a Cartesian grid, a
    duplicate of the world), and, with a ``layout``, ``<how>:<axes>#<k>``
    for a slice of the grid (a row, a column, a plane: Cart_sub, a Split
    by coordinates), the k-th of its kind a rank belongs to, one instance
    per slice.  Other communicators are left out: an event on one is
    refused where it is met."""
    n = trace.size
    roles = {-1: "none"}
    axes: dict[str, tuple] = {}
    k = 0
    sliced: dict[int, tuple] = {}
    for r in trace.comms.sort_values("comm").itertuples():
        members = list(r.members)
        if r.how == "world":
            roles[int(r.comm)] = "world"
        elif r.how == "self":
            roles[int(r.comm)] = "self"
        elif len(members) == n and members == list(range(n)) and not len(r.remote):
            roles[int(r.comm)] = f"{r.how}#{k}"
            k += 1
        elif layout is not None and not len(r.remote) and 1 < len(members) < n:
            kept = slice_axes(members, layout)
            if kept is not None:
                sliced[int(r.comm)] = (r.how, kept, members)
    # a slice's ordinal: how many slices of its kind (same how, same axes)
    # with lower ids its members belong to, the same for every instance
    # where the ranks make them alike
    count: dict[tuple, dict[int, int]] = {}
    for c in sorted(sliced):
        how, kept, members = sliced[c]
        seen = count.setdefault((how, kept), {})
        nth = {seen.get(m, 0) for m in members}
        if len(nth) != 1:
            continue                    # instances unlike across ranks: left out
        nth_ = nth.pop()
        for m in members:
            seen[m] = nth_ + 1
        role = f"{how}:{''.join(map(str, kept))}#{nth_}"
        roles[c] = role
        axes[role] = kept
    return roles, axes


def _peer_columns(ev: pd.DataFrame, col: str, relative: np.ndarray, layout: Layout,
                  prefix: str, sub_axes: list | None = None) -> dict:
    """kind (0 none, 1 offset, 2 absolute world rank, 3 rank within the
    caller's slice of the grid: a root on a row or column communicator),
    that rank, offsets.  ``sub_axes``: per event, the axes its
    communicator's slices keep, or None for a world-wide one."""
    peer = ev[col].to_numpy(np.int64)
    rank = ev["rank"].to_numpy(np.int64)
    rel = relative & (peer >= 0)
    kind = np.where(rel, 1, np.where(peer >= 0, 2, np.where(peer == -1, 0, 2)))
    absolute = np.where(kind == 2, peer, -1)
    if sub_axes is not None:
        for i in np.flatnonzero(kind == 2):
            if sub_axes[i] is not None and peer[i] >= 0:
                kind[i] = 3
                absolute[i] = local_rank([peer[i]], sub_axes[i], layout)[0]
    off = np.zeros((len(ev), len(layout.dims)), np.int64)
    if rel.any():
        off[rel] = layout.offsets(rank[rel], peer[rel])
    out = {prefix + "k": kind, prefix + "abs": absolute}
    for j in range(len(layout.dims)):
        out[f"{prefix}{j}"] = off[:, j]
    return out


def relative_events(trace, layout: Layout) -> pd.DataFrame:
    """The trace's events with peers as offsets and communicators as roles."""
    ev = trace.events
    roles, axes = comm_roles(trace, layout)
    comm = ev["comm"].to_numpy(np.int64)
    unknown = ~np.isin(comm, list(roles))
    if unknown.any():
        i = int(np.argmax(unknown))
        c = int(comm[i])
        row = trace.comms[trace.comms["comm"] == c]
        how = row["how"].iloc[0] if len(row) else "?"
        raise ExtrapolationError(
            f"{trace.path}: rank {int(ev['rank'].iat[i])}, event {int(ev['seq'].iat[i])} "
            f"({ev['op'].iat[i]}): communicator {c} ({how}) holds part of the world but is "
            f"no row, column or plane of the process grid {list(layout.dims)}: only such "
            f"splits are extrapolated")
    op = ev["op"].to_numpy().astype(str)
    relative = np.isin(op, list(_RELATIVE))
    crole = [roles[c] for c in comm]
    out = pd.DataFrame({"rank": ev["rank"].to_numpy(np.int64), "seq": ev["seq"].to_numpy(),
                        "op": op, "crole": crole})
    sub = [axes.get(r) for r in crole]
    for k, v in _peer_columns(ev, "peer", relative, layout, "p", sub).items():
        out[k] = v
    rp = _peer_columns(ev, "rpeer", np.ones(len(ev), bool), layout, "r")
    for k, v in rp.items():
        out[k] = v
    newcomm = ev["newcomm"].to_numpy(np.int64)
    out["nrole"] = [roles.get(c, "part") for c in newcomm]
    for col in ("tag", "rtag", "flags", "wildcard", "req", "sbytes", "rbytes", "site", "polls"):
        out[col] = ev[col].to_numpy()
    out["started"] = ev["started"].fillna("").astype(str).to_numpy()
    out["reqs"] = [tuple(x) if x is not None else () for x in ev["reqs"]]
    for col in ("scounts", "rcounts"):      # None where the call has no counts
        out[col] = [tuple(x) if x is not None else None for x in ev[col]]
    out["cpu"] = ev["cpu"].to_numpy(float)
    out["comp"] = ev["comp"].to_numpy(float)
    return out


_WORDS = {"crole": "communicator", "nrole": "communicator made", "pk": "kind of peer",
          "pabs": "peer", "rk": "kind of source", "rabs": "source", "reqs": "requests",
          "req": "request", "sbytes": "bytes sent", "rbytes": "bytes received"}


def said(col: str, value) -> str:
    """A column and its value in words, for messages."""
    if col[0] in "pr" and col[1:].isdigit():
        name = f"{'peer' if col[0] == 'p' else 'source'} offset along axis {col[1:]}"
    else:
        name = _WORDS.get(col, col)
    v = value.item() if hasattr(value, "item") else value
    if isinstance(v, tuple):
        v = [x.item() if hasattr(x, "item") else x for x in v]
    return f"{name} {v!r}"


def _first_difference(a: pd.DataFrame, b: pd.DataFrame, cols: list[str]) -> tuple[int, str]:
    """(row, column) where two equally long call tables first differ."""
    for i in range(len(a)):
        for c in cols:
            if a[c].iat[i] != b[c].iat[i]:
                return i, c
    return -1, ""


def class_sequences(trace, layout: Layout) -> dict[str, ClassSequence]:
    """Per position class, its sequence of calls and its members'
    computation.  Every member of a class must make the same calls (to
    the same relative peers, with the same bytes): a member that does not
    is named with the event where it departs."""
    rel = relative_events(trace, layout)
    names = layout.position_classes(np.arange(trace.size))
    offsets = [c for c in rel.columns if c[0] in "pr" and c[1:].isdigit()]
    keys = IDENTITY + offsets + BYTES
    by_rank = {int(r): g for r, g in rel.groupby("rank", sort=True)}
    out = {}
    for name in dict.fromkeys(names):
        members = np.array([r for r in range(trace.size) if names[r] == name])
        first = by_rank[int(members[0])].reset_index(drop=True)
        for m in members[1:]:
            other = by_rank[int(m)].reset_index(drop=True)
            if len(other) != len(first):
                raise ExtrapolationError(
                    f"{trace.path}: ranks {members[0]} and {m} (both of position class "
                    f"{name}) make {len(first)} and {len(other)} calls: their calls depend "
                    f"on more than their place in the grid (data, a task pool)")
            same = np.ones(len(first), bool)
            for c in keys:
                same &= first[c].to_numpy() == other[c].to_numpy()
            if not same.all():
                i, c = _first_difference(first, other, keys)
                raise ExtrapolationError(
                    f"{trace.path}: rank {m}, event {i} ({other['op'].iat[i]}): "
                    f"{said(c, other[c].iat[i])} where rank {members[0]} of the same position "
                    f"class ({name}) has {said(c, first[c].iat[i])}: the calls depend on more "
                    f"than the rank's place in the grid (data, timing, a task pool)")
        cpu = np.stack([by_rank[int(m)]["cpu"].to_numpy() for m in members])
        comp = np.stack([by_rank[int(m)]["comp"].to_numpy() for m in members])
        calls = first.drop(columns=["rank", "cpu", "comp"])
        out[name] = ClassSequence(name, calls, members, cpu, comp)
    return out
