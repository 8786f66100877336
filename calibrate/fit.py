"""Fit a platform file to the measurements (``python -m calibrate fit``).

    python -m calibrate fit pingpong.csv --cores-per-node C [--nodes K]
        [--peers PEERS.csv] [--template PLATFORM.yaml] -o platform.yaml

Assigns each peer to the innermost level joining it with rank 0
(levels given by ``--spans``, default one level per node and one across
nodes), and fits one_way = latency + bytes * byte_time per level over the
sizes up to the eager limit, by non-negative least squares (scipy),
weighting every point by 1/one_way so that small messages count as much
as large ones; the sizes over the eager limit give the level's
``rendezvous_byte_time`` (their slope).  Each level keeps its
``stream`` curve (seconds per message by size, less the ``stream_loop``
cost, which the simulator charges as the application's own calls), with
which the simulator spaces the messages a sender has in flight, and its
measured curve (``one_way``: [bytes, seconds] per size, made
non-decreasing: points out of order are the machine's drift between
sizes, pooled to their mean), which the simulator follows between the
sizes instead of the straight lines: a shared-memory MPI's per-byte
cost falls with the size and jumps where its protocol changes (MPICH:
between 4 and 8 KiB), which no two lines fit within 10 % everywhere.
With the peer -1 row, that cost becomes ``network.call_overhead``
(charged per call the application makes) and comes off every level's
latency, so that a ping-pong (one call per
one-way trip on its critical path) still costs what was measured while a
collective or a window of Isends pays it once per call, not per message.
The ``warmup`` rows give each level its ``warmup``, from the rows of
the peers it joins to rank 0: what the exchanges of the first half of
the bytes on a new connection cost beyond the median of the second
half's, over those bytes, where it exceeds 1 % of their time; and of
that, what the first exchange cost beyond the next one (``first``:
opening the connection, paid by a connection's first message whatever
its size).
The ``rma`` row, less the call's cost, gives ``network.rma_overhead``;
the ``probe_late`` row, ``network.probe_late_polls``; the
``intercomm_poll_bytes`` row, ``network.intercomm_poll_bytes``.
The ``copy`` rows give ``network.copy_byte_time`` (their slope).  At two
ranks the model of an alltoall or allgather is one exchange, which the
model times as one ping-pong trip (the one-way time at 8 bytes, off the
curve):
what the measured collective costs beyond that becomes
``network.collective_overhead`` of its family.  What an allgather costs
beyond the same allgather in place is ``network.copy_overhead``, the fixed
cost of copying the own block (MPICH's local copy); the alltoall's
overhead is counted net of it.  The median over the sizes of
(alltoallw - alltoall_contig) / (2 bytes) is ``network.pack_byte_time``,
what packing non-contiguous datatypes adds per byte sent and received (0,
with a note on standard error, where the packed transfer was not the
slower: a measurement disturbed by other load).
Writes a platform YAML (eager limit from ``--eager-limit``, default the
measured one; the largest alltoall block MPICH sends to itself as a
message from
``--alltoall-self-limit``, default its 32768, and the alltoall's overhead
is then counted net of that message rather than of the copy).
Files without ``what`` (older ones) read as ping-pongs and, peer -1, call.
A file may hold several measurements (concatenated): each point's minimum
is used, or with ``--combine median`` its median (the machine's typical
moment rather than its quietest), or with ``--combine mean`` its mean (what
many messages cost on average when the machine switches between states).
With ``--peers`` (small-message ping-pongs of every pair of ranks,
``calibrate measure --max-bytes 128 --only-pingpongs`` on all ranks), each level's latency
and one-way curve move by the median over its pairs' intercepts less its
own measured one: the few pairs of the full measurement stand for every
pair of their level, and where pairs differ (virtual cores, whose pair
latencies are set by their quota periods' phases; a machine with slower
or farther pairs) the median pair is the typical one.  Pairs that share
no rank, not one rank's pairs: a rank's own state (its core's phase)
moves all of its pairs together.  Files of rank 0's pairs alone (no
``rank`` column, written by earlier versions) are read as such.
"""
from __future__ import annotations

import sys

from .measure import COLLECTIVES, PACKING


def gbs(byte_time: float) -> float:
    """GB/s of a fitted byte time; inf for 0 (a fit whose small messages took
    no longer than their empty ones: the measured curve decides)."""
    return 1e-9 / byte_time if byte_time > 0 else float("inf")


def _line(d) -> tuple[float, float]:
    """one_way = a + bytes * b, non-negative, each point weighted 1/one_way
    (so that small messages count as much as large ones)."""
    import numpy as np
    from scipy.optimize import nnls
    wgt = 1.0 / d["one_way"].to_numpy()
    A = np.stack([np.ones(len(d)), d["bytes"].to_numpy(float)], axis=1) * wgt[:, None]
    (a, b), _ = nnls(A, d["one_way"].to_numpy() * wgt)
    return float(a), float(b)


def _non_decreasing(t: list[float]) -> list[float]:
    """The closest non-decreasing sequence (least squares: adjacent
    violators pooled to their mean).  A larger message never arrives
    sooner; where the measured points say so (0-64 bytes read 2.3-3.2 us
    in one measurement, in no order), it is the machine's drift between
    the sizes, and pooling them averages it out."""
    blocks: list[list] = []                     # [sum, count]
    for x in t:
        blocks.append([x, 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s_, c_ = blocks.pop()
            blocks[-1][0] += s_
            blocks[-1][1] += c_
    return [s_ / c_ for s_, c_ in blocks for _ in range(c_)]


def _two_rank_overheads(pair, call: float, level: dict, self_limit: int,
                        spaced: bool = False) -> tuple[float, dict]:
    """(copy_overhead, {family: collective_overhead}) from the two-rank rows
    (``pair``: what -> seconds per call) against the model's cost of one
    exchange of 8 bytes: the one-way time of the level joining ranks 0 and
    1 (the binding's call cost included), read off its measured curve as
    the simulator does, else off its fitted line.  The alltoall's own block
    is counted as the simulator charges it: a message to itself (the same
    one-way time less the binding's call) up to ``self_limit`` bytes, else
    the local copy.  ``spaced``: the curves were timed after work
    (``calibrate measure --spacing``) but the two-rank rows back to back,
    which on sliced CPUs differ by the slicing: the overheads are then
    each collective's time beyond the Sendrecv timed beside it, its own
    block counted as a local copy."""
    if not any(f in pair for f in COLLECTIVES):
        return 0.0, {}
    beside = spaced and "sendrecv" in pair     # against the Sendrecv timed beside them
    if beside:
        exchange = float(pair["sendrecv"])
    elif "one_way" in level:
        from netsim.platform import one_way_at
        exchange = float(one_way_at(level["one_way"], 8))
    else:
        exchange = call + level["latency"] + 8 * level["byte_time"]
    # the Sendrecv's row has the timing loop in it
    loop = 0.0 if beside else float(pair.get("loop", 0.0))
    copy_over = 0.0
    if "allgather" in pair and "allgather_inplace" in pair:
        copy_over = max(float(pair["allgather"] - pair["allgather_inplace"]), 0.0)
    measured = {"alltoall": pair.get("alltoall"),
                "allgather": pair.get("allgather_inplace", pair.get("allgather"))}
    own_copy = {"alltoall": exchange - call if self_limit >= 8 and not beside else copy_over,
                "allgather": 0.0}
    return copy_over, {f: max(float(t) - loop - exchange - own_copy[f], 0.0)
                       for f, t in measured.items() if t is not None}


def _pack_byte_time(rows, combine: str = "min") -> float:
    """Seconds per byte sent and received that packing a non-contiguous
    datatype adds (the simulator charges it on both): the median over the
    sizes of (alltoallw - alltoall_contig) / (2 bytes); 0 without rows."""
    t = rows.groupby(["bytes", "what"])["one_way"].agg(combine).unstack()
    if not set(PACKING) <= set(t.columns):
        return 0.0
    per_byte = (t["alltoallw"] - t["alltoall_contig"]) / (2 * t.index.to_numpy(float))
    per_byte = per_byte.dropna()
    if not len(per_byte):
        return 0.0
    median = float(per_byte.median())
    if median <= 0:
        # packing cannot make a transfer faster: the machine moved under the
        # measurement (a neighbour's load), which the user should hear of
        print(f"calibrate: note: the packed Alltoallw was not slower than the contiguous "
              f"one ({median * 1e9:+.3f} ns per byte, the median over {len(per_byte)} "
              f"sizes): packing is charged nothing; measure on a quiet node to have it",
              file=sys.stderr)
    return max(median, 0.0)


def _loaded(pingpong, exchange):
    """The one-way curve with the reverse direction loaded: per size, the
    slower of the ping-pong and the exchange less the exchange's fixed extra
    cost (a Sendrecv call costs ~1.5 us more than a one-way trip: the
    median difference up to 4 KiB).  On shared memory both transfers are
    copies through one memory system: MPICH moved 1 MiB each way at
    6.9-10.9 GB/s during an exchange (varying by the minute) against 11
    GB/s alone, and a window of sends (osu_bw) ran slower still.  The simulator has no model of
    that sharing, and applications mostly exchange, so the curve takes
    the loaded rate."""
    both = pingpong.index.intersection(exchange.index)
    small = [n for n in both if n <= 4096] or list(both)
    if not small:
        return pingpong
    extra = float((exchange[small] - pingpong[small]).median())
    loaded = (exchange.reindex(pingpong.index) - extra).fillna(0.0)
    return pingpong.combine(loaded, max)


class MeasurementsError(ValueError):
    """A measurements file that cannot be fitted (file, row and column named)."""


def read_measurements(raw):
    """The measurements of ``raw`` (a CSV path or a list of them), concatenated
    and checked: columns ``peer`` (world rank, -1 for a rank pair's own
    costs), ``bytes`` (>= 0), ``one_way`` (finite seconds >= 0), ``what``
    (what was measured: pingpong, stream, call, ...), and ``file``, which
    of them a row came from (0, 1, ...; rows in each file's order)."""
    import pandas as pd

    from contracts.tables import read_table
    paths = [raw] if isinstance(raw, str) else list(raw)
    frames = []
    for p in paths:
        df = read_table(p, ["peer", "bytes", "one_way", "what"], MeasurementsError,
                        "measurements", "python -m calibrate measure",
                        integers=("peer", "bytes"), seconds=("one_way",))
        bad = (df["peer"] < -1) | (df["bytes"] < 0)
        if bad.any():
            i = int(bad.to_numpy().argmax())
            raise MeasurementsError(f"{p}: row {i}: peer {df['peer'].iat[i]} or bytes "
                                    f"{df['bytes'].iat[i]} out of range")
        if df["what"].isna().any() or not pd.api.types.is_string_dtype(df["what"]):
            raise MeasurementsError(f"{p}: column what must name every row's measurement")
        if "rank" in df.columns:
            bad = not pd.api.types.is_integer_dtype(df["rank"]) or \
                ((df["rank"] < 0) | (df["rank"] == df["peer"])).any()
            if bad:
                raise MeasurementsError(f"{p}: column rank must hold the timing rank of each "
                                        f"pair (an integer >= 0, not its peer)")
        frames.append(df.assign(file=len(frames)))
    df = pd.concat(frames, ignore_index=True)
    # files of rank 0's measurements have no rank column
    df["rank"] = df["rank"].fillna(0).astype(int) if "rank" in df.columns else 0
    return df


def _fit_level(name: str, pingpong, stream, eager_limit: int, call: float, exchange,
               combine: str) -> dict:
    """One network level from its ping-pong and stream rows: the fitted
    latency (less the binding's call) and byte times, and the measured
    curves (``exchange``: the loaded curve of the level joining ranks 0
    and 1, or None)."""
    d = pingpong.groupby("bytes", as_index=False)["one_way"].agg(combine)
    eager, rdv = d[d["bytes"] <= eager_limit], d[d["bytes"] > eager_limit]
    lat, bt = _line(eager if len(eager) >= 2 else d)
    lv = {"name": name, "latency": max(lat - call, 0.0), "byte_time": bt}
    if len(rdv) >= 2:
        # large messages stream at their own rate (shared memory: a
        # pipelined copy); their intercept is the handshake, modelled apart
        lv["rendezvous_byte_time"] = _line(rdv)[1]
    if len(d) >= 2:
        curve = d.set_index("bytes")["one_way"]
        if exchange is not None and len(exchange):
            curve = _loaded(curve, exchange)
        lv["one_way"] = [[int(n), float(t)] for n, t in
                         zip(curve.index, _non_decreasing(list(curve.to_numpy(float))))]
    st = stream.groupby("bytes")["one_way"].agg(combine)
    if len(st) >= 2:
        lv["stream"] = [[int(n), float(t)] for n, t in st.items()]
    return lv


def _warmup(rows, combine: str, go: float = 0.0) -> dict | None:
    """A new connection's warm-up from the ``warmup`` rows (each file's and
    peer's exchanges in order): the first half of the bytes took
    ``seconds`` longer in all than the median exchange of the second half,
    and of that the first exchange ``first`` longer than the second less
    ``go``, the one-way time of the 1-byte message that opened the
    connection inside the first exchange's timing (an application's first
    message opens it itself), combined over the files and peers; None
    where the excess is within 1 % of the first half's time (the machine's
    noise), or the rows are too few."""
    import numpy as np
    import pandas as pd
    fits = []
    for _, r in rows.groupby(["file", "peer"]):
        t = r["one_way"].to_numpy(float)
        half = len(t) // 2
        if half >= 2:
            steady = float(np.median(t[half:]))
            fits.append((half * int(r["bytes"].iat[0]), float((t[:half] - steady).sum()),
                         half * steady, max(float(t[0] - t[1] - go), 0.0)))
    if not fits:
        return None
    f = pd.DataFrame(fits, columns=["bytes", "seconds", "steady", "first"]).agg(combine)
    if f["bytes"] <= 0 or f["seconds"] <= 0.01 * f["steady"]:
        return None
    warm = {"bytes": int(f["bytes"]), "seconds": float(f["seconds"])}
    # the first exchange's excess is part of the whole; the rest spreads
    first = min(float(f["first"]), warm["seconds"])
    if first > 0.01 * f["steady"]:
        warm.update(seconds=warm["seconds"] - first, first=first)
    return warm


def _agg(rows, combine: str, default: float = 0.0) -> float:
    return float(rows.agg(combine)) if len(rows) else default


def _intercept(rows, combine: str) -> float:
    """One-way time of a message of no size: the line through each size's
    combined ping-pongs (``rows``), or the one size's time."""
    d = rows.groupby("bytes", as_index=False)["one_way"].agg(combine)
    return _line(d)[0] if len(d) >= 2 else float(d["one_way"].iat[0])


def peer_intercepts(raw, combine: str = "min"):
    """Per pair (a Series indexed by (rank, peer): the timing rank and its
    partner), the intercept of its ping-pongs in the measurements ``raw``,
    and the largest size they used."""
    df = read_measurements(raw)
    pp = df[(df["what"] == "pingpong") & (df["peer"] >= 0)]
    if pp.empty:
        raise MeasurementsError(f"{raw}: no ping-pongs of a pair")
    return (pp.groupby(["rank", "peer"]).apply(lambda g: _intercept(g, combine)),
            int(pp["bytes"].max()))


def _at_median_pair(lv: dict, own, peers, most_bytes: int, combine: str) -> str:
    """Move level ``lv`` (fitted to its ping-pong rows ``own``) by the
    median of the intercepts ``peers`` (its pairs') less its own
    intercept over the same sizes (to ``most_bytes``); what it did, for
    the log."""
    own = own[own["bytes"] <= most_bytes]
    shift = float(peers.median()) - _intercept(own, combine)
    lv["latency"] = max(lv["latency"] + shift, 0.0)
    if "one_way" in lv:
        lv["one_way"] = [[n, max(t + shift, 0.0)] for n, t in lv["one_way"]]
    return (f"{lv['name']} {shift * 1e3:+.3f} ms (median of {len(peers)} pairs "
            f"{peers.median() * 1e3:.3f} ms, range {peers.min() * 1e3:.3f}-"
            f"{peers.max() * 1e3:.3f})")


def fit(raw, cores_per_node: int, nodes: int, spans: list[int] | None,
        eager_limit: int | None, name: str, alltoall_self_limit: int = 32768,
        combine: str = "min", peers=None) -> dict:
    """A platform description (dict, the platform file's keys) fitted to the
    measurements ``raw``: a CSV path, or a list of them (several
    measurements: each point combined over them with ``combine``);
    ``peers``: ping-pongs of many pairs, each level then at its median
    pair (the module's docstring)."""
    df = read_measurements(raw)
    if peers is not None:
        at_peer, most_bytes = peer_intercepts(peers, combine)
    what = df["what"]
    if eager_limit is None:
        # the measured one (the smallest, over several measurements), else MPICH's
        # default over a network
        eager_limit = int(_agg(df.loc[what == "eager_limit", "bytes"], "min", 65536))
    call = _agg(df.loc[what == "call", "one_way"], combine)
    # MPI's own work in a one-sided call, beyond the binding's call
    rma = max(_agg(df.loc[what == "rma", "one_way"], combine, call) - call, 0.0)
    copy = df[what == "copy"].groupby("bytes", as_index=False)["one_way"].agg(combine)
    copy_bt = _line(copy)[1] if len(copy) >= 2 else 0.0
    pack_bt = _pack_byte_time(df[what.isin(PACKING)], combine)
    # the two-rank rows (sendrecv, collectives, loop): what -> seconds per call
    apart = ["pingpong", "exchange", "stream", "stream_loop", "call", "copy", "eager_limit",
             "probe_late", "intercomm_poll_bytes", "warmup", "rma", "spacing", *PACKING]
    # Iprobe calls that miss an arrived message (the largest over several
    # measurements: a property of the MPI, not of the moment)
    late = int(_agg(df.loc[what == "probe_late", "bytes"], "max", 0))
    from netsim.platform import schema_maximum
    most = schema_maximum("network", "probe_late_polls")
    if late > most:
        # MPICH misses one; thousands mean the message had not arrived when
        # the probe began (cores far slower than the probe's settle allowed)
        print(f"calibrate: note: Iprobe missed an arrived message {late} times, more than "
              f"any MPI does ({most}): the message was still on its way; "
              f"probe_late_polls left out (measure again with this version)", file=sys.stderr)
        late = 0
    # what a rendezvous over an intercommunicator moves per sender call
    per_poll = int(_agg(df.loc[what == "intercomm_poll_bytes", "bytes"], "min", 0))
    pair = df[~what.isin(apart)].groupby("what")["one_way"].agg(combine)
    exchange = df[what == "exchange"].groupby("bytes")["one_way"].agg(combine)
    # the caller's own cost per message of a window, which the simulator
    # charges as the application's calls and computation, comes off
    stream = df[what == "stream"].copy()
    stream["one_way"] = (stream["one_way"] - _agg(df.loc[what == "stream_loop", "one_way"],
                                                  combine)).clip(0)
    pingpong = df[(what == "pingpong") & (df["rank"] == 0)]
    spans = spans or ([cores_per_node] if nodes > 1 else [])
    names = [f"span{s}" for s in spans] + ["fabric" if nodes > 1 else "node"]

    def joining(a, b):
        """The innermost level joining ranks a and b (placed block-wise)."""
        return next((i for i, s in enumerate(spans) if a // s == b // s), len(spans))

    def level(peer):
        return joining(0, peer)
    at = pingpong["peer"].map(level)
    warm_rows = df[what == "warmup"]
    warm_at = warm_rows["peer"].map(level)
    stream_at = stream["peer"].map(level)
    levels = []
    for i, lname in enumerate(names):
        if not (at == i).any():
            continue
        lv = _fit_level(lname, pingpong[at == i], stream[stream_at == i], eager_limit, call,
                        exchange if i == level(1) else None, combine)
        if i < len(spans):
            lv["span"] = spans[i]
        mine = pingpong[at == i]
        go = _agg(mine.loc[mine["bytes"] == mine["bytes"].min(), "one_way"], combine)
        warm = _warmup(warm_rows[warm_at == i], combine, go)
        if warm:
            lv["warmup"] = warm
        if peers is not None:
            mine = at_peer[[joining(a, b) == i for a, b in at_peer.index]]
            if len(mine):
                said = _at_median_pair(lv, pingpong[at == i], mine, most_bytes, combine)
                print(f"calibrate: {said}", file=sys.stderr)
        levels.append(lv)
    if not levels:
        raise ValueError(f"{raw}: no measurements")
    levels[-1].pop("span", None)
    spaced = _agg(df.loc[what == "spacing", "one_way"], "max", 0.0) > 0
    copy_over, coll_over = _two_rank_overheads(pair, call, levels[0], alltoall_self_limit,
                                               spaced)
    net = {"levels": levels, "overhead": {"send": 0.0, "recv": 0.0}, "gap": 0.0,
           "eager_limit": eager_limit, "contention": nodes > 1}
    optional = {"call_overhead": call, "copy_byte_time": copy_bt, "copy_overhead": copy_over,
                "pack_byte_time": pack_bt, "collective_overhead": coll_over,
                "rma_overhead": rma, "probe_late_polls": late,
                "intercomm_poll_bytes": per_poll}
    net.update({k: v for k, v in optional.items() if v})
    if coll_over and alltoall_self_limit:
        net["alltoall_self_limit"] = alltoall_self_limit
    return {"name": name, "nodes": nodes, "cores_per_node": cores_per_node, "placement": "block",
            "network": net,
            "collectives": {"default": "analytic"}, "compute_scale": 1.0}


def into_template(fitted: dict, template: dict) -> dict:
    """``template`` (a platform description) with its innermost level's
    network replaced by the fitted one: latency, byte times and curves,
    eager limit, call overhead, local copy, packing, collective and
    one-sided overheads, Iprobe's late polls, an intercommunicator's
    bytes per sender call.  The template's per-message
    overheads (o) are part of the fitted one-way time, so they come off
    its latency.  Everything else
    (nodes, placement, outer levels, collective algorithms) is kept: the
    user's description of the machine around the measured node."""
    import copy
    plat = copy.deepcopy(template)
    net, fnet = plat["network"], fitted["network"]
    lv, flv = net["levels"][0], fnet["levels"][0]
    o = net.get("overhead", {}).get("send", 0.0) + net.get("overhead", {}).get("recv", 0.0)
    lv["latency"] = max(flv["latency"] - o, 0.0)
    lv["byte_time"] = flv["byte_time"]
    for key in ("rendezvous_byte_time", "one_way", "stream"):
        if key in flv:
            lv[key] = flv[key]
    for key in ("call_overhead", "copy_byte_time", "copy_overhead", "alltoall_self_limit",
                "pack_byte_time", "rma_overhead", "probe_late_polls",
                "intercomm_poll_bytes"):
        net[key] = fnet.get(key, 0)
    net["collective_overhead"] = fnet.get("collective_overhead", {})
    net["eager_limit"] = fnet["eager_limit"]
    return plat
