"""Impersonating MPI for one rank, answered from its message log (docs/METHODS.md: replay).

The classes here subclass mpi4py's (so ``isinstance`` checks and class
calls such as ``MPI.Request.Waitall`` behave) but never communicate: a
send goes nowhere, a receive copies the logged bytes into the
application's buffer, a collective returns the logged result, a
communicator reports the logged size, rank and topology.  Every call is
checked against the log first (op, peer, tag, size of what it passed, the
communicator it was called on); a mismatch stops the replay with
:class:`Divergence`.

Timers at the entry and exit of every call measure the computation between
consecutive calls on this node (reading the log happens inside the call,
so it is not counted).

A receive into memory the application never touched costs page faults:
the kernel maps and zeroes each page at its first write, inside MPI's copy
(shared memory) or the kernel's (TCP), 1-1.3 us per 4 KiB page here.
fft2d's Alltoall received every call into a fresh 2 MiB buffer, 511
faults: 0.82 ms per call on shared memory against 0.13 ms into a warm
buffer, +0.55 ms over a 10 Gbit/s link; the network model, calibrated
with warm buffers, has none of it.  The replay writes the logged bytes
into the same buffers, so it meets the same faults: it takes them apart
(touching the buffer's pages before the copy, timed, where the page-fault
count says some were new) and charges their time to the span after the
call, as work of this node, not of the network.

The page faults of every span are counted too (as the tracer counts
them), for replay.expand to charge those the traced run took and the
replay did not: memory that the real MPI's allocations made malloc give
back to the kernel.

A collective of Python objects is mpi4py's own algorithm, with pickling
and reducing in Python at every step: that too is computation of this
node, and replay/objects.py redoes it and charges it to the spans around
the call.
"""
from __future__ import annotations

import inspect
import os
import resource
import sys
import threading
import time
from typing import Any

from mpi4py import MPI

from contracts.msglog import LogError, LogReader
from mpimodel.calls import Meta, mixin_hierarchy, peer_tag
from mpimodel.kinds import (
    KIND_CLASS,
    POLLS,
    Call,
    MatchedIrecv,
    MatchedRecv,
    Wait,
    WaitMany,
    empty_answer,
    requests_key,
)
from mpimodel.ops import COMM_METHODS, COMM_PARENTS, KINDS, REFUSED_KINDS, WRAPPED_LEVELS, methods

from . import lockstep, objects
from .errors import Divergence, ReplayCut
from .lockstep import WAITING_KINDS, WAITING_OPS

REAL: dict = {}
_CLS: dict = {}


def _said(op, peer, tag, nbytes, comm) -> str:
    """A call as the divergence message shows it."""
    where = {0: "COMM_WORLD", -1: "?"}.get(comm, f"the communicator of log record {comm}")
    return f"{op}(peer={peer}, tag={tag}, {nbytes} bytes, on {where})"


_CAUSE = ("Likely cause: the run is not deterministic in a way the log does not capture "
          "(timing, random numbers, wall-clock decisions), or the application got different "
          "arguments, input files or environment than when recorded.")


# How often, and with how many canned calls, the replay measures its own
# cost along the run: this machine's speed changes by 2x within a second,
# and one measurement after the application (taken in a slow moment, it
# was subtracted from spans of a fast one) left 0.05 us of a 0.3 us loop.
# 100 calls cost ~0.2 ms: 1 % of the replay's wall time, none of its spans.
PROBE_EVERY = float(os.environ.get("REPREPLAY_PROBE_SECONDS", "0.02"))
PROBE_CALLS = 100
# The probe repeats the application's last call where that is a buffer
# call of at most REPEAT_BYTES (see overhead()), REPEAT_CALLS times: a
# blocking one, or a nonblocking one's start (its replay hands back a
# stand-in request and writes nothing, so a repeat is invisible)
REPEATABLE = ("send", "recv", "sendrecv", "coll", "isend", "irecv", "isendrecv", "icoll")
REPEAT_BYTES, REPEAT_CALLS = 65536, 30
HAND_OVER = 1e-6        # the sleep asked for in Replayer.hand_over()


def minor_faults() -> int:
    """The process's minor page faults so far (the tracer's count)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def sleep_cost(samples: int = 21) -> float:
    """Wall seconds a ``time.sleep(HAND_OVER)`` takes here when no other
    thread wants the GIL: the median of a few (the timer slack, 50 us by
    default, dominates it)."""
    took = []
    for _ in range(samples):
        t0 = time.perf_counter()
        time.sleep(HAND_OVER)
        took.append(time.perf_counter() - t0)
    return sorted(took)[samples // 2]


class Replayer:
    """Log cursor, divergence check and the per-call timers of one rank."""

    def __init__(self, log: LogReader | None, rank: int, probe_every: float | None = PROBE_EVERY):
        self.log = log
        self.rank = rank
        self.seq = 0
        self.rows: list = []       # (seq, op, comp, cpu, polls, poll_cpu)
        # empty polls answered since the last call, folded into the next
        # call's row as the tracer folds them (instrument/_hotpath.c)
        self.polls = 0
        self._poll_span = (0.0, 0.0)
        self._poll_cpu0 = 0.0
        # (seq, wall s, cpu s): the replay's own cost per call, measured
        # every ``probe_every`` seconds along the run (see overhead())
        self.probes: list = []
        self._probe_every = probe_every
        self._next_probe = time.perf_counter()
        self.last_exit = time.perf_counter()
        self.last_cpu = time.process_time()
        self.last_event = self.last_exit   # the end of the last call that was no empty poll
        # after finalize (the application's exit handlers): calls the
        # recorder let through unlogged; answered with nothing, counted
        self.finished = False
        self.late = 0
        # a partial replay's plan (the log header's "partial": its loop and
        # cut, replay/loops.py), and whether the replay stopped there
        self.cut = log.header.get("partial") if log is not None else None
        self.stopped = False
        # CPU seconds of the last call's own work that the next enter() adds
        # to the span after that call: page faults in its copies into the
        # application's buffers (see _copy_in), mpi4py's work in a collective
        # of objects (see charge())
        self.carried = 0.0
        self.fault_seconds = 0.0          # in all, for the replay's summary
        self.object_seconds = 0.0         # likewise
        # seq -> seconds of a call's own work between its messages (see
        # charge()): written beside the call's row
        self.inside: dict = {}
        # seq -> minor page faults in the span before the call, as the
        # tracer counts them (from the last call's exit, folded polls
        # included): written beside the call's row, for replay.expand to
        # charge the faults the traced run took and this replay did not
        self.faults: dict = {}
        self._flt_event = self._flt_entry = minor_faults()
        # where the shim answers calls below Python too (BELOW): per row,
        # the clocks at its entry and exit (wall, CPU), to interleave the
        # two streams afterwards (interleave())
        self.clocks: list | None = None
        self._entry = (0.0, 0.0)
        self._poll_entry = (0.0, 0.0)
        # threads alive when last counted, and how many of them are the
        # application's besides the caller (see hand_over())
        self._threads = 1
        self._others = 0
        self.threaded = False      # a call came from a thread besides the main one
        self._sleep_cost = 0.0     # measured by install(), before the application's threads
        # (method, self, args, kwargs) of the last call, where overhead()
        # may repeat it; else None
        self.last_call = None
        # the current call ends at the copies' barrier (in_step())
        self.step_due = False

    # The clocks are read so that their own cost (process_time is a system
    # call) falls inside the call, not into the computation spans.
    def enter(self):
        t = time.perf_counter()
        c = time.process_time()
        self._span = (t - self.last_exit + self.carried, c - self.last_cpu + self.carried)
        self._flt_entry = minor_faults()
        self.carried = 0.0
        self._entry_cpu = c
        self._entry = (t, c)

    def leave(self, op, empty=False):
        """End a call; ``empty``: a poll (Iprobe, Test...) that found or
        completed nothing, folded into the next call (see :meth:`polled`)."""
        if empty:
            if self.polls == 0:
                self._poll_span, self._poll_cpu0 = self._span, self._entry_cpu
                self._poll_entry = self._entry
            self.polls += 1
            self.last_cpu = time.process_time()
            self.last_exit = time.perf_counter()
            self.hand_over()
            return
        entry = self._add_row(op)
        if self.clocks is not None:
            self.clocks.append((*entry, time.perf_counter(), time.process_time()))
        self.last_event = time.perf_counter()
        # inside the call, so that the probe's time is no computation span;
        # never after the application's own MPI.Finalize (the probe calls
        # MPI: a type's size)
        if self._probe_every is not None and time.perf_counter() >= self._next_probe \
                and not MPI.Is_finalized():
            self.probes.append((self.seq, *overhead(PROBE_CALLS, self.last_call)))
            self._next_probe = time.perf_counter() + self._probe_every
        if self.step_due:
            # last, so that every copy starts its next span at the same
            # moment, whatever it did inside the call (a probe above)
            self.step_due = False
            STEP.wait()
        self._flt_event = minor_faults()
        self.last_cpu = time.process_time()
        self.last_exit = time.perf_counter()
        self.hand_over()

    def _add_row(self, op) -> tuple:
        """The current call's row, with the empty polls folded into it;
        returns the clocks at its entry (the first folded poll's, if any)."""
        if self.polls:
            span, poll_cpu = self._poll_span, max(self._entry_cpu - self._poll_cpu0, 0.0)
            self.rows.append((self.seq, op, span[0], span[1], self.polls, poll_cpu))
            self.polls = 0
            entry = self._poll_entry
        else:
            self.rows.append((self.seq, op, self._span[0], self._span[1], 0, 0.0))
            entry = self._entry
        self.faults[self.seq] = max(self._flt_entry - self._flt_event, 0)
        self.seq += 1
        return entry

    def hand_over(self):
        """Give the GIL up for a moment where the application runs other
        threads, as mpi4py does around every MPI call.  A thread that
        wants it takes it then, and the caller waits until it lets go (up
        to the switch interval, 5 ms, for one that computes): mpipool's
        job threads lost 5-15 ms a job to its main thread's busy loop, a
        wait that a replay keeping the GIL never met.  The moment is a
        short sleep (the kernel's timer slack makes it about 50-60 us,
        enough for a waiting thread to wake up; a bare sched_yield was
        not); only what it took beyond its own cost alone is charged, to
        the span before the next call: waiting for the GIL is this
        rank's time, not the network's."""
        n = threading.active_count()
        if n != self._threads:
            self._threads = n
            own = sum(1 for t in threading.enumerate() if t.name.startswith("repreplay-"))
            self._others = n - 1 - own
        if self._others <= 0:
            return
        t0 = time.perf_counter()
        time.sleep(HAND_OVER)
        self.last_exit += min(time.perf_counter() - t0, self._sleep_cost)

    def charge(self, before: float, after: float, inside: float = 0.0):
        """Seconds of the current call's own computation: ``before`` its
        first message, added to the span that ends at the call; ``after``,
        to the span after it; ``inside``, between its messages (the call's
        row keeps it apart: the simulator runs it within the call)."""
        self._span = (self._span[0] + before, self._span[1] + before)
        self.carried += after
        self.inside[self.seq] = self.inside.get(self.seq, 0.0) + inside
        self.object_seconds += before + inside + after

    def next(self, op, call=None):
        """The next record, which must be ``op``, and for a communicator
        call ``call`` (a kinds.Call) made with the same peer, tag, sizes
        and communicator as recorded.  Returns (result, payloads)."""
        self.last_call = None       # the caller sets it again where it may be repeated
        if threading.current_thread() is not threading.main_thread():
            self.threaded = True
        if self.cut is not None:
            rec = self.log.peek()
            if rec is not None and rec[0] == "end":
                self.stop_at_cut(op)
        rop, rpeer, rtag, rbytes, rcomm, result, payloads = self.log.next()
        if rop != op:
            self.diverged(f"the log recorded {rop} but the application called {op}",
                          _CAUSE)
        if call is not None:
            same_comm = rcomm < 0 or call.comm < 0 or rcomm == call.comm
            if (rpeer, rtag, rbytes) != (call.peer, call.tag, call.nbytes) or not same_comm:
                cause = _CAUSE
                if (rpeer, rtag) == (call.peer, call.tag) and same_comm:
                    cause = ("Likely cause: the application was given other arguments or input "
                             "than when recorded (message sizes follow from them); recorded "
                             f"command line: {' '.join(self.log.header.get('argv') or [])}")
                self.diverged(f"the log recorded {_said(rop, rpeer, rtag, rbytes, rcomm)} but "
                              f"the application called {_said(op, *call.signature()[1:])}",
                              cause)
        return result, payloads

    def stop_at_cut(self, op) -> None:
        """The cut log ends here: keep this call's span (the computation
        before it was measured in full) and stop the application."""
        self._add_row(op)
        self.finished = self.stopped = True     # calls from exit handlers: answered with nothing
        raise ReplayCut(f"rank {self.rank}: partial replay stopped at event {self.seq - 1}")

    def polled(self, op, call=None, key=-1) -> bool:
        """Whether the log answers this poll: its next record is the same
        poll (op, and the communicator call's peer, tag, sizes and
        communicator, or the requests' ``key``: kinds.requests_key), the
        one that found or completed something in the recorded run.  If
        not, the recorded run found nothing here (such polls are not
        logged) and the poll is answered empty without reading the log."""
        rec = self.log.peek()
        if rec is None or rec[0] != op:
            return False
        if call is None:
            return rec[2] == key
        rpeer, rtag, rbytes, rcomm = rec[1:5]
        same_comm = rcomm < 0 or call.comm < 0 or rcomm == call.comm
        return (rpeer, rtag, rbytes) == (call.peer, call.tag, call.nbytes) and same_comm

    def answer(self, replay, *args):
        """``replay(*args)``: a kind's answer from the record just read.  A
        record whose content does not fit (a damaged or crafted log that
        passed its checksum) stops the replay as a damaged log, not as the
        application's failure."""
        try:
            return replay(*args)
        except (Divergence, LogError):
            raise
        except Exception as e:
            raise LogError(f"{self.log.path}: record {self.log.index - 1} does not fit the "
                           f"call the application made at event {self.seq} "
                           f"({type(e).__name__}: {e}): the log is damaged") from None

    def diverged(self, what: str, cause: str = ""):
        """Stop the replay: ``what`` happened at this rank's current event."""
        if self.threaded and cause == _CAUSE:
            # a log is one sequence per rank: the order in which threads
            # calling MPI at once happened to return when recorded
            cause = ("Likely cause: this rank calls MPI from more than one thread (the "
                     "application runs other threads), and the order in which their calls "
                     "came back when recorded is not the order they make them in this "
                     "replay; a rank whose threads call MPI at once (a task pool's result "
                     "threads) cannot be replayed alone.  Or "
                     + _CAUSE.removeprefix("Likely cause: "))
        err = Divergence(f"rank {self.rank}: event {self.seq} (the trace's seq; log record "
                         f"{self.log.index - 1}): {what}." + (f"  {cause}" if cause else ""))
        if threading.current_thread() is not threading.main_thread():
            # raised here it would end this thread only, and the main
            # thread would wait for it until the watchdog's limit
            print(f"replay: error: {err}", file=sys.stderr, flush=True)
            os._exit(2)
        raise err


RP: Replayer | None = None


# below this many bytes a copy touches a few pages at most: not worth the
# two getrusage calls (about 1 us) that tell whether any was new
FAULT_CHECK_BYTES = 16384
PAGE = resource.getpagesize()
# one zero per page written; made here, in the set-up's own arena, so that
# the check allocates nothing on the application's heap
_ZEROS = memoryview(bytes(1 << 16))


def _copy_in(view, payload, what):
    if view is None:
        return
    n = len(payload)
    if n > view.nbytes:
        RP.diverged(f"{what}: the log holds {n} bytes but the receive buffer has only "
                    f"{view.nbytes}", _CAUSE)
    if n >= FAULT_CHECK_BYTES:
        _first_touch(view, n)
    view[:n] = payload


def _first_touch(view, n: int) -> None:
    """Write one byte of every page of ``view[:n]`` (the copy overwrites
    them next) and, if that faulted pages in, add its time to RP.carried:
    the faults the real MPI's copy paid, timed apart from the log's own
    pages, which the copy's source faults in too.  ``view``: a byte view
    (mpimodel.calls.bytes_view, or a window's bytearray)."""
    f0 = minor_faults()
    # CPU seconds, not wall: the faults are the process's own work, and on
    # a virtual core (replay.run.on_core_share) its wall time also holds
    # wherever the quota paused it, up to a period, which the division by
    # the share then multiplied into a span: a per-span noise of 20-50 %
    # in the copies of an application receiving into fresh arrays
    t0 = time.process_time()
    step = len(_ZEROS) * PAGE
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        view[lo:hi:PAGE] = _ZEROS[:len(range(lo, hi, PAGE))]
    view[n - 1] = 0
    t1 = time.process_time()
    if minor_faults() > f0:
        RP.carried += t1 - t0
        RP.fault_seconds += t1 - t0


_REAL_SELF = MPI.COMM_SELF
_NULL_HANDLE = MPI.COMM_NULL.handle
# the shim answering this rank's calls below Python (pmpishim/control.py
# AnsweredBelowPython), or None when it made none
BELOW: Any = None
# this copy's barrier with the representative's other copies
# (replay/lockstep.py), or None
STEP: Any = None


def _new_comm(desc):
    if desc is None:
        return MPI.COMM_NULL
    name = desc["cls"] or "Intracomm"
    cls = _CLS[name]
    # an intracommunicator gets a real handle of its own (a copy of
    # COMM_SELF; a one-rank Cartesian one for a Cartesian communicator):
    # attribute caching works on it, which libraries use (mpi4py.util.pkl5
    # keeps its locks there), and compiled code handed it (Devito) calls MPI
    # on it, which the shim answers from the log (BELOW); communication
    # never reaches it
    if name in ("Intracomm", "Comm"):
        c = cls(REAL["Comm"].Dup(_REAL_SELF))
    elif name == "Cartcomm" and BELOW is not None:
        c = cls(REAL["Intracomm"].Create_cart(_REAL_SELF, [1] * len(desc["dims"])))
    else:
        c = cls()
    c._d = desc
    c._rid = _made_by()
    if BELOW is not None and c.handle != _NULL_HANDLE:
        BELOW.comm_known(c.handle, desc)
    return c


def _made_by() -> int:
    """The log record just read: what a communicator or request it created
    is known by (``_rid``), as the recorder knew the real one."""
    return RP.log.index - 1 if RP is not None and RP.log is not None else -1


def _request(out=None):
    r = _CLS["Request"]()
    r._out = out
    r._rid = _made_by()
    return r


def _answered_empty(op: str, name: str):
    """A poll the log does not answer (Replayer.polled): folded into the
    next call, answered with what MPI returns when nothing is there."""
    RP.leave(op, True)
    return empty_answer(name)


# ---- communicator methods ------------------------------------------------


class _Fake:
    """The replayer's side of mpimodel/kinds.py: the stand-ins it hands
    the application, and the copy of logged bytes into its buffers."""

    @staticmethod
    def request(out=None):
        return _request(out)

    @staticmethod
    def prequest(out=None):
        r = _CLS["Prequest"]()
        r._out = out
        r._rid = _made_by()
        return r

    @staticmethod
    def message():
        return _CLS["Message"]()

    new_comm = staticmethod(_new_comm)
    copy_in = staticmethod(_copy_in)

    @staticmethod
    def object_result(c, payload):
        """The logged result of a collective of objects, after redoing
        mpi4py's own work in it on this core (charged to the spans)."""
        res, before, inside, after = objects.answer(c.name, c.a, payload)
        RP.charge(before, after, inside)
        return res

    @staticmethod
    def completed(r):
        """A replayed request stands for an active one until a completion
        completes it; a persistent one stays usable."""
        if isinstance(r, _CLS["Prequest"]):
            return
        if isinstance(r, _CLS["Request"]):
            r._out = "done"

    @staticmethod
    def diverged(what: str):
        RP.diverged(what, _CAUSE)


def _comm_method(cls_name, name):
    """The replaying stand-in of a communicator method (its kind's replay)."""
    real = REAL[cls_name]
    row = COMM_METHODS[name]
    kind = KIND_CLASS[row.kind]
    sig = inspect.signature(getattr(real, name))
    poll = row.op in POLLS
    repeatable = row.kind in REPEATABLE and not poll
    waits = row.kind in WAITING_KINDS and not poll

    def f(self, *args, **kw):
        if RP.finished:
            RP.late += 1
            return None
        RP.enter()
        if waits:
            in_step()
        ba = sig.bind(self, *args, **kw)
        ba.apply_defaults()
        c = Call(name, row.op, ba.arguments, *peer_tag(row.kind, ba.arguments))
        if poll and not RP.polled(c.op, c):
            return _answered_empty(c.op, name)
        result, payloads = RP.next(c.op, c)
        res, empty = RP.answer(kind.replay, c, result, payloads, _Fake)
        # free the logged data inside the call: freeing a large payload
        # (munmap) after leave() would land in the next computation span
        payloads = result = None
        RP.last_call = (f, self, args, kw) if repeatable and c.nbytes <= REPEAT_BYTES else None
        RP.leave(c.op, empty)
        return res
    f.__name__ = name
    return f


def _methods_for(cls_name: str) -> dict:
    """The replaying methods the mpi4py class ``cls_name`` defines."""
    ns = {}
    for m, row in COMM_METHODS.items():
        if row.level != cls_name:
            continue
        if row.kind in KIND_CLASS:
            ns[m] = _comm_method(cls_name, m)
        elif row.kind == "create_from":
            ns[m] = _from_group(row.op)
        elif row.kind in REFUSED_KINDS:
            ns[m] = _refused(f"{KINDS[row.kind]}: {m}")
    return ns


# ---- queries a communicator answers from its description ---------------------
def _cart_coords(dims, r):
    """Row-major coordinates of rank r in a grid (MPI's Cartesian order)."""
    out = []
    for d in reversed(dims):
        out.append(r % d)
        r //= d
    return out[::-1]


def _cart_rank(dims, coords):
    r = 0
    for c, d in zip(coords, dims):
        r = r * d + c
    return r


class _Queries:
    """Rank, size and topology from the logged description ``_d``."""

    def Get_rank(self):
        return self._d["rank"]

    def Get_size(self):
        return self._d["size"]

    rank = property(Get_rank)
    size = property(Get_size)

    def Get_remote_size(self):
        return self._d["remote_size"]

    remote_size = property(Get_remote_size)

    def Is_inter(self):
        return self._d["cls"] == "Intercomm"

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other

    def __hash__(self):
        return id(self)

    def __bool__(self):
        return True

    def Get_topology(self):
        return {"Cartcomm": MPI.CART, "Graphcomm": MPI.GRAPH,
                "Distgraphcomm": MPI.DIST_GRAPH}.get(self._d["cls"], MPI.UNDEFINED)

    topology = property(Get_topology)

    def Get_group(self):
        if "members" not in self._d:
            raise NotImplementedError("replay: this log has no group of the communicator")
        return Group(self._d["members"], RP.rank)

    group = property(Get_group)

    # Cartesian
    def Get_dim(self):
        return len(self._d["dims"])

    ndim = property(Get_dim)

    def Get_topo(self):
        if self._d["cls"] == "Graphcomm":
            return self._d["index"], self._d["edges"]
        return self._d["dims"], self._d["periods"], self._d["coords"]

    topo = property(Get_topo)
    dims = property(lambda self: self._d["dims"])
    periods = property(lambda self: self._d["periods"])
    coords = property(lambda self: self._d["coords"])

    def Get_coords(self, rank):
        return _cart_coords(self._d["dims"], rank)

    def Get_cart_rank(self, coords):
        dims, per = self._d["dims"], self._d["periods"]
        c = [(x % d) if p else x for x, d, p in zip(coords, dims, per)]
        return _cart_rank(dims, c)

    def Shift(self, direction, disp):
        dims, per, me = self._d["dims"], self._d["periods"], self._d["coords"]

        def at(delta):
            c = list(me)
            c[direction] += delta
            if not 0 <= c[direction] < dims[direction]:
                if not per[direction]:
                    return MPI.PROC_NULL
                c[direction] %= dims[direction]
            return _cart_rank(dims, c)
        return at(-disp), at(disp)

    # graphs
    def Get_neighbors_count(self, rank):
        idx = self._d["index"]
        return idx[rank] - (idx[rank - 1] if rank else 0)

    def Get_neighbors(self, rank):
        idx, e = self._d["index"], self._d["edges"]
        return e[(idx[rank - 1] if rank else 0):idx[rank]]

    def Get_dist_neighbors_count(self):
        return len(self._d["sources"]), len(self._d["destinations"]), False

    def Get_dist_neighbors(self):
        return self._d["sources"], self._d["destinations"], None

    inedges = property(lambda self: self._d["sources"])
    outedges = property(lambda self: self._d["destinations"])
    indegree = property(lambda self: len(self._d["sources"]))
    outdegree = property(lambda self: len(self._d["destinations"]))
    inoutedges = property(lambda self: (self._d["sources"], self._d["destinations"]))


_RealGroup = MPI.Group


class Group(_RealGroup):
    """A process group as world ranks: the local group operations of MPI.

    Groups never communicate, so replay computes them; communicators made
    from them come from the log like every other creation.  It stands in
    for ``MPI.Group`` during replay (a subclass of the real one, so type
    checks pass), as applications call the class's methods unbound:
    ``MPI.Group.Translate_ranks(g1, ranks, g2)``, ``MPI.Group.Union(g1, g2)``."""

    def __new__(cls, members=(), me=-1):
        return _RealGroup.__new__(cls)

    def __init__(self, members, me):
        self.members = [int(x) for x in members]
        self._me = me

    def Get_size(self):
        return len(self.members)

    def Get_rank(self):
        return self.members.index(self._me) if self._me in self.members else MPI.UNDEFINED

    size = property(Get_size)
    rank = property(Get_rank)

    def Incl(self, ranks):
        return Group([self.members[i] for i in ranks], self._me)

    def Excl(self, ranks):
        drop = set(ranks)
        return Group([m for i, m in enumerate(self.members) if i not in drop], self._me)

    def Range_incl(self, ranges):
        return self.Incl([i for a, b, s in ranges for i in range(a, b + (1 if s > 0 else -1), s)])

    def Range_excl(self, ranges):
        return self.Excl([i for a, b, s in ranges for i in range(a, b + (1 if s > 0 else -1), s)])

    def Union(self, other):
        return Group(self.members + [m for m in other.members if m not in self.members],
                     self._me)

    def Intersection(self, other):
        return Group([m for m in self.members if m in other.members], self._me)

    def Difference(self, other):
        return Group([m for m in self.members if m not in other.members], self._me)

    def Translate_ranks(self, ranks=None, group=None):
        ranks = range(len(self.members)) if ranks is None else ranks
        if group is None:
            return [self.members[i] for i in ranks]
        return [group.members.index(self.members[i]) if self.members[i] in group.members
                else MPI.UNDEFINED for i in ranks]

    def Compare(self, other):
        if self.members == other.members:
            return MPI.IDENT
        return MPI.SIMILAR if sorted(self.members) == sorted(other.members) else MPI.UNEQUAL

    def Free(self):
        pass


# ---- requests and matched messages (mpimodel/kinds.py: how they answer) ------
def _single(name):
    """Wait/Test (either case) on one request."""
    op = name.lower()
    poll = op in POLLS
    waits = op in WAITING_OPS

    def f(self, status=None):
        if RP.finished:
            RP.late += 1
            return None
        RP.enter()
        if waits:
            in_step()
        if poll and not RP.polled(op, key=requests_key([self])):
            return _answered_empty(op, name)
        result, payloads = RP.next(op)
        res, empty = RP.answer(Wait.replay, name, self, status, result, payloads, _Fake)
        payloads = result = None
        RP.leave(op, empty)
        return res
    f.__name__ = name
    return f


def _multi(name):
    """Waitall/Testall/Waitany/Testany/Waitsome/Testsome, either case."""
    op = name.lower()
    poll = op in POLLS
    waits = op in WAITING_OPS

    def f(cls, requests, statuses=None):
        if RP.finished:
            RP.late += 1
            return None
        RP.enter()
        if waits:
            in_step()
        requests = list(requests)
        if poll and not RP.polled(op, key=requests_key(requests)):
            return _answered_empty(op, name)
        result, payloads = RP.next(op)
        res, empty = RP.answer(WaitMany.replay, name, requests, statuses, result, payloads,
                               _Fake)
        payloads = result = None
        RP.leave(op, empty)
        return res
    f.__name__ = name
    return classmethod(f)


def _start(self):
    RP.enter()
    RP.next("start")
    RP.leave("start")


def _startall(cls, requests):
    for _ in list(requests):
        RP.enter()
        RP.next("start")
        RP.leave("start")


def _message_method(name):
    op = "mrecv" if name in ("Recv", "recv") else "imrecv"
    waits = op in WAITING_OPS

    def f(self, *args, **kw):
        RP.enter()
        if waits:
            in_step()
        buf = (args[0] if args else kw["buf"]) if name[0].isupper() else None
        result, payloads = RP.next(op)
        if op == "mrecv":
            rest = args[1:] if name == "Recv" else args
            status = kw.get("status", rest[0] if rest else None)
            res, empty = RP.answer(MatchedRecv.replay, name, buf, status, result, payloads,
                                   _Fake)
        else:
            res, empty = MatchedIrecv.replay(name, buf, _Fake)
        payloads = result = None
        RP.leave(op, empty)
        return res
    f.__name__ = name
    return f


def _from_group(op):
    def f(cls, *args, **kw):
        RP.enter()
        desc, _ = RP.next(op)
        res = _new_comm(desc)
        RP.leave(op)
        return res
    return classmethod(f)


def _local(op):
    """A request method replay answers itself: an event, no log record."""
    def f(self):
        RP.enter()
        RP.leave(op)
    f.__name__ = op
    return f


def _refused(what):
    """A method replay cannot stand in for: it stops with the reason."""
    def f(*args, **kw):
        raise NotImplementedError(
            f"replay: {what} cannot be replayed (the tracer counts these calls as unmodelled; "
            f"the message log does not hold their data)")
    return f


def build():
    """Create the replay classes (once per process)."""
    for name in WRAPPED_LEVELS:
        REAL[name] = getattr(MPI, name)
    mixins = mixin_hierarchy("Replay", _methods_for, root=(_Queries,))
    for cname in COMM_PARENTS:
        _CLS[cname] = Meta("Replay" + cname, (mixins[cname], REAL[cname]),
                            {"_real": REAL[cname]})
    from .windows import build as build_windows
    REAL["Win"] = MPI.Win
    _CLS["Win"] = build_windows(REAL["Win"])
    REAL["File"] = MPI.File
    _CLS["File"] = Meta("ReplayFile", (REAL["File"],),
                        {"Open": classmethod(_refused("MPI-IO (MPI.File)")),
                         "_real": REAL["File"]})
    req_ns = {n: _single(n) for n in methods("Request", "wait")}
    for n in methods("Request", "waitmany"):
        req_ns[n] = _multi(n)
    # the tracer traces these (request_free, cancel) and the recorder logs
    # nothing for them: the replay answers them itself, as events of their
    # own, so that its spans line up with the trace's
    req_ns["Free"] = _local("request_free")
    req_ns["Cancel"] = _local("cancel")
    # a replayed request stands for an active one until a completion
    # call completes it (``_out`` becomes "done")
    req_ns["__bool__"] = lambda self: getattr(self, "_out", None) != "done"
    req_ns["__eq__"] = lambda self, other: self is other or (
        getattr(self, "_out", None) == "done" and other == MPI.REQUEST_NULL)
    req_ns["__ne__"] = lambda self, other: not req_ns["__eq__"](self, other)
    req_ns["__hash__"] = lambda self: id(self)
    mixin = type("ReplayRequestMethods", (), req_ns)
    _CLS["Request"] = Meta("ReplayRequest", (mixin, REAL["Request"]), {"_real": REAL["Request"]})
    _CLS["Prequest"] = Meta("ReplayPrequest", (mixin, REAL["Prequest"]),
                             {"_real": REAL["Prequest"], "Start": _start,
                              "Startall": classmethod(_startall)})
    _CLS["Message"] = Meta("ReplayMessage", (REAL["Message"],),
                            dict({n: _message_method(n)
                                  for n in methods("Message", "mrecv", "imrecv")},
                                 _real=REAL["Message"], __bool__=lambda self: True,
                                 __eq__=lambda self, o: self is o,
                                 __ne__=lambda self, o: self is not o,
                                 __hash__=lambda self: id(self)))


def in_step() -> None:
    """Inside a call that waits for another rank in the run: its end waits
    for the representative's other copies too, where they are kept in step
    (replay/lockstep.py; Replayer.leave); only the main thread's calls,
    whose order is the same in every copy."""
    if STEP is not None and threading.current_thread() is threading.main_thread():
        RP.step_due = True


def install(log: LogReader, rank: int) -> Replayer:
    """Make this process rank ``rank`` of the logged run."""
    global RP, STEP
    build()
    STEP = lockstep.joined()
    RP = Replayer(log, rank)
    if BELOW is not None:
        RP.clocks = []
    RP.enter()
    RP._sleep_cost = sleep_cost()     # inside the init call: no computation span
    desc, _ = RP.next("init")
    world = _new_comm(desc)
    RP.leave("init")
    MPI.COMM_WORLD = world
    for name, cls in _CLS.items():
        setattr(MPI, name, cls)
    MPI.Group = Group
    return RP


class _Canned(Replayer):
    """A replayer that answers every call with nothing, or with the record
    its ``source`` (a LogReader) gave last, read again, to time the wrappers.

    Its spans go into lists allocated once and written in place: a probe
    that grew lists and sorted copies of them in the middle of a replay
    changed the heap the application's next arrays came from, and
    examples/uneven.py's spans after each probe took 10 ms more."""

    def __init__(self, calls: int):
        super().__init__(log=None, rank=-1, probe_every=None)
        self.warm = calls // 10                 # the first calls warm the caches up
        self.walls = [0.0] * (calls - self.warm)
        self.cpus = [0.0] * (calls - self.warm)
        self.source = None

    def next(self, op, call=None):
        if self.source is None:
            return None, []
        rec = self.source.again()
        # answered only with the call's own record: nothing else is ever
        # written into the application's buffers
        if rec is None or rec[0] != op or (call is not None and rec[1:4] != (
                call.peer, call.tag, call.nbytes)):
            raise LookupError("not the record of the call repeated")
        return rec[5], rec[6]

    def leave(self, op, empty=False):
        i = self.seq - self.warm
        if 0 <= i < len(self.walls):
            self.walls[i], self.cpus[i] = self._span
        self.seq += 1
        minor_faults()            # as Replayer.leave reads it
        self.last_cpu = time.process_time()
        self.last_exit = time.perf_counter()
        # what hand_over() costs where the application runs no other
        # thread; never the hand-over itself (the GIL's wait is no overhead)
        threading.active_count()


_PROBE: dict = {}        # (calls, repeating) -> (_Canned, communicator)


def overhead(calls: int = PROBE_CALLS, repeat: tuple | None = None) -> tuple[float, float]:
    """Wall and CPU seconds the replay itself adds to every computation span.

    A span runs from one call's exit timer to the next call's entry timer,
    so besides the application's work it holds the return from one replayed
    method and the entry into the next (about 1-2 us in CPython): in a loop
    of small messages that is as much as the communication.  Measured here
    as the mean span between replayed calls made back to back (_typical).

    How long that return and entry take depends on what the call did
    inside its timers: after a replayed call (reading and checking its
    record, binding the arguments, copying the logged data: ~30 us of
    Python) the next few hundred instructions run on cold caches, and a
    loop doing nothing between 20,000 replayed Allgathers kept ~1.1 us a
    span beyond a probe of empty calls (bench/probes/small_call_probe.py).
    So where the application's last call was a buffer call of at most
    REPEAT_BYTES, blocking or a nonblocking start (``repeat``: method,
    self, args, kwargs; a loop of 64 Isends kept 0.3 us a span beyond the
    empty calls' probe, the same as its traced Python between them), the probe
    is that call, made REPEAT_CALLS times with the same arguments and
    answered each time with its own record read again: the same work, and
    the same data written into the same buffers, so the application sees
    nothing.  Otherwise an Allreduce of 8 bytes answered with nothing.
    The replay calls it every PROBE_EVERY seconds (Replayer.probes).
    """
    global RP
    source = RP.log if repeat is not None and RP is not None else None
    if source is not None:
        calls = REPEAT_CALLS
    key = (calls, source is not None)
    if key not in _PROBE:
        _PROBE[key] = (_Canned(calls), _new_comm({"cls": "Intracomm", "rank": 0, "size": 1}))
    canned, comm = _PROBE[key]
    canned.seq = 0
    canned.source = source
    failed = False
    saved, RP = RP, canned
    try:
        if source is not None:
            method, obj, args, kw = repeat
            canned.last_exit = time.perf_counter()
            try:
                for _ in range(calls):
                    method(obj, *args, **kw)
            except Exception:
                failed = True
        else:
            # a typical buffer call: the work inside the timers (argument
            # binding, buffer views) also slows what runs outside them
            spec, inplace = [bytearray(8), 1, MPI.DOUBLE], MPI.IN_PLACE
            canned.last_exit = time.perf_counter()
            for _ in range(calls):
                comm.Allreduce(inplace, spec)
    finally:
        RP = saved
        canned.source = None
    if failed:                  # a measurement never ends a replay: measured without it
        return overhead()
    return _typical(canned.walls), _typical(canned.cpus)


TAIL = 50


def _typical(spans: list) -> float:
    """The mean of ``spans`` less the rare long ones (over TAIL times the
    median, 70 us and more: a preemption, which the application's own
    spans meet as often in its real run).  The mean, not the median: the
    sum of the spans is what the prediction keeps, and the replay's own
    cost has a tail (garbage collections of what it allocates, 5-30 us
    every 15-20 calls, some landing between the timers; a slower state of
    the machine) that the application's spans pay alike.  Sorted in
    place, summed without a list: see _Canned."""
    spans.sort()
    cap = TAIL * spans[len(spans) // 2]
    total, n = 0.0, 0
    for x in spans:
        if x > cap:
            break
        total += x
        n += 1
    return total / n if n else 0.0


def finish() -> Replayer | None:
    RP.enter()
    RP.next("finalize")
    RP.leave("finalize")
    RP.finished = True
    return RP
