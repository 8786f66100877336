"""Measure the target's network from Python (``python -m calibrate measure``).

    mpiexec -n P python -m calibrate measure -o pingpong.csv [--repeats R]

First, before any other message between them, rank 0 and every other
rank in turn time their ``warmup``: back-to-back exchanges of the largest
size on their new connection, in order (``peer`` the other rank), 32 MiB
each way (at least 16 of them, at most 1,024), the first behind a 1-byte
message from rank 0 that opens the connection (so that every level's
connections are measured new, not only the nearest: on a cluster of
2-core nodes ranks 0 and 1 share memory, and the network's connection
is ranks 0 and 2's).  Then rank 0 ping-pongs with every other rank in turn (so with ranks
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
per message; with ``--spacing S`` (``spacing``, a row of its own) each
ping-pong and exchange is instead timed alone after S of work on both
ranks (_after_work); with
rank 1 also an ``exchange`` (a Sendrecv, both directions at once) per
size.  Further rows, peer -1:
``call``, the cost of one call that MPI completes at once (a Send to and a
Recv from ``MPI.PROC_NULL``, median per call): the binding's own per-call
cost (mpi4py: about 0.5 us); ``rma``, the cost of one one-sided call on a
window of rank 0 itself (Lock, Get_accumulate of 8 bytes and Unlock in
turn, median per call: MPI's own work in them besides any message; MPICH
on this host's shared memory: 1.2-1.3 us); ``copy``, seconds to copy ``bytes`` within a
process (a memory copy, as MPI copies a collective's own block); and, from
ranks 0 and 1, seconds per call of ``sendrecv``, ``alltoall``,
``allgather`` and ``allgather_inplace`` (``MPI.IN_PLACE``) with 8 bytes per
member, measured interleaved so that the machine's drift cancels,
``loop``, the timing loop's own cost per call, and per size (``bytes``
per rank) ``alltoallw`` of 3-D subarrays against ``alltoall_contig``, the
same bytes contiguous (single calls from cold caches, median); and
``probe_late``, whose ``bytes`` is how many Iprobe calls report nothing
for a message that has already arrived (MPICH: 1);
``intercomm_poll_bytes``, whose ``bytes`` is how much of a rendezvous
message over an intercommunicator moves per call its sender makes
(bisected; MPICH here: 8112); and
``eager_limit``, whose ``bytes`` is the largest message a blocking Send
hands over before its receiver posted the receive (bisected; MPICH on
shared memory: 8112).

On a virtual core of an emulated cluster (emulate's ``core`` script sets
its share), the CPU costs (``call``, ``stream_loop``, ``rma``, ``copy``,
the pair's collectives and ``loop``, ``alltoallw``/``alltoall_contig``)
are timed in the core's own clock, CPU seconds / share (cost_clock); the
trips stay in wall time.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable

# every power of two up to 4 MiB: the curve bends at several of them
SIZES = [0] + [1 << k for k in range(0, 23)]
WINDOW = 64                                 # messages in flight in a stream (as osu_bw)
COPY_SIZES = [65536, 1048576, 4194304, 16777216]
COLLECTIVES = ("alltoall", "allgather")      # one exchange at two ranks
# (a0, a1) of _pack_costs' (a0, a1, 33) complex arrays: 270 KB, 1.1 MB and 4.3 MB per rank
PACK_SHAPES = [(16, 32), (32, 64), (64, 128)]
PACKING = ("alltoallw", "alltoall_contig")  # what _pack_costs' rows are
WARMUP_BYTES = 1 << 25                      # each way, at the start of a new connection


def cost_clock() -> Callable[[], float]:
    """The clock that CPU costs (a call, a copy, packing) are timed by:
    MPI.Wtime on a real core.  On a virtual core of share F (emulate's
    ``core`` script says so) the process's CPU seconds / F, the core's own
    clock, as replay times computation there: in wall time a measurement
    shorter than the quota's period runs in one burst at the real CPU's
    full speed (copies at 40 GB/s on cores of 0.1 CPU) and a longer one
    waits out the quota wherever it falls (packing came out between 0.002
    and 36 ns per byte).  The network's rows stay in wall time: a message
    waits for the other core's quota as an application's does."""
    from mpi4py import MPI

    from emulate.cores import own_core
    share = own_core()[0]
    if share >= 1.0:
        return MPI.Wtime
    return lambda: time.process_time() / share


def _median_per_call(fn, calls: int, repeats: int) -> float:
    clock = cost_clock()
    spans = []
    for _ in range(repeats):
        t0 = clock()
        for _ in range(calls):
            fn()
        spans.append((clock() - t0) / calls)
    return statistics.median(spans)


def _rma_per_call(w, repeats: int) -> float:
    """Seconds per one-sided call on a window of rank 0 itself: Lock,
    Get_accumulate (8 bytes) and Unlock, in turn, as a shared counter
    draws (median per call; returned on rank 0, 0 elsewhere)."""
    import numpy as np
    from mpi4py import MPI
    win = MPI.Win.Allocate(8 if w.rank == 0 else 0, 8, comm=w)
    one, got = np.ones(1, np.int64), np.zeros(1, np.int64)

    def draw():
        win.Lock(0)
        win.Get_accumulate(one, got, 0, op=MPI.SUM)
        win.Unlock(0)
    t = _median_per_call(draw, 500, repeats) / 3 if w.rank == 0 else 0.0
    win.Free()
    return t


def _first_two(w):
    """A communicator of ranks 0 and 1 of ``w`` on those two (the others
    get None, as does a single rank); the caller frees it."""
    from mpi4py import MPI
    if w.size < 2:
        return None
    pair = w.Split(0 if w.rank < 2 else MPI.UNDEFINED, w.rank)
    return None if pair == MPI.COMM_NULL else pair


def _eager_limit(w, late: float = 0.02, largest: int = 1 << 22) -> int | None:
    """The largest message a blocking Send hands over before its receiver
    has posted the receive (MPI's eager protocol; larger ones wait for the
    receiver: rendezvous), from ranks 0 and 1: rank 1 posts each receive
    ``late`` seconds after rank 0 starts sending; a send that returns
    within half of that was eager.  Bisection between the powers of two
    that straddle it (MPICH on shared memory: 8112 bytes, a cell of 8 KiB
    less its header).  None where even ``largest`` bytes go eagerly, or fewer than
    two ranks.

    A rendezvous send can never be quick, an eager one can be slow when
    its core is held up (a virtual core waits out its quota: up to a
    period), so a slow send is tried once more before it counts as
    rendezvous, and ``late`` doubles (up to 1.3 s) until a one-byte
    message, eager in every MPI, is quick three times in a row (a core
    of 0.1 CPU can hold a send up for most of its 10 ms period).  Over
    libfabric's tcp provider, as the emulated cluster's launcher uses, a
    send of more than 128 bytes waits for its receiver's progress: 128."""
    import numpy as np
    from mpi4py import MPI
    pair = _first_two(w)
    if pair is None:
        return None
    buf = np.zeros(largest, np.uint8)

    def quick(n: int) -> bool:
        pair.Barrier()
        if pair.rank == 0:
            t0 = MPI.Wtime()
            pair.Send([buf, n, MPI.BYTE], 1, 9)
            fast = MPI.Wtime() - t0 < late / 2
            pair.Recv([buf, 0, MPI.BYTE], 1, 9)
        else:
            time.sleep(late)
            pair.Recv([buf, n, MPI.BYTE], 0, 9)
            pair.Send([buf, 0, MPI.BYTE], 0, 9)
            fast = None
        return pair.bcast(fast, 0)

    def eager(n: int) -> bool:
        return quick(n) or quick(n)
    while late < 1.0 and not all(quick(1) for _ in range(3)):
        late *= 2
    lo, hi = 0, 1024
    while hi <= len(buf) and eager(hi):
        lo, hi = hi, hi * 2
    found = hi <= len(buf)
    while found and hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if eager(mid) else (lo, mid)
    pair.Free()
    return lo if found else None


def _probe_late(w, trials: int = 9, settle: float = 0.005) -> int | None:
    """How many MPI_Iprobe calls report nothing for a message that has
    already arrived, from ranks 0 and 1: rank 1 sends 8 bytes, rank 0 waits
    ``settle`` seconds outside MPI (long enough for it to arrive), then
    calls Iprobe until it reports the message (median over ``trials``).
    MPICH: 1 (the first call runs the progress engine, which moves the
    message into the unexpected queue, and reports nothing; the next one
    finds it), so a polling loop that sleeps g between calls notices a
    message 1.5 g after it came on average, not g / 2.  On slow cores (a
    CPU quota of a few per cent) the message may still be on its way after
    5 ms: while the median exceeds 2, the settle doubles, up to 1.3 s.
    None at one rank."""
    pair = _first_two(w)
    if pair is None:
        return None
    buf = bytearray(8)
    while True:
        late = []
        for _ in range(trials):
            pair.Barrier()
            if pair.rank == 1:
                pair.Send(buf, 0, 11)
            else:
                time.sleep(settle)
                n = 0
                while not pair.Iprobe(1, 11):
                    n += 1
                late.append(n)
                pair.Recv(buf, 1, 11)
        # rank 0 decides, both follow
        again = pair.bcast(bool(late) and statistics.median(late) > 2 and settle < 1.0, root=0)
        if not again:
            break
        settle *= 2
    pair.Free()
    return int(statistics.median(late)) if late else None


def _intercomm_poll_bytes(w, trials: int = 5, largest: int = 1 << 16) -> int | None:
    """Bytes of a rendezvous message that move per call its sender makes
    over an intercommunicator of ranks 0 and 1 (mpi4py.futures talks over
    one): the largest message that needs no more sender calls than 1 KiB
    does.  Rank 0 posts the receive, rank 1 Issends and calls Test,
    sleeping 1 ms between calls, until it completes; the fewest Tests over
    ``trials`` (a disturbed trial only adds some); bisection between 1 KiB
    and ``largest``.  MPICH here: 8112 bytes (a cell of 8 KiB less its
    header; 16 KiB took three calls, 16,119 bytes two); over the
    intracommunicator of the same ranks a message moves at once.  None at
    one rank or where ``largest`` moves as quickly as 1 KiB (no limit)."""
    import numpy as np
    from mpi4py import MPI
    pair = _first_two(w)
    if pair is None:
        return None
    local = pair.Split(pair.rank, 0)
    inter = local.Create_intercomm(0, pair, 1 - pair.rank, 12)
    buf = np.ones(largest, np.uint8)

    def calls(n: int) -> int:
        fewest = None
        for _ in range(trials):
            if pair.rank == 0:
                req = inter.Irecv([buf, n, MPI.BYTE], 0, 13)
                pair.Barrier()
                req.Wait()
            else:
                pair.Barrier()
                time.sleep(0.002)           # the receive is posted
                req, k = inter.Issend([buf, n, MPI.BYTE], 0, 13), 1
                while not req.Test():
                    time.sleep(0.001)
                    k += 1
                fewest = k if fewest is None else min(fewest, k)
        return pair.bcast(fewest, 1)
    base = calls(1024)
    lo, hi = 1024, largest
    found = calls(hi) > base
    while found and hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if calls(mid) <= base else (lo, mid)
    inter.Free()
    local.Free()
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
    spans: dict[str, list] = {what: [] for what in calls}
    for _ in range(repeats):
        for what, fn in calls.items():
            pair.Barrier()
            spans[what].append(_median_per_call(fn, 500, 1))
    pair.Free()
    base = statistics.median(spans["sendrecv"])
    return [("sendrecv", base)] + [
        (what, base + statistics.median(t - b for t, b in zip(spans[what], spans["sendrecv"])))
        for what in calls if what != "sendrecv"]


def _pack_costs(w, repeats: int, shapes=PACK_SHAPES) -> list:
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
    clock = cost_clock()
    flush = np.ones(32 << 20, np.uint8)         # larger than the caches
    for a0, a1 in shapes:
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
                t0 = clock()
                fn()
                spans.append(clock() - t0)
            median[what] = statistics.median(spans[2:])     # the first two warm up
        rows += [(what, a.nbytes, t) for what, t in median.items()]
        for t in stypes + rtypes:
            t.Free()
    pair.Free()
    return rows


def message_buffer(n: int):
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
    runs ``on_zero``, ``peer`` runs ``on_peer``; others wait), every block
    after a barrier (_median_block).  Returned on rank 0."""
    fn = on_zero if w.rank == 0 else on_peer if w.rank == peer else None
    return _median_block(fn, n, repeats, before=w.Barrier)


def _median_block(fn, n: int, repeats: int, before=None) -> float:
    """Seconds per call of the median block of back-to-back calls of
    ``fn`` (None: this rank only takes part in ``before``, run ahead of
    every block): applications repeat their exchanges, and the first
    block, which warms up, is not counted.  The median, not the fastest
    block: an application pays the typical call, and the fastest of 30
    blocks was 2-26 % below it here, 3-15 % at most sizes (a 1 MiB
    Sendrecv: 109 us fastest, 118 us median, 115 us per call over 30
    calls in a row).  ``n``: the bytes one call moves (from 1 MiB on,
    fewer and shorter blocks)."""
    from mpi4py import MPI
    calls = 20 if n < (1 << 20) else 3
    reps = repeats if n < (1 << 20) else max(9, repeats // 3)
    spans = []
    for rep in range(reps + 1):
        if before is not None:
            before()
        if fn is None:
            continue
        t0 = MPI.Wtime()
        for _ in range(calls):
            fn()
        if rep:
            spans.append((MPI.Wtime() - t0) / calls)
    return statistics.median(spans) if spans else float("inf")


def _compute(seconds: float) -> None:
    """Keep this process's CPU busy for ``seconds`` of its own CPU time."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def _after_work(w, peer, on_zero, on_peer, n: int, repeats: int, spacing: float) -> float:
    """Seconds per call of calls each made after both ranks computed for
    ``spacing`` seconds of CPU time (rank 0 runs ``on_zero``, ``peer`` runs
    ``on_peer``; others wait): the cost of a synchronisation as an
    application meets it, after its work rather than back to back.  On a
    core of its own the two differ by microseconds (1.9 against 3.2 us on
    the development host's shared memory); where a rank's CPU comes in slices
    (a CPU quota, a shared or oversubscribed node) a waiting rank spins
    out its slice and a back-to-back loop pays the slicing on every trip,
    which an application that computed in between does not.  The mean of
    the calls less the slowest and fastest tenth (an application pays
    the mean, whatever phase of the slicing its call meets); the computation
    is not timed.  Each piece of work is drawn between half and one and a
    half ``spacing``, the same on both ranks (a seeded draw): a fixed
    length could end every piece at the same phase of the slicing (a
    multiple of a quota ends where the quota does), where applications
    end theirs anywhere.  Returned on rank 0."""
    import random

    from mpi4py import MPI
    calls = max(20, repeats) if n < (1 << 20) else max(9, repeats // 3)
    w.Barrier()
    fn = on_zero if w.rank == 0 else on_peer if w.rank == peer else None
    if fn is None:
        return float("inf")
    draw = random.Random(peer * 1_000_003 + n)
    spans = []
    for k in range(calls + 1):
        _compute(spacing * draw.uniform(0.5, 1.5))
        t0 = MPI.Wtime()
        fn()
        if k:                                   # the first one warms up
            spans.append(MPI.Wtime() - t0)
    spans.sort()
    cut = len(spans) // 10
    return statistics.fmean(spans[cut:len(spans) - cut])


def _stream(w, peer, sbuf, rbuf) -> tuple[Callable, Callable]:
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


def _warmups(w, n: int, total: int = WARMUP_BYTES) -> list:
    """Rows (peer, n, seconds, "warmup") on rank 0: its first exchanges of
    ``n`` bytes (Sendrecv, both directions at once) with every other rank
    in turn, each timed, until ``total`` bytes went each way (at least 16),
    before any other message between them (no barrier first: a barrier's
    messages would open the connections).  The first exchange follows a
    1-byte message from rank 0 that the other rank waits for, which opens
    the connection inside the timing: a transport that connects on first
    use (libfabric's TCP provider: a handshake through both ranks' progress)
    and opens its windows as data flows (TCP) shows what a new connection
    costs.  Over the emulated 1 Gbit/s link MPICH's first 1 MiB exchange
    took 17-19 ms, the next nine 12-15, later ones 10-11; on virtual cores
    of 0.05 CPU fft2d's first Alltoall took 1.7 s longer than its third."""
    from mpi4py import MPI
    rows: list = []
    if w.size < 2 or n < 1:
        return rows
    sbuf, rbuf = message_buffer(n), message_buffer(n)
    go = bytearray(1)
    # at most 1,024 (a measurement capped at a few bytes would make millions)
    count = max(16, min(-(-total // n), 1024))
    for peer in range(1, w.size):
        if w.rank not in (0, peer):
            continue
        other = peer if w.rank == 0 else 0
        if w.rank == peer:
            w.Recv(go, 0, 5)
        for k in range(count):
            t0 = MPI.Wtime()
            if k == 0 and w.rank == 0:
                w.Send(go, peer, 5)
            w.Sendrecv(sbuf, other, 6, rbuf, other, 6)
            if w.rank == 0:
                rows.append((peer, n, MPI.Wtime() - t0, "warmup"))
    return rows


def _point_to_point(w, sizes, repeats: int, spacing: float) -> list:
    """Rows (peer, bytes, one_way, what) of rank 0's ping-pongs and streams
    with every other rank, and its exchanges with rank 1, per size
    (``spacing`` > 0: ping-pongs and exchanges timed after work)."""
    def timed(peer, on_zero, on_peer, n):
        if spacing > 0:
            return _after_work(w, peer, on_zero, on_peer, n, repeats, spacing)
        return _typical_block(w, peer, on_zero, on_peer, n, repeats)
    rows = []
    for peer in range(1, w.size):
        for n in sizes:
            sbuf, rbuf = message_buffer(n), message_buffer(n)

            def ping():
                w.Send(sbuf, peer, 7)
                w.Recv(rbuf, peer, 7)

            def pong():
                w.Recv(rbuf, 0, 7)
                w.Send(sbuf, 0, 7)
            t = timed(peer, ping, pong, n)
            if w.rank == 0:
                rows.append((peer, n, t / 2, "pingpong"))
            t = _typical_block(w, peer, *_stream(w, peer, sbuf, rbuf), WINDOW * n, repeats)
            if w.rank == 0:
                rows.append((peer, n, t / WINDOW, "stream"))
            if peer == 1:
                # both directions at once (rank 0 with its nearest peer)
                def exchange():
                    w.Sendrecv(sbuf, 1 - w.rank, 7, rbuf, 1 - w.rank, 7)
                t = timed(peer, exchange, exchange, n)
                if w.rank == 0:
                    rows.append((peer, n, t, "exchange"))
    return rows


def partner(rank: int, size: int, round_: int) -> int | None:
    """``rank``'s partner in round ``round_`` of a round-robin tournament
    over ``size`` ranks (every pair meets once in ``rounds(size)`` rounds,
    each rank in at most one pair a round); None: it sits the round out
    (an odd count).  The circle method: over m = size rounded up to even,
    ranks i, j < m - 1 meet in round (i + j) mod (m - 1), and rank m - 1
    meets the i with 2 i = round mod (m - 1)."""
    m = size + size % 2
    if m < 2:
        return None
    if rank == m - 1:
        other = round_ * (m // 2) % (m - 1)       # m / 2 is 2's inverse mod m - 1
    else:
        other = (round_ - rank) % (m - 1)
        if other == rank:
            other = m - 1
    return other if other < size else None


def rounds(size: int) -> int:
    """The rounds of :func:`partner`'s tournament over ``size`` ranks."""
    return max(size + size % 2 - 1, 0)


def _every_pair(w, sizes, repeats: int) -> list:
    """Rows (peer, bytes, one_way, what, rank) of every pair's ping-pongs,
    on rank 0: in each round of a round-robin tournament all its pairs at
    once (after a barrier), the lower rank of each timing the median block
    of back-to-back trips (_median_block), ``rank`` that rank.  Pairs
    of a level can differ (on virtual cores each pair's latency is set by
    its two cores' quota phases), and rank 0's pairs all share its own:
    a sample of pairs that share no rank is the typical pair of the
    machine, not of rank 0."""
    rows = []
    for k in range(rounds(w.size)):
        other = partner(w.rank, w.size, k)
        w.Barrier()
        if other is None:
            continue
        for n in sizes:
            sbuf, rbuf = message_buffer(n), message_buffer(n)

            def ping():
                w.Send(sbuf, other, 7)
                w.Recv(rbuf, other, 7)

            def pong():
                w.Recv(rbuf, other, 7)
                w.Send(sbuf, other, 7)
            t = _median_block(ping if w.rank < other else pong, n, repeats)
            if w.rank < other:
                rows.append((other, n, t / 2, "pingpong", w.rank))
    every = w.gather(rows, 0)
    return [row for mine in every for row in mine] if w.rank == 0 else []


def measure(out: str, sizes=SIZES, repeats: int = 30, spacing: float = 0.0,
            only_pingpongs: bool = False) -> None:
    """Write the measurements CSV ``out`` (rank 0); see the module's text.
    ``spacing`` > 0: the ping-pongs and exchanges are timed one by one,
    each after that many seconds of computation (_after_work).
    ``only_pingpongs``: every pair's ping-pongs and nothing else, each
    pair's latency (_every_pair; ``calibrate fit --peers``): the rest,
    collectives over every rank included, cost minutes on many slow
    ranks."""
    import numpy as np
    from mpi4py import MPI
    w = MPI.COMM_WORLD
    if only_pingpongs:
        _write(w, out, _every_pair(w, sizes, repeats), ranked=True)
        return
    rows = _warmups(w, sizes[-1])
    rows += _point_to_point(w, sizes, repeats, spacing)
    # the binding's cost per call: calls that MPI answers at once
    buf = np.zeros(8, dtype=np.uint8)

    def null_pair():
        w.Send(buf, MPI.PROC_NULL, 7)
        w.Recv(buf, MPI.PROC_NULL, 7)
    rows.append((-1, 0, _median_per_call(null_pair, 2000, repeats) / 2, "call"))
    rows.append((-1, 8, _rma_per_call(w, repeats), "rma"))
    if spacing > 0:
        rows.append((-1, 0, spacing, "spacing"))
    # the stream's own loop: the same window to MPI.PROC_NULL, per message
    post, _ = _stream(w, MPI.PROC_NULL, buf, buf)
    rows.append((-1, 8, _median_per_call(post, 20, repeats) / WINDOW, "stream_loop"))
    # a memory copy within the process, over buffers larger than the caches
    for n in COPY_SIZES:
        a, b = np.ones(n, np.uint8), np.zeros(n, np.uint8)
        rows.append((-1, n, min(_median_per_call(lambda: np.copyto(b, a), 1, 3)
                                for _ in range(max(3, repeats // 3))), "copy"))
    rows += [(-1, 8, t, what) for what, t in _pair_costs(w, repeats)]
    # a measurement capped below 4 MiB (a slow network) keeps the two
    # smallest shapes, which the packing rate's fit needs at least
    shapes = [s for s in PACK_SHAPES if 16 * 33 * s[0] * s[1] <= max(sizes[-1], 1 << 20)]
    rows += [(-1, n, t, what) for what, n, t in _pack_costs(w, repeats, shapes)]
    # properties of the MPI, each a number of calls or bytes (None at one rank)
    for what, value in (("probe_late", _probe_late(w)),
                        ("intercomm_poll_bytes", _intercomm_poll_bytes(w)),
                        ("eager_limit", _eager_limit(w, largest=max(sizes[-1], 1 << 16)))):
        if value is not None:
            rows.append((-1, value, 0.0, what))
    _write(w, out, rows)


def _write(w, out: str, rows: list, ranked: bool = False) -> None:
    """The measurements CSV ``out``, written by rank 0 (``ranked``: rows
    of every pair, with the timing rank in a fifth column, ``rank``)."""
    if w.rank == 0:
        with open(out, "w") as f:
            f.write("peer,bytes,one_way,what" + (",rank\n" if ranked else "\n"))
            f.writelines(",".join([str(r[0]), str(r[1]), repr(r[2]), *map(str, r[3:])]) + "\n"
                         for r in rows)
        print(f"wrote {out} ({len(rows)} points)")
