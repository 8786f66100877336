"""Schedules: the dependency graph the engine runs, built from a trace.

A :class:`Schedule` holds one row per operation (numpy arrays, ranks'
operations contiguous), each column in the narrowest type that holds it
(the types are enforced on construction; a column that is the same for
every op may be a read-only broadcast view, which costs no memory):

==========  =======  ========================================================
``kind``    int8     0 CALC, 1 SEND, 2 RECV, 3 COLL (netsim.engine)
``rank``    int32    world rank that runs the op
``peer``    int32    SEND: destination; RECV: source (-1 any); else -1
``size``    int64    bytes (SEND/RECV)
``tag``     int32    SEND/RECV tag (-1 any)
``ctx``     int32    matching context: 2*comm for the application's
                     messages, 2*comm+1 for the messages of decomposed
                     collectives
``dur``     float64  CALC: seconds; COLL: the analytic cost
``coll``    int32    COLL: the collective instance (``coll_need`` members),
                     else -1
``event``   int64    the trace event (row of events.parquet) the op came from
``sync``    bool     SEND: a synchronous send (ssend, issend, ssend_init),
                     complete only once matched; else False
``reply``   bool     SEND: what a target's MPI sends back from the call that
                     received a one-sided request (Get data, a lock grant,
                     a put's acknowledgement): waits for no CPU in the
                     detailed engine (LogGOPSim's rules have no such send);
                     else False
==========  =======  ========================================================

and the dependencies as edges ``dep_src -> dep_dst`` (op indices: int32,
int64 beyond 2**31 - 1 ops) with ``dep_start`` (True: the destination may
start once the source *started*, GOAL's ``irequires``; False: once it
completed, ``requires``).

Lowering a trace (:func:`from_trace`): per rank, in call order, each
event's computation span becomes a CALC; a blocking call's ops must
complete before the next op starts; a nonblocking call's ops only need to
have started, and the wait/test that completed its request (the trace
records which) makes the following op require their completion.
Wildcard receives use the source and tag that matched in the traced run,
so the simulation follows the same matching.  Probes, communicator
management and finalize cost nothing.  A polling loop is one event (the
trace folds its empty polls into the call that ends it): it waits as
long as what it polls for takes to come in the simulation, plus the time
the loop takes to notice (:func:`_noticed`).  One-sided calls lower
as :class:`_OneSided` says.

A collective of Python objects runs as mpi4py runs it
(``collectives.OF_OBJECTS``: each pickle with its size; allreduce as a
reduce, then a broadcast, with the rank's own work between them as a
CALC: the ``inside`` seconds from the computation table).  A collective
first does its local work as a CALC (the platform's
``collective_overhead`` of its family, and for alltoall and allgather the
copy of the own block, ``copy_overhead`` plus ``copy_byte_time`` per byte,
unless called in place; an alltoall's block up to ``alltoall_self_limit``
is a message to itself instead), then
its messages.  A collective with fixed counts that moves no data at all
(every member passes 0 bytes) is local: MPICH returns from it at once,
without synchronising (measured for every such collective).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from contracts.raw_trace import FLAG_INPLACE, FLAG_LOCK_SHARED, FLAG_NONCONTIG, FLAG_OBJECT
from mpimodel import ops

from . import collectives as C
from .engine import CALC, COLL, RECV, SEND


class ScheduleError(Exception):
    """A trace or schedule the simulator cannot run (rank and event named)."""


# column -> the type it is stored in (see the module's docstring)
COLUMNS = {"kind": np.int8, "rank": np.int32, "peer": np.int32, "size": np.int64,
           "tag": np.int32, "ctx": np.int32, "dur": np.float64, "coll": np.int32,
           "event": np.int64, "sync": np.bool_, "reply": np.bool_}


def index_type(n: int):
    """The integer type of op indices for a schedule of ``n`` ops (or
    dependencies): 4 bytes while they fit."""
    return np.int32 if n < 2**31 - 1 else np.int64


def constant(value, n: int, dtype) -> np.ndarray:
    """A column with the same value for all ``n`` ops, in no memory (a
    read-only view)."""
    return np.broadcast_to(np.array(value, dtype), (n,))


def _narrowed(name: str, a, dtype) -> np.ndarray:
    """``a`` as ``dtype``; a value that the type cannot hold is an error,
    not a silent wrap-around."""
    a = np.asarray(a)
    if a.dtype == dtype:
        return a
    if len(a) and np.issubdtype(dtype, np.integer) and a.dtype.kind in "iu":
        lim = np.iinfo(dtype)
        if a.min() < lim.min or a.max() > lim.max:
            raise ScheduleError(f"schedule column {name}: values {a.min()}..{a.max()} do not "
                                f"fit in {np.dtype(dtype).name}")
    return a.astype(dtype)


@dataclass
class Schedule:
    kind: np.ndarray
    rank: np.ndarray
    peer: np.ndarray
    size: np.ndarray
    tag: np.ndarray
    ctx: np.ndarray
    dur: np.ndarray
    coll: np.ndarray
    event: np.ndarray
    sync: np.ndarray
    dep_src: np.ndarray
    dep_dst: np.ndarray
    dep_start: np.ndarray
    coll_need: np.ndarray
    nranks: int
    # each trace row's seq (the rank's own event number), for messages
    seq_of: np.ndarray | None = None
    # SEND rows a target's MPI sends from the call that received a
    # one-sided request (netsim/engine.py); none when not given
    reply: np.ndarray | None = None
    # seconds of the application's own computation in each op's ``dur``
    # (its spans and the work inside its calls, at the target's speed;
    # not what the platform charges per call): what varies from rank to
    # rank and span to span (netsim/variability.py); None: not known
    work: np.ndarray | None = None
    # seconds a SEND's data is held beyond its wire time by a sender that
    # makes it progress only at its polls (intercommunicator rendezvous,
    # :func:`_held_by_polls`); None: none
    held: np.ndarray | None = None

    def __post_init__(self):
        if self.reply is None:
            self.reply = np.zeros(len(self.kind), np.bool_)
        for name, dtype in COLUMNS.items():
            setattr(self, name, _narrowed(name, getattr(self, name), dtype))
        index = index_type(len(self.kind))
        self.dep_src = _narrowed("dep_src", self.dep_src, index)
        self.dep_dst = _narrowed("dep_dst", self.dep_dst, index)
        self.dep_start = _narrowed("dep_start", self.dep_start, np.bool_)
        self.coll_need = _narrowed("coll_need", self.coll_need, np.int32)

    def __len__(self):
        return len(self.kind)

    def graph(self):
        """(ndeps, succ_ptr, succ_idx, isucc_ptr, isucc_idx) for the engine:
        per op its number of dependencies, and its successors after its
        completion and after its start as compressed rows (pointers,
        indices), all in the schedule's index type."""
        n = len(self.kind)
        index = index_type(max(n, len(self.dep_src)))
        ndeps = np.bincount(self.dep_dst, minlength=n).astype(index)
        sp = np.zeros(n + 1, index)
        ip = np.zeros(n + 1, index)
        _count_successors(self.dep_src, self.dep_start, sp, ip)
        si = np.empty(sp[n], index)
        ii = np.empty(ip[n], index)
        _fill_successors(self.dep_src, self.dep_dst, self.dep_start, sp, si, ip, ii)
        return ndeps, sp, si, ip, ii


# The successor rows, built like a counting sort: every row keeps the order
# of the dependency list (the engine notifies dependants in that order)
@njit(cache=True)
def _count_successors(src, isstart, sp, ip):
    """Row pointers: sp after completion, ip after start (both zeroed).
    Zeros are never written: a kind of dependency the schedule does not
    have then costs its pointer array no memory."""
    for k in range(len(src)):
        if isstart[k]:
            ip[src[k] + 1] += 1
        else:
            sp[src[k] + 1] += 1
    for i in range(len(sp) - 1):
        if sp[i]:
            sp[i + 1] += sp[i]
        if ip[i]:
            ip[i + 1] += ip[i]


@njit(cache=True)
def _fill_successors(src, dst, isstart, sp, si, ip, ii):
    # where each row's next entry goes (only for a kind that occurs)
    sf = sp[:-1].copy() if len(si) else sp[:1]
    fi = ip[:-1].copy() if len(ii) else ip[:1]
    for k in range(len(src)):
        s = src[k]
        if isstart[k]:
            ii[fi[s]] = dst[k]
            fi[s] += 1
        else:
            si[sf[s]] = dst[k]
            sf[s] += 1


class Builder:
    """Appends operations and dependencies; ``done()`` makes the Schedule."""

    def __init__(self, nranks: int):
        self.nranks = nranks
        self.cols: dict[str, list] = {k: [] for k in ("kind", "rank", "peer", "size", "tag",
                                                      "ctx", "dur", "coll", "event", "sync",
                                                      "reply")}
        self.src: list[int] = []
        self.dst: list[int] = []
        self.isstart: list[bool] = []
        self.coll_need: list[int] = []
        self.n = 0

    def op(self, kind, rank, after, peer=-1, size=0, tag=-1, ctx=0, dur=0.0, coll=-1,
           event=-1, sync=False, reply=False) -> int:
        """Add an op that depends on ``after`` ([(op, started?)]); its index."""
        c = self.cols
        c["kind"].append(kind)
        c["rank"].append(rank)
        c["peer"].append(peer)
        c["size"].append(size)
        c["tag"].append(tag)
        c["ctx"].append(ctx)
        c["dur"].append(dur)
        c["coll"].append(coll)
        c["event"].append(event)
        c["sync"].append(sync)
        c["reply"].append(reply)
        i = self.n
        self.n += 1
        for src, st in after:
            self.src.append(src)
            self.dst.append(i)
            self.isstart.append(st)
        return i

    def new_coll(self, members: int) -> int:
        self.coll_need.append(members)
        return len(self.coll_need) - 1

    def done(self) -> Schedule:
        c = self.cols
        index = index_type(self.n)
        return Schedule(
            **{k: np.array(c[k], dtype) for k, dtype in COLUMNS.items()},
            dep_src=np.array(self.src, index), dep_dst=np.array(self.dst, index),
            dep_start=np.array(self.isstart, bool),
            coll_need=np.array(self.coll_need, np.int32), nranks=self.nranks)


# how each traced op lowers: by its kind in the one table (mpimodel/ops.py)
_P2P_SEND = ops.SENDS
_SYNC = ops.SYNC_SENDS                    # complete only once the receiver matched
_P2P_RECV = ops.RECVS
_SENDRECV = ops.SENDRECVS
_COMPLETIONS = ops.COMPLETIONS


def _base(op: str) -> str:
    return op[:-5] if op.endswith("_init") else op


def _fixed_counts(op: str) -> bool:
    """A collective whose members all pass the same count (not v/w, not a
    reduce_scatter with its counts vector): when one moves 0 bytes, all do."""
    b = _base(op)
    return not (b.endswith("v") or b.endswith("w") or b.lstrip("i") == "reduce_scatter")


def _local_work(fam, own, flags, platform) -> float:
    """Seconds a member computes on entering a collective, before its
    messages: the family's software overhead and the copy of its own block
    of ``own`` bytes (alltoall, allgather; none in place), or, for an
    alltoall's block up to ``alltoall_self_limit``, a message to itself."""
    t = platform.collective_overhead.get(fam, 0.0)
    inplace = flags & FLAG_INPLACE
    limit = platform.alltoall_self_limit             # 0: never a self message
    if fam == "alltoall" and not inplace and limit and own <= limit:
        t += platform.self_message(own)
    elif fam in ("alltoall", "allgather") and not inplace:
        t += platform.copy_overhead + own * platform.copy_byte_time
    return t


# One-sided communication (mpimodel/ops.py's WIN_* groups).  A transfer is
# lowered to messages that the target's side receives and answers without
# a call of its own (its CPU still pays the receive overhead: MPI's
# progress engine applies the data), matched by a context of their own.
_RMA_PUT = ("win_put", "win_accumulate", "win_rput", "win_raccumulate")
_RMA_GET = ("win_get", "win_get_accumulate", "win_fetch_and_op", "win_compare_and_swap",
            "win_rget", "win_rget_accumulate")
_RMA_COLLECTIVE = ("win_fence", "win_create", "win_allocate", "win_allocate_shared",
                   "win_create_dynamic", "win_free")
_RMA_COMPLETE_ONE = ("win_unlock", "win_flush", "win_flush_local")
_RMA_COMPLETE_ALL = ("win_unlock_all", "win_flush_all", "win_flush_local_all", "win_complete",
                     "win_fence")
# the calls that pay the platform's rma_overhead (MPI's own work in them)
_RMA_CHARGED = _RMA_PUT + _RMA_GET + _RMA_COMPLETE_ONE + (
    "win_lock", "win_lock_all", "win_unlock_all", "win_flush_all", "win_flush_local_all")


def _rma_ctx(comm: int) -> int:
    return -1 - comm


# tags of the messages that hand an exclusive lock on, apart from the
# transfers' (numbered from 1 by _Lowering.rma_tag)
_HANDOFF_TAG0 = 1 << 30


def _lock_handoffs(ev) -> tuple[dict, dict]:
    """Exclusive lock epochs, in the order the traced run held them.

    An epoch is a rank's Lock of a target's window and its next Unlock of
    the same; exclusive epochs of one window at one target cannot overlap,
    and the trace says in which order they ran (their Unlocks' ends, on
    the clock the ranks share from their start-up barrier).  Each epoch
    gets a tag for its messages.  Returns ``acquire`` (Lock event ->
    (the previous holder, -1 for none, and the tag)) and ``release``
    (Unlock event -> (the next holder, the next epoch's tag)) where the
    next holder is another rank.  Shared epochs are in no order (nor kept
    apart from exclusive ones)."""
    op = ev["op"].to_numpy()
    at = np.flatnonzero((op == "win_lock") | (op == "win_unlock"))
    if not len(at):
        return {}, {}
    rank, comm, win, target, flags, end = (ev[c].to_numpy()[at] for c in
                                           ("rank", "comm", "tag", "peer", "flags", "t_end"))
    held, epochs = {}, []
    for k, i in enumerate(at):
        key = (int(rank[k]), int(comm[k]), int(win[k]), int(target[k]))
        if op[i] == "win_lock":
            if not flags[k] & FLAG_LOCK_SHARED and target[k] >= 0:
                held[key] = int(i)
        elif key in held:
            epochs.append((key[1:], float(end[k]), key[0], held.pop(key), int(i)))
    epochs.sort(key=lambda e: (e[0], e[1]))
    acquire, release = {}, {}
    for n, b in enumerate(epochs):
        tag = _HANDOFF_TAG0 + n
        a = epochs[n - 1] if n and epochs[n - 1][0] == b[0] else None
        acquire[b[3]] = (a[2] if a else -1, tag)
        if a and a[2] != b[2]:
            release[a[4]] = (b[2], tag)
    return acquire, release


class _OneSided:
    """Lowering of a rank's window calls (a mixin of _Lowering).

    * Put, Accumulate: a message to the target, received there as soon as
      it is sent; it is complete once it landed (Rput, Raccumulate: their
      request completes once it is sent).
    * Get (and Get_accumulate, Fetch_and_op, Compare_and_swap): a request
      to the target (carrying the origin data, if any), which the target's
      MPI receives when its CPU is free and answers with the data from
      that same call (a reply send: netsim/engine.py; the R forms: their
      request completes once the data is in).
    * Unlock, Flush (one target; the _all forms, Complete and Fence: every
      target): the transfers to that target complete, and for puts an
      acknowledgement comes back from it (a round trip, as MPI must know the
      data landed).
    * Fence, and the window's creation and Free (collective, synchronising
      in MPI): then a barrier over the window's communicator (for creation
      and Free, after every transfer of the rank on the window completed).
    * Lock (exclusive): the rank holds the target's window alone until its
      Unlock, in the order the traced run took the lock
      (:func:`_lock_handoffs`).  The lock is the target's to grant: a
      request goes to it, which its MPI serves when its CPU is free (MPICH
      grants a lock only inside a call of the target), and the grant comes
      back once the previous holder let go: at the target's own Unlock,
      or on a release message from a holder elsewhere.  The target locking
      its own window needs no request: it waits for that release alone.
    * Lock (shared), Lock_all, Post, Start, Wait, Test, Sync, Attach,
      Detach, Shared_query: no cost (the Post/Start handshake of general
      active target is not modelled).

    Transfers, Lock, Unlock and Flush first busy the rank's CPU for the
    platform's ``rma_overhead`` (MPI's own work in the call, which a
    window of the rank itself costs as well).
    """

    # the lowering's state and helpers, which this part of it uses
    cols: dict
    B: Builder
    platform: Any
    after: list
    pending: dict
    rma: dict
    rma_tag: int
    grants: dict
    acquire: dict
    release: dict
    messages: Callable[..., tuple]

    def one_sided(self, i: int, r: int, op: str):
        cols, B = self.cols, self.B
        comm, t = int(cols["comm"][i]), int(cols["peer"][i])
        win = (comm, int(cols["tag"][i]))
        ctx = _rma_ctx(comm)
        open_ = self.rma.setdefault(win, [])
        if op in _RMA_CHARGED and self.platform.rma_overhead > 0:
            self.after = [(B.op(CALC, r, self.after, dur=self.platform.rma_overhead, event=i),
                           False)]
        if op in _RMA_PUT or op in _RMA_GET:
            if t < 0 or t == r:
                return                      # PROC_NULL or itself: local
            self.rma_tag += 1
            k = self.rma_tag
            sb, rb = int(cols["sbytes"][i]), int(cols["rbytes"][i])
            x = B.op(SEND, r, self.after, peer=t, size=sb, tag=k, ctx=ctx, event=i)
            y = B.op(RECV, t, [(x, True)], peer=r, size=sb, tag=k, ctx=ctx, event=i)
            if op in _RMA_PUT:
                open_.append((t, y, True))
                done = x                    # a request: complete once sent
            else:
                B.op(SEND, t, [(y, False)], peer=r, size=rb, tag=k, ctx=ctx, event=i,
                     reply=True)
                w = B.op(RECV, r, [(x, True)], peer=t, size=rb, tag=k, ctx=ctx, event=i)
                open_.append((t, w, False))
                done = w                    # a request: complete once the data is in
            self.after = [(x, True)]
            if op.startswith("win_r"):     # Rput, Rget, ...: its wait completes it
                self.pending[int(cols["req"][i])] = [(done, False)]
        elif op in _RMA_COMPLETE_ONE or op in _RMA_COMPLETE_ALL:
            closing = [e for e in open_ if op in _RMA_COMPLETE_ALL or e[0] == t]
            self.rma[win] = [e for e in open_ if e not in closing]
            need = [(o, False) for _, o, _ in closing]
            for target in sorted({e[0] for e in closing if e[2]}):
                # the target acknowledges once its puts landed
                self.rma_tag += 1
                puts = [(o, False) for tt, o, put in closing if put and tt == target]
                B.op(SEND, target, puts, peer=r, size=0, tag=self.rma_tag, ctx=ctx, event=i,
                     reply=True)
                need.append((B.op(RECV, r, self.after, peer=target, size=0, tag=self.rma_tag,
                                  ctx=ctx, event=i), False))
            self.after = self.after + need
            if i in self.release:
                self._hand_over(i, r, t, ctx)
        elif op == "win_lock" and i in self.acquire:
            self._acquire(i, r, t, ctx)
        if op in _RMA_COLLECTIVE:
            self.after = self.after + [(o, False) for _, o, _ in self.rma.pop(win, [])]
            self.barrier(i, r, comm)

    def _acquire(self, i: int, r: int, t: int, ctx: int):
        """Rank r's exclusive Lock of target t (event i)."""
        prev, tag = self.acquire[i]
        B = self.B
        if r == t:                          # its own window: the release alone
            if prev >= 0 and prev != r:
                x = B.op(RECV, r, self.after, peer=prev, size=0, tag=tag, ctx=ctx, event=i)
                self.after = [(x, False)]
            return
        x = B.op(SEND, r, self.after, peer=t, size=0, tag=tag, ctx=ctx, event=i)
        grant = B.op(RECV, r, self.after, peer=t, size=0, tag=tag, ctx=ctx, event=i)
        # the target's MPI receives the request when its CPU is free
        request = B.op(RECV, t, [(x, True)], peer=r, size=0, tag=tag, ctx=ctx, event=i)
        if prev < 0 or prev == r:           # nobody else held it: granted when served
            self._grant(i, t, r, tag, ctx, [], request)
        else:
            self._meet(i, t, r, tag, ctx, request=request)
        self.after = [(grant, False)]

    def _hand_over(self, i: int, r: int, t: int, ctx: int):
        """Rank r's Unlock of target t (event i) lets the next holder in,
        once its epoch is done."""
        nxt, tag = self.release[i]
        if nxt == t:                        # the target itself waits for this
            self.B.op(SEND, r, self.after, peer=t, size=0, tag=tag, ctx=ctx, event=i)
            return
        released = self.after
        if r != t:                          # the target learns of it by a message
            x = self.B.op(SEND, r, self.after, peer=t, size=0, tag=tag, ctx=ctx, event=i)
            released = [(self.B.op(RECV, t, [(x, True)], peer=r, size=0, tag=tag, ctx=ctx,
                                   event=i), False)]
        self._meet(i, t, nxt, tag, ctx, released=released)

    def _meet(self, i, t, who, tag, ctx, request=None, released=None):
        """The grant to ``who`` needs both the request (made where its Lock
        is lowered) and the release (where the previous holder's Unlock
        is): whichever comes second sends it."""
        other = self.grants.pop(tag, None)
        if other is None:
            self.grants[tag] = request if request is not None else released
        elif request is None:
            self._grant(i, t, who, tag, ctx, released, other)
        else:
            self._grant(i, t, who, tag, ctx, other, request)

    def _grant(self, i: int, t: int, who: int, tag: int, ctx: int, released: list,
               request: int):
        """Target t grants its lock to ``who`` once it received the
        ``request`` and the previous holder let go (``released``): a reply,
        sent from the call in which the target's MPI got the last of them."""
        self.B.op(SEND, t, released + [(request, False)], peer=who, size=0, tag=tag, ctx=ctx,
                  event=i, reply=True)

    def barrier(self, i: int, r: int, comm: int):
        """A barrier over ``comm`` for event i (the platform's algorithm)."""
        _, last = self.messages(i, r, "barrier", comm, 0, 0, None)
        self.after = [(x, False) for x in last] or self.after


_BLOCKING_RECVS = ops.ops_of("recv", "mrecv")


def _noticed(ev, probe_late_polls: int = 0) -> np.ndarray:
    """Per event, the time a polling loop that ended just before it took
    to notice what it waited for: half its last polling interval
    (``poll_gap``: what it waited for came, on average, in the middle of
    it), and for an Iprobe/Improbe loop ``probe_late_polls`` whole
    intervals more (the platform's: MPICH's first Iprobe after a message
    came only queues it and reports nothing).  Charged after the wait is
    over: on the event after a Test* that completed it, and after the
    receive that follows an Iprobe/Improbe (that receive waits for the
    message itself).  A loop that sleeps 1 ms between polls (mpi4py.futures)
    notices a completed request 0.5 ms late on average, a message it
    probes for 1.5 ms late under MPICH; one that spins notices at once."""
    out = np.zeros(len(ev))
    polls = ev["polls"].to_numpy()
    waited = np.nonzero(polls > 0)[0]
    if not len(waited):
        return out
    gap, op, rank = ev["poll_gap"].to_numpy(float), ev["op"].to_numpy(), ev["rank"].to_numpy()
    n = len(ev)
    for i in waited:
        j = i + 1
        late = 0.5
        if op[i] in ("iprobe", "improbe"):
            late += probe_late_polls
            if j < n and op[j] in _BLOCKING_RECVS:
                j += 1
        if j < n and rank[j] == rank[i]:
            out[j] += gap[i] * late
    return out


def _held_by_polls(cols: dict, reqs: np.ndarray, i: int, req: int, nbytes: int,
                   per_poll: int) -> float:
    """Seconds a rendezvous message of ``nbytes`` sent by event i over an
    intercommunicator is held by its sender: where MPI moves such a
    message ``per_poll`` bytes per call the sender makes (MPICH over an
    intercommunicator: about 8 KiB) and the sender waits for the request
    in a polling loop (a Test that completed it after empty polls), the
    transfer takes ceil(nbytes / per_poll) of that loop's intervals
    (``poll_gap``): a worker of mpi4py.futures that sleeps 1 ms between
    Tests holds its 16 KB result 2 ms.  0 where it waits in a blocking
    call (MPI progresses it throughout) or no completion is found.
    ``cols``: the trace's rank, op, polls and poll_gap columns; ``reqs``
    its reqs column."""
    rank, op, polls, gap = cols["rank"], cols["op"], cols["polls"], cols["poll_gap"]
    for j in range(i + 1, min(len(rank), i + 1000)):
        if rank[j] != rank[i]:
            break
        ids = reqs[j]
        if ids is None or req not in set(int(q) for q in ids):
            continue
        if not op[j].startswith("test") or polls[j] == 0:
            return 0.0
        return math.ceil(nbytes / per_poll) * float(gap[j])
    return 0.0


class _Lowering(_OneSided):
    """The state of lowering one trace: the schedule being built and, for
    the rank being lowered, what its next operation depends on (``after``),
    what its pending requests will complete (``pending``) and its open
    one-sided transfers per window (``rma``)."""

    def __init__(self, trace, platform, comp: np.ndarray, inside: np.ndarray | None = None):
        ev = trace.events
        self.platform = platform
        # a collective over an intercommunicator involves both of its
        # groups: simulated over their union, the same on both sides
        # (mpi4py.futures broadcasts and reduces over one)
        self.members = {}
        self.intercomms = set()
        self.held: dict[int, float] = {}    # SEND op -> seconds (:func:`_held_by_polls`)
        for c, m, remote in zip(trace.comms["comm"], trace.comms["members"],
                                trace.comms["remote"]):
            if remote is not None and len(remote):
                self.intercomms.add(int(c))
            both = sorted(set(m) | set(remote)) if remote is not None and len(remote) else m
            self.members[int(c)] = np.asarray(both, dtype=np.int64)
        self.index_of = {c: {int(w): i for i, w in enumerate(m)}
                         for c, m in self.members.items()}
        self.core = platform.core_of(trace.size)
        self.levels = platform.level_arrays()  # (span, latency, byte time) per level
        self._widest_cache: dict = {}          # (comm, message bytes) -> (L, G, level)
        self.neigh = {}
        topo = getattr(trace, "topology", None)
        if topo is not None and len(topo):
            for row in topo.itertuples():
                d = row.destinations
                self.neigh[(int(row.comm), int(row.rank))] = \
                    int((np.asarray(d) >= 0).sum()) if d is not None else 0
        self.B = Builder(trace.size)
        self.coll_ids: dict = {}            # (comm, k) -> coll id (analytic)
        self.ncoll: dict = {}               # (rank, comm) -> collectives so far
        self.warm: dict = {}                # (rank, comm) -> bytes per peer so far
        self.opened: set = set()            # (rank, members) whose connections are open
        self._keys: dict = {}               # comm -> its members' key (_members_key)
        self.cols = {k: ev[k].to_numpy() for k in ("rank", "seq", "op", "comm", "peer", "tag",
                                                   "sbytes", "rbytes", "req", "rpeer", "rtag",
                                                   "flags", "polls", "poll_gap")}
        self.reqs = ev["reqs"].to_numpy()
        self.started = ev["started"].to_numpy() if "started" in ev else None
        self.scounts = ev["scounts"].to_numpy() if "scounts" in ev else None
        self.comp = self._charged(comp) + _noticed(ev, platform.probe_late_polls)
        # the application's part of each span, and the ops that carry it
        self.app = comp * platform.compute_scale
        self.work_ops: list = []            # [(op, seconds of application work)]
        # a call's own work between its messages (replay/objects.py), at
        # the target's speed
        self.inside = (np.zeros(len(ev)) if inside is None
                       else np.asarray(inside, float) * platform.compute_scale)
        self.after: list = []
        self.pending: dict = {}             # request id -> [(op, started?)] to complete
        self.rma: dict = {}                 # (comm, window) -> [(target, op, put?)] open
        self.rma_tag = 0                    # one tag per one-sided message exchange
        self.acquire, self.release = _lock_handoffs(ev)
        self.grants: dict = {}              # tag -> the request or the release, first made

    def _charged(self, comp: np.ndarray) -> np.ndarray:
        """Computation per event, with what the platform charges the CPU per call."""
        p, cols = self.platform, self.cols
        comp = comp * p.compute_scale
        if p.pack_byte_time:
            # packing and unpacking non-contiguous datatypes costs the rank
            # CPU time at the target's memory speed, before and after the
            # transfer (charged before: the total per rank is what matters)
            packed = (cols["flags"] & FLAG_NONCONTIG) != 0
            comp = comp + packed * p.pack_byte_time * (cols["sbytes"] + cols["rbytes"])
        if p.call_overhead:
            # the binding's own CPU cost, once per call the application made
            comp = comp + p.call_overhead * (cols["op"] != "init")
        return comp

    def issued(self, first: list, last: list, nonblocking: bool, req: int) -> None:
        """The rank's next operations depend on what this call made: on its
        first ops having started (nonblocking: its request completes the
        last ones), or on its last ones having finished (blocking)."""
        if nonblocking:
            self.pending[req] = [(x, False) for x in last]
            self.after = [(x, True) for x in first] or self.after
        elif last:
            self.after = [(x, False) for x in last]

    def point_to_point(self, i: int, r: int, op: str, kind: int, peer: int, nbytes: int):
        if peer < 0:
            return                          # MPI.PROC_NULL: nothing happens
        comm, req = int(self.cols["comm"][i]), int(self.cols["req"][i])
        x = self.B.op(kind, r, self.after, peer=peer, size=nbytes,
                      tag=int(self.cols["tag"][i]), ctx=2 * comm, event=i, sync=op in _SYNC)
        per_poll = self.platform.intercomm_poll_bytes
        if (kind == SEND and per_poll and comm in self.intercomms and op.startswith("i")
                and nbytes > self.platform.eager_limit):
            held = _held_by_polls(self.cols, self.reqs, i, req, nbytes, per_poll)
            if held:
                self.held[x] = held
        self.issued([x], [x], op.startswith("i"), req)

    def sendrecv(self, i: int, r: int, op: str):
        cols, ctx, made = self.cols, 2 * int(self.cols["comm"][i]), []
        if cols["peer"][i] >= 0:
            made.append(self.B.op(SEND, r, self.after, peer=int(cols["peer"][i]),
                                  size=int(cols["sbytes"][i]), tag=int(cols["tag"][i]),
                                  ctx=ctx, event=i))
        if cols["rpeer"][i] >= 0:
            made.append(self.B.op(RECV, r, self.after, peer=int(cols["rpeer"][i]),
                                  size=int(cols["rbytes"][i]), tag=int(cols["rtag"][i]),
                                  ctx=ctx, event=i))
        self.issued(made, made, op.startswith("i"), int(cols["req"][i]))

    def completion(self, i: int):
        req = int(self.cols["req"][i])
        ids = self.reqs[i]
        ids = list(ids) if ids is not None and len(ids) else ([req] if req >= 0 else [])
        for q in ids:
            self.after = self.after + self.pending.pop(int(q), [])

    def _members_key(self, comm: int) -> bytes:
        """What identifies a communicator's members (world ranks, in order):
        communicators with the same members use the same connections."""
        key = self._keys.get(comm)
        if key is None:
            key = self._keys[comm] = np.asarray(self.members[comm], np.int64).tobytes()
        return key

    def _widest(self, comm: int, nbytes: float):
        """(L, G, level) of the outermost level a communicator's members span, G
        per byte of one message of ``nbytes`` there as a point-to-point
        message is charged (the level's measured curve, or its eager or
        rendezvous byte time): over TCP a calibrated level's eager line,
        fitted to small messages, is no rate for a 1 MB alltoall block."""
        key = (comm, nbytes)
        if key not in self._widest_cache:
            self._widest_cache[key] = self._level_cost(comm, nbytes)
        return self._widest_cache[key]

    def _level_cost(self, comm: int, nbytes: float):
        span, lat, bt = self.levels
        m = self.core[self.members[comm]]
        lv = len(span) - 1
        for i in range(len(span) - 1):
            if (m // span[i]).min() == (m // span[i]).max():
                lv = i
                break
        if nbytes <= 1:
            return lat[lv], bt[lv], lv
        # two of the members whose cores that level joins (one call for
        # all members: a world communicator has every rank)
        joined = m[1:][self.platform.level_of(np.full(len(m) - 1, m[0]), m[1:]) == lv]
        b = joined[0] if len(joined) else m[-1]
        wire = self.platform.wire(m[:1], np.array([b]), np.array([float(nbytes)]))[0]
        return lat[lv], wire / (nbytes - 1), lv

    def collective(self, i: int, r: int, op: str):
        cols, plat = self.cols, self.platform
        fam = C.FAMILY[_base(op)]
        comm = int(cols["comm"][i])
        m = self.members.get(comm)
        if m is None:
            raise ScheduleError(f"rank {r} event {int(cols['seq'][i])} ({op}): communicator "
                                f"{comm} is not in "
                                f"comms.parquet")
        p = len(m)
        sb, rb = int(cols["sbytes"][i]), int(cols["rbytes"][i])
        if sb + rb == 0 and fam not in ("barrier", "neighbor") and _fixed_counts(op):
            return                          # no data anywhere: returns at once
        me = self.index_of[comm][r]
        per_peer = None
        if self.scounts is not None and self.scounts[i] is not None \
                and len(self.scounts[i]) == p:
            per_peer = [int(v) for v in self.scounts[i]]
        nb = {"bcast": max(sb, rb), "scatter": rb, "alltoall": sb / max(p, 1),
              "neighbor": max(sb, rb)}.get(fam, sb)
        if fam != "neighbor":
            own = per_peer[me] if fam == "alltoall" and per_peer is not None else nb
            work = _local_work(fam, own, int(cols["flags"][i]), plat)
            if work > 0:
                self.after = [(self.B.op(CALC, r, self.after, dur=work, event=i), False)]
        root = self.index_of[comm].get(int(cols["peer"][i]), 0) if cols["peer"][i] >= 0 \
            else 0
        if cols["flags"][i] & FLAG_OBJECT:
            nb += C.OBJECT_COUNT_BYTES          # the pickle's size travels with it
            if fam in C.OF_OBJECTS:
                # mpi4py's own algorithm: its collectives one after the
                # other, the rank's own work between them (unpickling and
                # reducing before the result's broadcast)
                for k, part in enumerate(C.OF_OBJECTS[fam]):
                    if k and self.inside[i] > 0:
                        x = self.B.op(CALC, r, self.after, dur=float(self.inside[i]), event=i)
                        self.work_ops.append((x, float(self.inside[i])))
                        self.after = [(x, False)]
                    first, last = self.messages(i, r, part, comm, nb, 0, None)
                    self.issued(first, last, False, -1)
                return
        # an Alltoallv/w (mpi4py's object alltoall is one, after its counts)
        # may run another algorithm than an Alltoall of the same bytes
        vector = _base(op)[-1:] in ("v", "w") or bool(cols["flags"][i] & FLAG_OBJECT)
        first, last = self.messages(i, r, fam, comm, nb, root, per_peer, vector)
        self.issued(first, last, op.startswith("i") or op.endswith("_init"),
                    int(cols["req"][i]))

    def messages(self, i, r, fam, comm, nb, root, per_peer, vector=False):
        """Rank r's part in the next collective of family ``fam`` over
        ``comm`` (event i, ``nb`` bytes as the family counts them;
        ``vector``: a v/w form): one analytic op, or its algorithm's
        messages.  Returns (first ops, last)."""
        plat, m = self.platform, self.members[comm]
        p = len(m)
        k = self.ncoll.get((r, comm), 0)
        self.ncoll[(r, comm)] = k + 1
        ctx = 2 * comm + 1
        alg = C.resolve(C.choose(fam, plat.algorithm(fam)), p, nb, vector)
        if alg == "analytic" or fam == "neighbor":
            cid = self.coll_ids.get((comm, k))
            if cid is None:
                cid = self.coll_ids[(comm, k)] = self.B.new_coll(p)
            if fam == "allreduce" and nb <= plat.allreduce_short_limit:
                fam = "allreduce_short"             # recursive doubling, whole blocks
            message = {"allreduce": nb / p, "reduce_scatter": nb / p}.get(fam, nb)
            L, G, lv = self._widest(comm, message)
            neighbours = self.neigh.get((comm, r), 2)
            cost = C.analytic_cost(fam, p, nb, L, G, plat.o_send + plat.o_recv, neighbours)
            if plat.levels[lv].warmup and message > 0:
                # every block goes over a connection of its own, each
                # warmed by as many bytes as this rank's earlier blocks, and
                # opened by the first collective over these members (a
                # duplicate of a communicator shares its connections)
                before = self.warm.get((r, comm), 0.0)
                self.warm[(r, comm)] = before + message
                group = (r, self._members_key(comm))
                first = group not in self.opened
                self.opened.add(group)
                cost += C.blocks(fam, p, neighbours) * float(plat.warmup_extra(
                    np.array([lv]), np.array([before]), np.array([message]),
                    np.array([first]))[0])
            x = self.B.op(COLL, r, self.after, coll=cid, dur=cost, ctx=ctx, event=i)
            return [x], [x]
        return self._steps(i, r, fam, alg, m, self.index_of[comm][r], root, nb, per_peer, k,
                           ctx)

    def _steps(self, i, r, fam, alg, m, me, root, nb, per_peer, k, ctx):
        """The messages of one member of a decomposed collective, step after
        step; returns (the first step's ops, the last step's)."""
        prev, first, last = self.after, [], []
        for sends, recvs in C.steps(fam, alg, me, len(m), root, nb, per_peer):
            step = [self.B.op(SEND, r, prev, peer=int(m[j]), size=int(b), tag=k, ctx=ctx,
                              event=i) for j, b in sends]
            step += [self.B.op(RECV, r, prev, peer=int(m[j]), size=int(b), tag=k, ctx=ctx,
                               event=i) for j, b in recvs]
            first = first or step
            prev, last = [(s_, False) for s_ in step], step
        return first, last


def from_trace(trace, platform, compute: np.ndarray | None = None,
               progress=None, inside: np.ndarray | None = None) -> Schedule:
    """Lower a trace (instrument.Trace) to a schedule for ``platform``.

    ``compute`` replaces the per-event computation seconds (same order as
    ``trace.events``); ``inside``, per event, the call's own work between
    its messages (replay.expand's column: run between an object allreduce's
    reduce and its broadcast); ``platform.compute_scale`` multiplies both.  Each
    traced op lowers by its kind (mpimodel/ops.py): sends and receives to
    messages, completions to dependencies on what their requests made,
    collectives to an analytic cost or their algorithm's messages; the
    rest (probes, communicator management, finalize) costs nothing."""
    ev = trace.events
    low = _Lowering(trace, platform, ev["cpu"].to_numpy() if compute is None
                    else np.asarray(compute, float), inside)
    cols, comp, B = low.cols, low.comp, low.B
    last_rank = -1
    for i in range(len(ev)):
        r = int(cols["rank"][i])
        if r != last_rank:
            if progress and r % 1000 == 0:
                progress(r)
            last_rank, low.after, low.pending, low.rma = r, [], {}, {}
        op = cols["op"][i]
        if op == "init":
            continue
        if comp[i] > 0:
            x = B.op(CALC, r, low.after, dur=float(comp[i]), event=i)
            low.work_ops.append((x, float(low.app[i])))
            low.after = [(x, False)]
        if op == "start" and low.started is not None:
            op = low.started[i]
        if op in _P2P_SEND:
            low.point_to_point(i, r, op, SEND, int(cols["peer"][i]), int(cols["sbytes"][i]))
        elif op in _P2P_RECV:
            low.point_to_point(i, r, op, RECV, int(cols["peer"][i]), int(cols["rbytes"][i]))
        elif op in _SENDRECV:
            low.sendrecv(i, r, op)
        elif op in _COMPLETIONS:
            low.completion(i)
        elif _base(op) in C.FAMILY:
            low.collective(i, r, op)
        elif op.startswith("win_"):
            low.one_sided(i, r, op)
    s = B.done()
    if low.held:
        s.held = np.zeros(len(s))
        s.held[list(low.held)] = list(low.held.values())
    s.seq_of = ev["seq"].to_numpy()
    s.work = np.zeros(len(s))
    if low.work_ops:
        at, secs = zip(*low.work_ops)
        s.work[list(at)] = secs
    return s
