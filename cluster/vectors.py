"""From a trace to what clustering needs: each rank's communication-sequence
signature (S201) and computation vector (S102).

Signature of an event (what must be identical for two ranks to be grouped):
``op``, communicator size, bytes sent, bytes received (point-to-point
only: a collective's received bytes follow from the other members, and
for pickled objects depend on the rank's place in mpi4py's reduction
tree), tag, and the peer as selected by ``peer_mode``:

* ``relative`` (default): peer minus own rank, modulo the world size, for
  point-to-point partners (so a ring's wrap-around neighbour counts as the
  same neighbour), the absolute rank for collective roots.  SPMD codes (stencils, rings)
  then put every rank with the same neighbourhood shape in one group,
  while boundary ranks (PROC_NULL partners) form groups of their own.
* ``absolute``: world rank of the partner (hub patterns such as
  master-worker, where every worker talks to rank 0).
* ``none``: peers ignored.

A wildcard receive or probe contributes "any" rather than the source that
happened to match, which differs from run to run.

A collective of Python objects adds the rank's place in mpi4py's own
algorithm (:func:`object_roles`) where that place means much more work
than the others': the root of a gather or a scatter, the number of
partial results a rank receives and reduces in mpi4py's reduction.

Ranks are read one at a time (one Parquet row group per rank), so memory
holds one rank's events plus the vectors being returned.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from contracts.raw_trace import FLAG_OBJECT
from mpimodel import ops
from mpimodel.ops import POINT_TO_POINT

PEER_MODES = ("relative", "absolute", "none")
SIGNATURE_COLUMNS = ["rank", "op", "comm", "peer", "wildcard", "tag", "sbytes", "rbytes",
                     "flags"]
# Pickled bytes per call beyond which a place in mpi4py's algorithm for a
# collective of Python objects is a role of its own: about 0.1 ms and more
# of unpickling and reducing (replay/objects.py), where a scalar's 21 bytes
# take a microsecond.
ROLE_BYTES = 1 << 16
# object collectives whose root (un)pickles every member's part
_ROOTED = np.array(sorted(o.op for o in ops.TABLE if o.kind == "ocoll"
                          and o.shape in ("rooted", "reduce")))
# object reductions whose members' places in mpi4py's binomial tree are
# roles (receives_in_reduction); scan and exscan are not modelled as trees
_TREE = np.array(["reduce", "allreduce"])


class ClusterError(Exception):
    """Input that cannot be clustered; the message names file and ranks."""


@dataclass
class RankVectors:
    """Per-rank signatures and computation vectors.

    ``table`` columns: ``rank``, ``signature`` (hex digest), ``length``
    (events), ``total`` (sum of the vector), ``noise`` (:func:`span_noise`),
    ``roles`` (events where the rank's place in a collective of objects
    joins its signature: :func:`object_roles`).
    ``vectors[rank]`` is the float64 computation vector of that rank.
    """
    table: pd.DataFrame
    vectors: dict

    @property
    def noise(self) -> float:
        """The host's measured noise: the median of the ranks' span noise
        (NaN when no rank repeats a span)."""
        v = self.table["noise"].dropna()
        return float(v.median()) if len(v) else float("nan")


def span_noise(vec: np.ndarray, sites: np.ndarray, repeats: int = 3) -> float:
    """How much the same work varies on this host, seen in one rank: spans
    that lie between the same two call sites (an iteration's same region)
    and occur at least ``repeats`` times, their absolute deviations from
    their region's median, over their total.  NaN when no region repeats.

    Two ranks doing identical work differ, span by span, by about 1.4 times
    this (the Manhattan distance of two independent draws against one draw's
    deviation from the median): the clustering's automatic cut follows it."""
    if len(vec) < repeats + 2:
        return float("nan")
    key = pd.DataFrame({"a": sites[1:-1], "b": sites[2:], "x": vec[2:]})  # start-up left out
    med = key.groupby(["a", "b"])["x"].transform("median")
    n = key.groupby(["a", "b"])["x"].transform("size")
    sel = (n >= repeats).to_numpy()
    total = key["x"].to_numpy()[sel].sum()
    if not sel.any() or total <= 0:
        return float("nan")
    return float(np.abs(key["x"].to_numpy() - med.to_numpy())[sel].sum() / total)


def _is_p2p(op: pd.Series) -> np.ndarray:
    return op.isin(POINT_TO_POINT).to_numpy()


def receives_in_reduction(crank: int, size: int) -> int:
    """How many partial results communicator rank ``crank`` receives and
    reduces in mpi4py's reduction of objects: one per zero bit of its rank
    whose partner exists (every rank sends at its one bits)."""
    k, mask = 0, 1
    while mask < size:
        k += (crank & mask) == 0 and (crank | mask) < size
        mask <<= 1
    return k


def object_roles(ev: pd.DataFrame, places: dict, role_bytes: float = ROLE_BYTES) -> np.ndarray:
    """Per event of one rank, its place in mpi4py's algorithm for a large
    collective of Python objects, 0 elsewhere.

    mpi4py runs these collectives itself (replay/objects.py): the root of a
    gather unpickles every contribution, the root of a scatter pickles every
    item, and in a reduction each rank receives and reduces once per zero
    bit of its rank, rank 0 most.  The tracer counts that work as time in
    the call, so the computation vectors cannot tell the places apart, and a
    representative's share would stand for every member's.  A place is a
    role where its extra pickles reach ``role_bytes`` in the call: 1 for a
    root, 2 k for k partial results received (added).  ``places``:
    intra-communicator id -> {world rank: communicator rank}
    (:func:`comm_places`; inter-communicators take no role)."""
    role = np.zeros(len(ev), np.int64)
    obj = (ev["flags"].to_numpy() & FLAG_OBJECT) != 0
    if not obj.any():
        return role
    me = int(ev["rank"].iloc[0])
    op, comm = ev["op"].to_numpy().astype(str), ev["comm"].to_numpy()
    sb, rb = ev["sbytes"].to_numpy(), ev["rbytes"].to_numpy()
    root = obj & np.isin(op, _ROOTED) & (ev["peer"].to_numpy() == me) & \
        np.isin(comm, list(places))
    mine = np.where(op == "scatter", sb, rb)             # what the root (un)pickles
    role += (root & (mine >= role_bytes)).astype(np.int64)
    tree = obj & np.isin(op, _TREE)
    for c in np.unique(comm[tree]):
        place = places.get(int(c), {})
        if me not in place:
            continue
        k = receives_in_reduction(place[me], len(place))
        at = tree & (comm == c) & (k * sb >= role_bytes)   # sbytes: one contribution
        role[at] += 2 * k
    return role


def comm_places(comms: pd.DataFrame) -> dict:
    """Intra-communicator id -> {world rank: its rank there}, from the
    trace's comms table."""
    intra = comms[comms["kind"] != "Intercomm"] if "kind" in comms else comms
    return {int(c): {int(w): i for i, w in enumerate(m)}
            for c, m in zip(intra["comm"], intra["members"]) if m is not None}


def event_signatures(ev: pd.DataFrame, comm_sizes: dict, peer_mode: str,
                     places: dict | None = None, role_bytes: float = ROLE_BYTES) -> np.ndarray:
    """One uint64 per event: the hash of what must match between ranks
    (``places``, ``role_bytes``: as :func:`object_roles` takes them;
    without places, no roles)."""
    if peer_mode not in PEER_MODES:
        raise ClusterError(f"unknown peer mode {peer_mode!r}; choose from {PEER_MODES}")
    peer = ev["peer"].to_numpy().astype(np.int64)
    p2p = _is_p2p(ev["op"])
    if peer_mode == "relative":
        # offsets modulo the world size: a ring's wrap-around partner is
        # the same neighbour as everyone else's
        size = max(comm_sizes.get(0, 0), int(ev["rank"].max()) + 1, int(peer.max()) + 1)
        peer = np.where(p2p & (peer >= 0), (peer - ev["rank"].to_numpy()) % size, peer)
    elif peer_mode == "none":
        peer = np.zeros_like(peer)
    wild = ev["wildcard"].to_numpy()
    peer = np.where(wild, -(1 << 40), peer)
    tag = np.where(wild, -(1 << 40), ev["tag"].to_numpy().astype(np.int64))
    frame = pd.DataFrame({
        "op": ev["op"].astype(str),
        "csize": ev["comm"].map(comm_sizes).fillna(-1).astype(np.int64),
        "peer": peer, "tag": tag,
        "sbytes": ev["sbytes"].to_numpy(),
        # a collective's received bytes follow from the others' contributions
        # (and for pickled objects from the rank's place in mpi4py's tree)
        "rbytes": np.where(p2p, ev["rbytes"].to_numpy(), 0),
        "role": object_roles(ev, places or {}, role_bytes),
    })
    return pd.util.hash_pandas_object(frame, index=False).to_numpy()


def read_rank_vectors(trace_dir: str, column: str = "cpu", peer_mode: str = "relative",
                      allow_incomplete: bool = False, startup: bool = False,
                      role_bytes: float = ROLE_BYTES) -> RankVectors:
    """Signatures and computation vectors of every rank of a trace.

    ``role_bytes``: the extra pickles per call from which a place in a
    collective of objects joins the signature (:func:`object_roles`;
    ``math.inf``: never).

    ``startup=False`` (default) zeroes the start-up spans: before ``init``
    and from ``init`` to the application's first MPI call.  They hold the
    interpreter's and the application's imports, the same work on every
    rank, yet on a loaded host they vary by tens of milliseconds between
    ranks, more than the work differences clustering must find."""
    from contracts.trace import TraceError, load_trace
    if column not in ("cpu", "comp"):
        raise ClusterError(f"vector column must be 'cpu' or 'comp', not {column!r}")
    try:
        t = load_trace(trace_dir, columns=["rank"])   # meta, comms; events read below
    except TraceError as e:
        raise ClusterError(str(e)) from e
    inc = t.incomplete_ranks
    if inc and not allow_incomplete:
        raise ClusterError(
            f"{trace_dir}: incomplete trace: rank(s) {inc[:20]}{' ...' if len(inc) > 20 else ''}"
            f" did not finish (their computation vectors are truncated); re-run the trace, or "
            f"pass --allow-incomplete to cluster what there is")
    if len(t.events) == 0:
        raise ClusterError(f"{trace_dir}: the trace holds no events")
    comm_sizes = dict(zip(t.comms["comm"], t.comms["size"]))
    comm_sizes[-1] = 0
    try:
        return _vectors(t, column, comm_sizes, peer_mode, startup, comm_places(t.comms),
                        role_bytes)
    except (OSError, ValueError) as e:           # pyarrow's errors are ValueErrors
        raise ClusterError(f"{os.path.join(trace_dir, 'events.parquet')}: cannot read "
                           f"({e})") from None
    except TraceError as e:
        raise ClusterError(str(e)) from None


def _vectors(t, column, comm_sizes, peer_mode, startup, places, role_bytes) -> RankVectors:
    """rank_vectors' reading, whole ranks at a time (memory stays bounded by
    a few ranks' events), each part checked as load_trace checks a trace."""
    from contracts.trace import TraceError
    from contracts.trace_checks import check_comms, check_events
    path = os.path.join(t.path, "events.parquet")
    pf = pq.ParquetFile(path)
    rows, vectors = [], {}
    cols = list(dict.fromkeys(SIGNATURE_COLUMNS + [column, "seq", "site"]))
    lost = [c for c in cols if c not in pf.schema_arrow.names]
    if lost:
        raise TraceError(f"{path}: missing column(s) {', '.join(lost)}")
    pending = None
    # row groups hold whole ranks (merge writes one or more per rank)
    for i in range(pf.num_row_groups):
        df = pf.read_row_group(i, columns=cols).to_pandas()
        if pending is not None:
            df = pd.concat([pending, df], ignore_index=True)
        last = df["rank"].iloc[-1]
        done, pending = df[df["rank"] != last], df[df["rank"] == last]
        if i == pf.num_row_groups - 1:
            done, pending = df, None
        check_events(done, dict(t.meta, complete=False), path)
        check_comms(t.comms, done, t.meta, path)
        for rank, ev in done.groupby("rank", sort=True):
            sig = event_signatures(ev, comm_sizes, peer_mode, places, role_bytes)
            roles = int(np.count_nonzero(object_roles(ev, places, role_bytes)))
            vec = ev[column].to_numpy(dtype=np.float64)
            if not startup:
                vec = vec.copy()
                vec[:2] = 0.0
            vectors[int(rank)] = vec
            rows.append((int(rank), hashlib.blake2b(sig.tobytes(), digest_size=12).hexdigest(),
                         len(vec), float(vec.sum()), span_noise(vec, ev["site"].to_numpy()),
                         roles))
    table = pd.DataFrame(rows, columns=["rank", "signature", "length", "total", "noise",
                                        "roles"])
    return RankVectors(table, vectors)
