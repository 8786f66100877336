"""Calibrate a platform file from ping-pong measurements on the target.

    mpiexec -n P python -m netsim.calibrate measure -o pingpong.csv [--repeats R]
    python -m netsim.calibrate fit pingpong.csv --cores-per-node C [--nodes K] -o platform.yaml

``measure``: rank 0 ping-pongs with every other rank in turn (so with ranks
placed block-wise the pairs cross every level of the machine: same socket,
same node, other nodes), over every power of two from 0 bytes to 4 MiB,
in blocks of back-to-back round trips with separate send and receive
buffers (written, on ordinary 4 KiB pages), and keeps the median block's
time per trip (columns ``peer, bytes, one_way, what``; ``what`` is
``pingpong`` for these rows); per peer and size also a ``stream``: the
seconds per message of a window of 64 back-to-back Isends answered by 64
preposted Irecvs and one short acknowledgement (as the OSU bandwidth
test; PLogP's gap g(m)), and once (peer -1) ``stream_loop``, the same
window posted to ``MPI.PROC_NULL``: the loop's and the binding's own cost
per message; with
rank 1 also an ``exchange`` (a Sendrecv, both directions at once) per
size.  Further rows, peer -1:
``call``, the cost of one call that MPI completes at once (a Send to and a
Recv from ``MPI.PROC_NULL``, median per call): the binding's own per-call
cost (mpi4py: about 0.5 us); ``copy``, seconds to copy ``bytes`` within a
process (a memory copy, as MPI copies a collective's own block); and, from
ranks 0 and 1, seconds per call of ``sendrecv``, ``alltoall``,
``allgather`` and ``allgather_inplace`` (``MPI.IN_PLACE``) with 8 bytes per
member, measured interleaved so that the machine's drift cancels,
``loop``, the timing loop's own cost per call, and per size (``bytes``
per rank) ``alltoallw`` of 3-D subarrays against ``alltoall_contig``, the
same bytes contiguous (single calls from cold caches, median); and
``eager_limit``, whose ``bytes`` is the largest message a blocking Send
hands over before its receiver posted the receive (bisected; MPICH on
shared memory: 8112).

``fit``: assigns each peer to the innermost level joining it with rank 0
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
what packing non-contiguous datatypes adds per byte sent and received.
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
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

# every power of two up to 4 MiB: the curve bends at several of them
SIZES = [0] + [1 << k for k in range(0, 23)]
WINDOW = 64                                 # messages in flight in a stream (as osu_bw)
COPY_SIZES = [65536, 1048576, 4194304, 16777216]
COLLECTIVES = ("alltoall", "allgather")      # one exchange at two ranks
# (a0, a1) of _pack_costs' (a0, a1, 33) complex arrays: 270 KB, 1.1 MB and 4.3 MB per rank
PACK_SHAPES = [(16, 32), (32, 64), (64, 128)]
PACKING = ("alltoallw", "alltoall_contig")  # what _pack_costs' rows are


def _median_per_call(fn, calls: int, repeats: int) -> float:
    from mpi4py import MPI
    spans = []
    for _ in range(repeats):
        t0 = MPI.Wtime()
        for _ in range(calls):
            fn()
        spans.append((MPI.Wtime() - t0) / calls)
    return statistics.median(spans)


def _first_two(w):
    """A communicator of ranks 0 and 1 of ``w`` on those two (the others
    get None, as does a single rank); the caller frees it."""
    from mpi4py import MPI
    if w.size < 2:
        return None
    pair = w.Split(0 if w.rank < 2 else MPI.UNDEFINED, w.rank)
    return None if pair == MPI.COMM_NULL else pair


def _eager_limit(w, late: float = 0.02) -> int | None:
    """The largest message a blocking Send hands over before its receiver
    has posted the receive (MPI's eager protocol; larger ones wait for the
    receiver: rendezvous), from ranks 0 and 1: rank 1 posts each receive
    ``late`` seconds after rank 0 starts sending; a send that returns
    within half of that was eager.  Bisection between the powers of two
    that straddle it (MPICH on shared memory: 8112 bytes, a cell of 8 KiB
    less its header).  None where even 4 MiB goes eagerly, or fewer than
    two ranks."""
    import numpy as np
    from mpi4py import MPI
    pair = _first_two(w)
    if pair is None:
        return None
    buf = np.zeros(1 << 22, np.uint8)

    def eager(n: int) -> bool:
        pair.Barrier()
        if pair.rank == 0:
            t0 = MPI.Wtime()
            pair.Send([buf, n, MPI.BYTE], 1, 9)
            quick = MPI.Wtime() - t0 < late / 2
            pair.Recv([buf, 0, MPI.BYTE], 1, 9)
        else:
            time.sleep(late)
            pair.Recv([buf, n, MPI.BYTE], 0, 9)
            pair.Send([buf, 0, MPI.BYTE], 0, 9)
            quick = None
        return pair.bcast(quick, 0)
    lo, hi = 0, 1024
    while hi <= len(buf) and eager(hi):
        lo, hi = hi, hi * 2
    found = hi <= len(buf)
    while found and hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if eager(mid) else (lo, mid)
    pair.Free()
    return lo if found else None


def _pair_costs(w, repeats: int) -> list:
    """Rows (what, seconds per call) of ranks 0 and 1: a Sendrecv, the
    collectives of COLLECTIVES (allgather also in place), 8 bytes per
    member, and the timing loop's own cost (``loop``).  Interleaved in short
    blocks, each row but the Sendrecv's is the Sendrecv's median plus the
    median of its block-by-block difference: the machine's drift cancels."""
    import numpy as np
    from mpi4py import MPI
    pair = _first_two(w)
    if pair is None:
        return []
    other = 1 - pair.rank
    # buffers made once, as an application's are (a slice per call costs
    # ~0.1 us, which the model would charge every allgather)
    s, r = np.ones(16, np.uint8), np.ones(16, np.uint8)
    s8, r8 = s[:8], r[:8]
    calls = {"sendrecv": lambda: pair.Sendrecv(s8, other, 3, r8, other, 3),
             "alltoall": lambda: pair.Alltoall(s, r),
             "allgather": lambda: pair.Allgather(s8, r),
             "allgather_inplace": lambda: pair.Allgather(MPI.IN_PLACE, r),
             "loop": lambda: None}
    spans = {what: [] for what in calls}
    for _ in range(repeats):
        for what, fn in calls.items():
            pair.Barrier()
            spans[what].append(_median_per_call(fn, 500, 1))
    pair.Free()
    base = statistics.median(spans["sendrecv"])
    return [("sendrecv", base)] + [
        (what, base + statistics.median(t - b for t, b in zip(spans[what], spans["sendrecv"])))
        for what in calls if what != "sendrecv"]


def _pack_costs(w, repeats: int) -> list:
    """Rows (what, bytes, seconds per call) of ranks 0 and 1 for MPI's
    packing of non-contiguous derived datatypes: an Alltoallw whose blocks
    are 3-D subarrays of complex numbers, (a0, a1/2, 33) out of (a0, a1,
    33) on the send side (contiguous pieces of a1/2 x 33 numbers), as
    mpi4py-fft's slab redistribution has (``alltoallw``), and an Alltoall of
    the same bytes contiguous (``alltoall_contig``), ``bytes`` per rank;
    single calls on data just evicted from the caches (an application
    redistributes arrays that its computation has pushed out), the median
    of each.  Their difference per byte sent and received is
    ``network.pack_byte_time``: MPICH on shared memory moved mpi4py-fft's
    1.1 MB per rank of subarrays in 550 us inside its solver, 560 us here
    from cold caches, 340 us warm; contiguous, 240 us cold."""
    import numpy as np
    from mpi4py import MPI
    pair = _first_two(w)
    if pair is None:
        return []
    rows = []
    flush = np.ones(32 << 20, np.uint8)         # larger than the caches
    for a0, a1 in PACK_SHAPES:
        shape_a, shape_b = (a0, a1, 33), (2 * a0, a1 // 2, 33)
        a, b = np.ones(shape_a, complex), np.zeros(shape_b, complex)
        s, r = np.ones(a.size, complex), np.zeros(a.size, complex)
        dt = MPI.DOUBLE_COMPLEX
        stypes = [dt.Create_subarray(shape_a, (a0, a1 // 2, 33), (0, j * (a1 // 2), 0)).Commit()
                  for j in range(2)]
        rtypes = [dt.Create_subarray(shape_b, (a0, a1 // 2, 33), (j * a0, 0, 0)).Commit()
                  for j in range(2)]
        cd = ([1, 1], [0, 0])
        calls = {"alltoallw": lambda: pair.Alltoallw([a, cd, stypes], [b, cd, rtypes]),
                 "alltoall_contig": lambda: pair.Alltoall(s, r)}
        median = {}
        for what, fn in calls.items():
            spans = []
            for _ in range(max(10, repeats // 3) + 2):
                flush += 1              # evict both arrays from the caches
                pair.Barrier()
                t0 = MPI.Wtime()
                fn()
                spans.append(MPI.Wtime() - t0)
            median[what] = statistics.median(spans[2:])     # the first two warm up
        rows += [(what, a.nbytes, t) for what, t in median.items()]
        for t in stypes + rtypes:
            t.Free()
    pair.Free()
    return rows


def _message_buffer(n: int):
    """``n`` bytes of written memory on ordinary pages, as a message buffer.

    Written: a never-written np.zeros maps one shared zero page, which
    MPICH sent from cache (1 MiB in 80 us against 112 us from real data).
    Ordinary 4 KiB pages (an anonymous mmap, as malloc gives a C code and
    as mpi4py's OSU demos allocate): NumPy asks for transparent huge pages
    from 4 MiB up, and MPICH moved 4 MiB from those in 340 us against
    470 us from ordinary pages, which would bend the curve's end down.  The
    sender and the receiver each have their own (sending back the buffer
    just received into ran 8-256 KiB messages up to twice as slow)."""
    import mmap

    import numpy as np
    buf = np.frombuffer(mmap.mmap(-1, max(n, 1)), dtype=np.uint8)[:n]
    buf[:] = 1
    return buf


def _typical_block(w, peer, on_zero, on_peer, n: int, repeats: int) -> float:
    """Seconds per call of the median block of back-to-back calls (rank 0
    runs ``on_zero``, ``peer`` runs ``on_peer``; others wait): applications
    repeat their exchanges, and the first block, which warms up, is not
    counted.  The median, not the fastest block: an application pays the
    typical call, and the fastest of 30 blocks was 2-26 % below it here,
    3-15 % at most sizes (a 1 MiB Sendrecv: 109 us fastest, 118 us
    median, 115 us per call over 30 calls in a row).  ``n``: the bytes one
    call moves (from 1 MiB on, fewer and shorter blocks).  Returned on rank 0."""
    from mpi4py import MPI
    calls = 20 if n < (1 << 20) else 3
    reps = repeats if n < (1 << 20) else max(9, repeats // 3)
    spans = []
    for rep in range(reps + 1):
        w.Barrier()
        fn = on_zero if w.rank == 0 else on_peer if w.rank == peer else None
        if fn is None:
            continue
        t0 = MPI.Wtime()
        for _ in range(calls):
            fn()
        if rep:
            spans.append((MPI.Wtime() - t0) / calls)
    return statistics.median(spans) if spans else float("inf")


def _stream(w, peer, sbuf, rbuf):
    """(sender, receiver): one window of WINDOW nonblocking messages from
    rank 0 to ``peer``, all in flight at once, then a short
    acknowledgement (so that the sender's next window starts after the
    receiver has them all)."""
    from mpi4py import MPI
    ack = bytearray(4)

    def post():
        MPI.Request.Waitall([w.Isend(sbuf, peer, 8) for _ in range(WINDOW)])
    if peer == MPI.PROC_NULL:                # the loop alone: no acknowledgement
        return post, post

    def send():
        post()
        w.Recv(ack, peer, 9)

    def receive():
        MPI.Request.Waitall([w.Irecv(rbuf, 0, 8) for _ in range(WINDOW)])
        w.Send(ack, 0, 9)
    return send, receive


def measure(out: str, sizes=SIZES, repeats: int = 30) -> None:
    import numpy as np
    from mpi4py import MPI
    w = MPI.COMM_WORLD
    rows = []
    for peer in range(1, w.size):
        for n in sizes:
            sbuf, rbuf = _message_buffer(n), _message_buffer(n)

            def ping():
                w.Send(sbuf, peer, 7)
                w.Recv(rbuf, peer, 7)

            def pong():
                w.Recv(rbuf, 0, 7)
                w.Send(sbuf, 0, 7)
            t = _typical_block(w, peer, ping, pong, n, repeats)
            if w.rank == 0:
                rows.append((peer, n, t / 2, "pingpong"))
            t = _typical_block(w, peer, *_stream(w, peer, sbuf, rbuf), WINDOW * n, repeats)
            if w.rank == 0:
                rows.append((peer, n, t / WINDOW, "stream"))
            if peer == 1:
                # both directions at once (rank 0 with its nearest peer)
                def exchange():
                    w.Sendrecv(sbuf, 1 - w.rank, 7, rbuf, 1 - w.rank, 7)
                t = _typical_block(w, peer, exchange, exchange, n, repeats)
                if w.rank == 0:
                    rows.append((peer, n, t, "exchange"))
    # the binding's cost per call: calls that MPI answers at once
    buf = np.zeros(8, dtype=np.uint8)

    def null_pair():
        w.Send(buf, MPI.PROC_NULL, 7)
        w.Recv(buf, MPI.PROC_NULL, 7)
    rows.append((-1, 0, _median_per_call(null_pair, 2000, repeats) / 2, "call"))
    # the stream's own loop: the same window to MPI.PROC_NULL, per message
    post, _ = _stream(w, MPI.PROC_NULL, buf, buf)
    rows.append((-1, 8, _median_per_call(post, 20, repeats) / WINDOW, "stream_loop"))
    # a memory copy within the process, over buffers larger than the caches
    for n in COPY_SIZES:
        a, b = np.ones(n, np.uint8), np.zeros(n, np.uint8)
        rows.append((-1, n, min(_median_per_call(lambda: np.copyto(b, a), 1, 3)
                                for _ in range(max(3, repeats // 3))), "copy"))
    rows += [(-1, 8, t, what) for what, t in _pair_costs(w, repeats)]
    rows += [(-1, n, t, what) for what, n, t in _pack_costs(w, repeats)]
    limit = _eager_limit(w)
    if limit is not None:
        rows.append((-1, limit, 0.0, "eager_limit"))
    if w.rank == 0:
        with open(out, "w") as f:
            f.write("peer,bytes,one_way,what\n")
            f.writelines(f"{p},{n},{t!r},{what}\n" for p, n, t, what in rows)
        print(f"wrote {out} ({len(rows)} points)")


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
    blocks: list[list[float]] = []              # [sum, count]
    for x in t:
        blocks.append([x, 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s_, c_ = blocks.pop()
            blocks[-1][0] += s_
            blocks[-1][1] += c_
    return [s_ / c_ for s_, c_ in blocks for _ in range(c_)]


def _two_rank_overheads(pair, call: float, level: dict,
                        self_limit: int) -> tuple[float, dict]:
    """(copy_overhead, {family: collective_overhead}) from the two-rank rows
    (``pair``: what -> seconds per call) against the model's cost of one
    exchange of 8 bytes: the one-way time of the level joining ranks 0 and
    1 (the binding's call cost included), read off its measured curve as
    the simulator does, else off its fitted line.  The alltoall's own block
    is counted as the simulator charges it: a message to itself (the same
    one-way time less the binding's call) up to ``self_limit`` bytes, else
    the local copy."""
    if not any(f in pair for f in COLLECTIVES):
        return 0.0, {}
    if "one_way" in level:
        from .platform import one_way_at
        exchange = float(one_way_at(level["one_way"], 8))
    else:
        exchange = call + level["latency"] + 8 * level["byte_time"]
    loop = float(pair.get("loop", 0.0))
    copy_over = 0.0
    if "allgather" in pair and "allgather_inplace" in pair:
        copy_over = max(float(pair["allgather"] - pair["allgather_inplace"]), 0.0)
    measured = {"alltoall": pair.get("alltoall"),
                "allgather": pair.get("allgather_inplace", pair.get("allgather"))}
    own_copy = {"alltoall": exchange - call if self_limit >= 8 else copy_over, "allgather": 0.0}
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
    return max(float(per_byte.median()), 0.0) if len(per_byte) else 0.0


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


def fit(raw: str, cores_per_node: int, nodes: int, spans: list[int] | None,
        eager_limit: int | None, name: str, alltoall_self_limit: int = 32768,
        combine: str = "min") -> dict:
    import pandas as pd
    df = pd.read_csv(raw)
    if "what" not in df:
        df["what"] = ["pingpong" if p >= 0 else "call" for p in df["peer"]]
    if eager_limit is None:
        # the measured one (the smallest, over several measurements), else MPICH's
        # default over a network
        measured = df.loc[df["what"] == "eager_limit", "bytes"]
        eager_limit = int(measured.min()) if len(measured) else 65536
    per_call = df[df["what"] == "call"]["one_way"]
    call = float(per_call.agg(combine)) if len(per_call) else 0.0
    # several measurements in one file (concatenated): each point's minimum
    # (or median)
    copy = df[df["what"] == "copy"].groupby("bytes", as_index=False)["one_way"].agg(combine)
    copy_bt = _line(copy)[1] if len(copy) >= 2 else 0.0
    # the two-rank rows (sendrecv, collectives, loop): what -> seconds per call
    pack_bt = _pack_byte_time(df[df["what"].isin(PACKING)], combine)
    pair = df[~df["what"].isin(["pingpong", "exchange", "stream", "stream_loop", "call", "copy",
                                "eager_limit", *PACKING])]
    pair = pair.groupby("what")["one_way"].agg(combine)
    exchange = df[df["what"] == "exchange"].groupby("bytes")["one_way"].agg(combine)
    stream = df[df["what"] == "stream"].copy()
    # the caller's own cost per message of the window, which the simulator
    # charges as the application's calls and computation, comes off
    loop = df[df["what"] == "stream_loop"]["one_way"]
    own = float(loop.agg(combine)) if len(loop) else 0.0
    stream["one_way"] = (stream["one_way"] - own).clip(0)
    df = df[df["what"] == "pingpong"]
    spans = spans or ([cores_per_node] if nodes > 1 else [])
    names = [f"span{s}" for s in spans] + ["fabric" if nodes > 1 else "node"]

    def level(peer):
        for i, s in enumerate(spans):
            if peer // s == 0:
                return i
        return len(spans)
    df["level"] = df["peer"].map(level)
    stream["level"] = stream["peer"].map(level)
    levels = []
    for i, lname in enumerate(names):
        d = df[df["level"] == i]
        if d.empty:
            continue
        d = d.groupby("bytes", as_index=False)["one_way"].agg(combine)
        eager, rdv = d[d["bytes"] <= eager_limit], d[d["bytes"] > eager_limit]
        lat, bt = _line(eager if len(eager) >= 2 else d)
        lv = {"name": lname, "latency": max(lat - call, 0.0), "byte_time": bt}
        if len(rdv) >= 2:
            # large messages stream at their own rate (shared memory: a
            # pipelined copy); their intercept is the handshake, modelled apart
            lv["rendezvous_byte_time"] = _line(rdv)[1]
        if len(d) >= 2:
            curve = d.set_index("bytes")["one_way"]
            if i == level(1) and len(exchange):
                curve = _loaded(curve, exchange)
            lv["one_way"] = [[int(n), float(t)] for n, t in
                             zip(curve.index, _non_decreasing(list(curve.to_numpy(float))))]
        st = stream[stream["level"] == i].groupby("bytes")["one_way"].agg(combine)
        if len(st) >= 2:
            lv["stream"] = [[int(n), float(t)] for n, t in st.items()]
        if i < len(spans):
            lv["span"] = spans[i]
        levels.append(lv)
    if not levels:
        raise ValueError(f"{raw}: no measurements")
    levels[-1].pop("span", None)
    copy_over, coll_over = _two_rank_overheads(pair, call, levels[0], alltoall_self_limit)
    net = {"levels": levels, "overhead": {"send": 0.0, "recv": 0.0}, "gap": 0.0,
           "eager_limit": eager_limit, "contention": nodes > 1}
    if call:
        net["call_overhead"] = call
    if copy_bt:
        net["copy_byte_time"] = copy_bt
    if copy_over:
        net["copy_overhead"] = copy_over
    if pack_bt:
        net["pack_byte_time"] = pack_bt
    if coll_over:
        net["collective_overhead"] = coll_over
        if alltoall_self_limit:
            net["alltoall_self_limit"] = alltoall_self_limit
    return {"name": name, "nodes": nodes, "cores_per_node": cores_per_node, "placement": "block",
            "network": net,
            "collectives": {"default": "analytic"}, "compute_scale": 1.0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m netsim.calibrate",
                                 description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure", help="ping-pongs, streams, copies and two-rank "
                                       "collectives (run under mpiexec)")
    m.add_argument("-o", "--output", required=True)
    m.add_argument("--repeats", type=int, default=30)
    f = sub.add_parser("fit", help="fit latency/byte time and curves per level, "
                                   "write a platform YAML")
    f.add_argument("raw")
    f.add_argument("--cores-per-node", type=int, required=True)
    f.add_argument("--nodes", type=int, default=1)
    f.add_argument("--spans", help="comma-separated spans of the inner levels (cores)")
    f.add_argument("--eager-limit", type=int,
                   help="bytes (default: the measured eager_limit row, else 65536)")
    f.add_argument("--alltoall-self-limit", type=int, default=32768,
                   help="largest alltoall block sent to itself as a message (MPICH's "
                        "MPIR_CVAR_ALLTOALL_MEDIUM_MSG_SIZE; 0: the own block is copied)")
    f.add_argument("--combine", choices=("min", "median", "mean"), default="min",
                   help="how several measurements concatenated in RAW combine, per point "
                        "(min: the quietest moment; median: the typical one; mean: the "
                        "average over the machine's states)")
    f.add_argument("--name", default="calibrated")
    f.add_argument("-o", "--output", required=True)
    a = ap.parse_args(argv)
    if a.cmd == "measure":
        measure(a.output, repeats=a.repeats)
        return 0
    import yaml
    try:
        spans = [int(x) for x in a.spans.split(",")] if a.spans else None
        d = fit(a.raw, a.cores_per_node, a.nodes, spans, a.eager_limit, a.name,
                a.alltoall_self_limit, a.combine)
    except (OSError, ValueError, KeyError) as e:
        print(f"netsim.calibrate: error: {e}", file=sys.stderr)
        return 2
    with open(a.output, "w") as fh:
        yaml.safe_dump(d, fh, sort_keys=False, default_flow_style=None)
    for lv in d["network"]["levels"]:
        rdv = lv.get("rendezvous_byte_time")
        big = lv["stream"][-1] if "stream" in lv else None
        print(f"{lv['name']}: latency {lv['latency'] * 1e6:.3f} us, "
              f"{gbs(lv['byte_time']):.2f} GB/s" +
              (f", {gbs(rdv):.2f} GB/s over the eager limit" if rdv is not None else "") +
              (f", streamed {big[0]} B every {big[1] * 1e6:.1f} us" if big else ""))
    if "call_overhead" in d["network"]:
        print(f"call overhead {d['network']['call_overhead'] * 1e6:.3f} us per call")
    if "copy_byte_time" in d["network"]:
        print(f"local copy {gbs(d['network']['copy_byte_time']):.2f} GB/s"
              + (f" + {d['network']['copy_overhead'] * 1e6:.3f} us per copy"
                 if "copy_overhead" in d["network"] else ""))
    if "pack_byte_time" in d["network"]:
        print(f"packing non-contiguous datatypes {d['network']['pack_byte_time'] * 1e9:.3f} "
              "ns per byte sent and received")
    for fam, t in d["network"].get("collective_overhead", {}).items():
        print(f"{fam}: {t * 1e6:.3f} us per call beyond its messages")
    print(f"wrote {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
