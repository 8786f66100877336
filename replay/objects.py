"""mpi4py's own work inside a collective of Python objects, redone on the
replay's core.

mpi4py runs ``comm.allreduce(obj)`` and the other lower-case collectives
in Python: it pickles what it sends, unpickles what it receives and, for
reductions, applies the operation at every step of its own tree (a
binomial tree to rank 0, then a broadcast of the pickled result).  That is
computation on the rank's core, and the log's answer skips it; at 1 MiB it
is most of the call.  :func:`answer` redoes this rank's share, step by
step as mpi4py takes them, and splits its time in three:

* ``before``: the work before this rank's first message leaves or arrives
  (the copy of its contribution, the pickling of what it sends first).
  It delays the message, so it belongs to the span that ends at the call.
* ``inside`` (allreduce only): the work between its reduction's first
  message and the broadcast of the result (unpickling what arrives, the
  reductions, pickling what it forwards; rank 0 pickling the result).
  It delays the broadcast, so the simulator runs it between the two.
* ``after``: the rest (unpickling the result; in the other collectives
  everything after the first message), charged to the next span.

What the partners sent is not in the log: this rank's own contribution,
pickled, stands in for it (in an SPMD reduction every rank's has the
same type and size).  Operations are applied again only when predefined
(``MPI.SUM`` and the like): a Python function given as the operation
might do more than reduce.  The share is this rank's place in
mpi4py's algorithm; the members of its cluster take it, and share that
place wherever it weighs (cluster/vectors.py: ``object_roles``).
"""
from __future__ import annotations

import time

from mpi4py import MPI


class _Split:
    """CPU seconds of timed work: before this rank's first communication,
    inside (up to the broadcast of an allreduce's result), after."""

    def __init__(self):
        self.seconds = [0.0, 0.0, 0.0]
        self.stage = 0

    def timed(self, fn, *args):
        # CPU seconds: the work is this process's own, and its wall time on
        # a virtual core also holds the quota's pauses (see fake._first_touch)
        t = time.process_time()
        out = fn(*args)
        self.seconds[self.stage] += time.process_time() - t
        return out

    def talk(self):
        """A message leaves or arrives here."""
        self.stage = max(self.stage, 1)

    def broadcast(self):
        """The result's broadcast starts here: what follows is after."""
        self.stage = 2


def _copy(w: _Split, obj):
    """mpi4py's copy of a contribution (pickled and unpickled); also returns
    the pickle, the stand-in for what partners send."""
    data = w.timed(MPI.pickle.dumps, obj)
    return w.timed(MPI.pickle.loads, data), data


def _apply(w: _Split, op, x, y):
    if isinstance(op, MPI.Op) and op.is_predefined:
        try:
            return w.timed(op, x, y)
        except Exception:       # a stand-in the op does not take: nothing to time
            pass
    return x


def _reduce_to_zero(w: _Split, obj, op, rank: int, size: int):
    """mpi4py's binomial reduction to rank 0: at each bit of the rank, send
    the partial result up or receive one from below and reduce."""
    result, data = _copy(w, obj)
    mask = 1
    while mask < size:
        if mask & rank:
            w.timed(MPI.pickle.dumps, result)
            w.talk()
        elif rank | mask < size:
            w.talk()
            part = w.timed(MPI.pickle.loads, data)
            result = _apply(w, op, result, part)
        mask <<= 1
    return result


def _scan(w: _Split, obj, op, rank: int, size: int):
    """mpi4py's prefix reduction: one exchange per bit with rank ^ mask."""
    partial, data = _copy(w, obj)
    mask = 1
    while mask < size:
        if rank ^ mask < size:
            w.timed(MPI.pickle.dumps, partial)
            w.talk()
            part = w.timed(MPI.pickle.loads, data)
            partial = _apply(w, op, partial, part)
        mask <<= 1


def _is_root(inter: bool, rank: int, root: int) -> bool:
    return root == MPI.ROOT if inter else rank == root


def answer(name: str, a: dict, payload: bytes):
    """The logged result of the object collective ``name`` (bound arguments
    ``a``, pickled ``payload``), and (before, inside, after): the seconds
    mpi4py's own work in it took this rank, redone here."""
    w = _Split()
    if _redo(w, name, a):
        res = w.timed(MPI.pickle.loads, payload)
    else:
        res = MPI.pickle.loads(payload)
    before, inside, after = w.seconds
    if w.stage < 2:              # no broadcast to run it before: all after
        inside, after = 0.0, inside + after
    return res, before, inside, after


def _redo(w: _Split, name: str, a: dict) -> bool:
    """Redo this rank's share of the collective's work up to the result;
    True if it then unpickles the result."""
    comm = a["self"]
    # a communicator the replay does not describe (a library's wrapper of
    # one, built from its handle) has no rank to place it in the tree: its
    # share is taken as one contribution out, the result in
    known = hasattr(comm, "_d")
    inter = known and comm.Is_inter()
    rank, size = (comm.Get_rank(), comm.Get_size()) if known else (-1, 0)
    op, root = a.get("op"), a.get("root", 0)
    unpickle_result = True
    if not known:
        if name != "barrier":
            w.timed(MPI.pickle.dumps, a.get("sendobj", a.get("obj")))
        unpickle_result = name != "barrier"
    elif name in ("reduce", "allreduce") and not inter:
        result = _reduce_to_zero(w, a["sendobj"], op, rank, size)
        if name == "allreduce":
            if rank == 0:
                w.timed(MPI.pickle.dumps, result)   # the broadcast's pickle
            w.broadcast()
        elif name == "reduce":
            if root != 0 and rank == 0:
                w.timed(MPI.pickle.dumps, result)
            unpickle_result = root != 0 and rank == root
    elif name in ("scan", "exscan"):
        _scan(w, a["sendobj"], op, rank, size)
        unpickle_result = False
    elif name == "bcast":
        if _is_root(inter, rank, root):
            w.timed(MPI.pickle.dumps, a["obj"])
        unpickle_result = root not in (MPI.ROOT, MPI.PROC_NULL) if inter else True
    elif name in ("scatter", "alltoall", "neighbor_alltoall"):
        if name != "scatter" or _is_root(inter, rank, root):
            for item in a["sendobj"] or ():
                w.timed(MPI.pickle.dumps, item)
    elif name == "barrier":     # an MPI barrier: nothing pickled
        unpickle_result = False
    else:                       # gather, allgather, the rest: one contribution out
        w.timed(MPI.pickle.dumps, a.get("sendobj"))
        unpickle_result = name != "gather" or _is_root(inter, rank, root)
    w.talk()
    return unpickle_result
