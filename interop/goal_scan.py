"""GOAL text to operation and dependency arrays, at compiled speed.

``count()`` takes one quick look at every line to bound the operations
and dependencies, so that ``scan()`` fills arrays allocated once (trimmed
to what it found): no per-op Python objects (262,144 ranks write about 24
million lines).  ``scan()`` reads every line in file order and fills
per-op arrays (rank, kind, peer, size, tag, calc seconds) and
per-dependency arrays (the op required, the op that requires it, after
start or completion).  Both work on a stretch of the text at a time and
say where they stopped, so that the reader can map the file and let go of
what it has read (interop/goal.py) instead of holding all of it.
Labels are per rank block: ``l<digits>`` (what generators write) index a
table directly, any other label goes through a hash map of its bytes
(FNV-1a).  A dependency whose labels are both known is resolved at once,
any other when its block's ``}`` closes it, so ``lA requires lB`` may come
before either op.

A line it cannot read stops the pass with an error code and the line's
byte offset; interop/goal.py turns that into a message naming the file and
line.
"""
from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.typed import Dict

from netsim.engine import CALC, RECV, SEND

# error codes of scan()
OK = 0
NO_NUM_RANKS = 1          # an operation or block before "num_ranks N"
RANK_RANGE = 2            # rank R >= num_ranks
OUTSIDE = 3               # an operation or dependency outside a rank block
SYNTAX = 4                # a line that is none of the forms
PEER_RANGE = 5            # send/recv peer outside -1..num_ranks-1
UNKNOWN_LABEL = 6         # a dependency on a label its rank does not define
DUPLICATE_LABEL = 7       # a label defined twice in one rank
UNCLOSED = 8              # the file ends inside a rank block
EMPTY = 9                 # no "num_ranks N" at all
TAG_RANGE = 10            # a tag beyond 32 bits
MORE = 11                 # paused between blocks at the given offset: call again

@njit(cache=True, inline="always")
def _blank(c):
    return c == 32 or c == 9 or c == 13


@njit(cache=True)
def _is(data, s, e, text):
    """Whether data[s:e] spells ``text`` (a uint8 array)."""
    if e - s != len(text):
        return False
    for i in range(e - s):
        if data[s + i] != text[i]:
            return False
    return True


@njit(cache=True)
def _int(data, s, e):
    """(value, ok) of the decimal integer data[s:e], optional leading '-'."""
    neg = s < e and data[s] == 45
    if neg:
        s += 1
    if s >= e:
        return 0, False
    v = 0
    for i in range(s, e):
        c = data[i]
        if c < 48 or c > 57:
            return 0, False
        v = v * 10 + (c - 48)
    return (-v if neg else v), True


@njit(cache=True)
def _hash(data, s, e):
    h = np.uint64(14695981039346656037)
    for i in range(s, e):
        h = (h ^ np.uint64(data[i])) * np.uint64(1099511628211)
    return h


# words kept per line: the longest form, "l1: send 8b to 1 tag 5", has 7
MAX_WORDS = 8


@njit(cache=True, inline="always")
def _split(data, p, n, ws, we):
    """Split the line starting at ``p`` into blank-separated words, in one
    pass (content ends at "//"): the first MAX_WORDS words' bounds go to
    ``ws``/``we``, the rest to empty (0, 0).  Returns (words found, start
    of the next line)."""
    k = 0
    s = -1                                  # the open word's start
    while p < n:
        c = data[p]
        if c == 10:
            break
        comment = c == 47 and p + 1 < n and data[p + 1] == 47
        if comment or _blank(c):
            if s >= 0:
                if k < MAX_WORDS:
                    ws[k] = s
                    we[k] = p
                k += 1
                s = -1
            if comment:                     # the rest of the line
                while p < n and data[p] != 10:
                    p += 1
                break
        elif s < 0:
            s = p
        p += 1
    if s >= 0:
        if k < MAX_WORDS:
            ws[k] = s
            we[k] = p
        k += 1
    for i in range(min(k, MAX_WORDS), MAX_WORDS):
        ws[i] = 0
        we[i] = 0
    return k, p + 1


@njit(cache=True, inline="always")
def _has_colon(data, s, e):
    for i in range(s, e):
        if data[i] == 58:
            return i
    return -1


@njit(cache=True)
def count(data, p, stop):
    """At least as many (operations, dependencies) as scan() will find in
    the lines of GOAL text ``data`` that start in [p, stop), and where the
    next line starts: a line whose first word has a colon is an
    operation; any other line that is not blank, a comment or a keyword
    line (num_ranks, rank, }) may be a dependency.  One quick look per
    line, the rest of it skipped."""
    n = len(data)
    ops = 0
    deps = 0
    while p < stop:
        while p < n and _blank(data[p]):
            p += 1
        if p >= n:
            break
        first = data[p]
        colon = False
        while p < n and data[p] > 32:
            colon = colon or data[p] == 58
            p += 1
        if colon:
            ops += 1
        elif first != 10 and first != 47 and first != 125 and first != 110 and \
                not (first == 114 and p < n and data[p - 1] == 107):   # "rank": r...k
            deps += 1
        while p < n and data[p] != 10:
            p += 1
        p += 1
    return ops, deps, min(p, n)


@njit(cache=True, inline="always")
def _numbered(data, s, e):
    """The number of an ``l<digits>`` label, or -1 for any other label."""
    if e - s < 2 or e - s > 16 or data[s] != 108:
        return -1
    v = 0
    for i in range(s + 1, e):
        c = data[i]
        if c < 48 or c > 57:
            return -1
        v = v * 10 + (c - 48)
    return v


@njit(cache=True)
def _op_of(data, s, e, stamp, slot, block, named):
    """The op index of label data[s:e] in the open block, or -1."""
    num = _numbered(data, s, e)
    if num >= 0:
        return slot[num] if num < len(stamp) and stamp[num] == block else -1
    return named.get(_hash(data, s, e), -1)


@njit(cache=True)
def scan(data, p, stop, nops, ndeps, nranks, op_rank, op_kind, op_peer, op_size, op_tag,
         op_dur, dep_src, dep_dst, dep_start, words):
    """Read GOAL text ``data`` (uint8) from byte ``p`` into the arrays,
    sized by count(), after ``nops`` ops and ``ndeps`` dependencies (0 and
    0 at first; ``nranks`` -1 until ``num_ranks`` is read).  ``words``: the
    keywords as uint8 arrays, in the order of goal.py's _WORDS.  Pauses at
    the first line from ``stop`` on that is outside a rank block (so that
    the caller can let go of the text before it), returning MORE and
    where to go on.

    Returns (ops, deps, num_ranks, error code, byte offset of the line at
    fault or of the pause)."""
    w_num, w_rank, w_open, w_close, w_send, w_recv, w_calc, w_to, w_from, w_tag, \
        w_req, w_ireq = words
    n = len(data)
    rank = -1
    block = 0                      # the open block's number: stamps its labels
    stamp = np.full(1024, -1, np.int64)
    slot = np.empty(1024, np.int64)
    named = Dict.empty(key_type=types.uint64, value_type=types.int64)
    # the open block's dependencies on labels not yet defined: their lines
    pending = np.empty(16, np.int64)
    npend = 0
    block_at = 0
    ws = np.zeros(MAX_WORDS, np.int64)      # the line's words: data[ws[i]:we[i]]
    we = np.zeros(MAX_WORDS, np.int64)
    while p < n:
        if p >= stop and rank < 0:
            return nops, ndeps, nranks, MORE, p
        start = p
        nwords, p = _split(data, p, n, ws, we)
        if nwords == 0:
            continue
        s1, e1 = ws[0], we[0]
        if _is(data, s1, e1, w_num):
            s2, e2 = ws[1], we[1]
            v, ok = _int(data, s2, e2)
            if not ok or v < 0 or v >= 2**31:
                return nops, ndeps, nranks, SYNTAX, start
            nranks = v
            continue
        if nranks < 0:
            return nops, ndeps, nranks, NO_NUM_RANKS, start
        if _is(data, s1, e1, w_rank):
            s2, e2 = ws[1], we[1]
            brace = e2 > s2 and data[e2 - 1] == 123            # "rank 0{"
            v, ok = _int(data, s2, e2 - 1 if brace else e2)
            s3, e3 = ws[2], we[2]
            if not brace:
                if not _is(data, s3, e3, w_open):
                    return nops, ndeps, nranks, SYNTAX, start
                s3, e3 = ws[3], we[3]
            if not ok or v < 0 or s3 != e3:
                return nops, ndeps, nranks, SYNTAX, start
            if v >= nranks:
                return nops, ndeps, nranks, RANK_RANGE, start
            rank = v
            block += 1
            block_at = start
            if len(named):
                named.clear()
            npend = 0
            continue
        if _is(data, s1, e1, w_close):
            if rank < 0:
                return nops, ndeps, nranks, OUTSIDE, start
            for k in range(npend):
                at = pending[k]
                _split(data, at, n, ws, we)      # the "}" line's words are done with
                sa, ea, s2, e2, sb, eb = ws[0], we[0], ws[1], we[1], ws[2], we[2]
                a = _op_of(data, sa, ea, stamp, slot, block, named)
                b = _op_of(data, sb, eb, stamp, slot, block, named)
                if a < 0 or b < 0:
                    return nops, ndeps, nranks, UNKNOWN_LABEL, at
                dep_src[ndeps] = b
                dep_dst[ndeps] = a
                dep_start[ndeps] = not _is(data, s2, e2, w_req)
                ndeps += 1
            rank = -1
            continue
        if rank < 0:
            return nops, ndeps, nranks, OUTSIDE, start
        colon = _has_colon(data, s1, e1)
        if colon >= 0:                               # "label:" then an operation
            if colon == s1:
                return nops, ndeps, nranks, SYNTAX, start
            i = 1                                    # the next word
            if colon + 1 < e1:                       # "l1:send", no blank between
                s2, e2 = colon + 1, e1
            else:
                s2, e2 = ws[1], we[1]
                i = 2
            s3, e3 = ws[i], we[i]
            v, ok = _int(data, s3, e3)
            if _is(data, s2, e2, w_calc):
                if not ok:
                    return nops, ndeps, nranks, SYNTAX, start
                kind, peer, size, tag, ns = CALC, -1, 0, -1, v
            else:
                if _is(data, s2, e2, w_send):
                    kind, word = SEND, w_to
                elif _is(data, s2, e2, w_recv):
                    kind, word = RECV, w_from
                else:
                    return nops, ndeps, nranks, SYNTAX, start
                # "8b": the size, its unit optional
                size, ok = _int(data, s3, e3 - 1 if e3 > s3 and data[e3 - 1] == 98 else e3)
                s4, e4 = ws[i + 1], we[i + 1]
                s5, e5 = ws[i + 2], we[i + 2]
                peer, ok2 = _int(data, s5, e5)
                if not ok or not ok2 or not _is(data, s4, e4, word):
                    return nops, ndeps, nranks, SYNTAX, start
                if peer < -1 or peer >= nranks:
                    return nops, ndeps, nranks, PEER_RANGE, start
                tag, ns = 0, 0
                s6, e6 = ws[i + 3], we[i + 3]
                if _is(data, s6, e6, w_tag):
                    s7, e7 = ws[i + 4], we[i + 4]
                    tag, ok = _int(data, s7, e7)
                    if not ok:
                        return nops, ndeps, nranks, SYNTAX, start
                    if tag < -2**31 or tag >= 2**31:
                        return nops, ndeps, nranks, TAG_RANGE, start
            # the label, once the line is known to be good
            num = _numbered(data, s1, colon)
            if num >= 0:
                if num >= len(stamp):
                    grown = max(2 * len(stamp), num + 1)
                    stamp = np.concatenate((stamp, np.full(grown - len(stamp), -1, np.int64)))
                    slot = np.concatenate((slot, np.empty(grown - len(slot), np.int64)))
                if stamp[num] == block:
                    return nops, ndeps, nranks, DUPLICATE_LABEL, start
                stamp[num] = block
                slot[num] = nops
            else:
                h = _hash(data, s1, colon)
                if h in named:
                    return nops, ndeps, nranks, DUPLICATE_LABEL, start
                named[h] = nops
            if nops >= len(op_rank):
                return nops, ndeps, nranks, SYNTAX, start        # count() disagreed
            op_rank[nops] = rank
            op_kind[nops] = kind
            op_peer[nops] = peer
            op_size[nops] = size
            op_tag[nops] = tag
            op_dur[nops] = ns * 1e-9
            nops += 1
            continue
        # "lA requires lB" / "lA irequires lB"
        s2, e2 = ws[1], we[1]
        s3, e3 = ws[2], we[2]
        req = _is(data, s2, e2, w_req)
        if not (req or _is(data, s2, e2, w_ireq)) or s3 == e3 or nwords > 3:
            return nops, ndeps, nranks, SYNTAX, start
        a = _op_of(data, s1, e1, stamp, slot, block, named)
        b = _op_of(data, s3, e3, stamp, slot, block, named)
        if a < 0 or b < 0:                           # a label further down: at "}"
            if npend == len(pending):
                pending = np.concatenate((pending, np.empty(npend, np.int64)))
            pending[npend] = start
            npend += 1
            continue
        if ndeps >= len(dep_src):
            return nops, ndeps, nranks, SYNTAX, start            # count() disagreed
        dep_src[ndeps] = b
        dep_dst[ndeps] = a
        dep_start[ndeps] = not req
        ndeps += 1
    if rank >= 0:
        return nops, ndeps, nranks, UNCLOSED, block_at
    if nranks < 0:
        return nops, ndeps, nranks, EMPTY, 0
    return nops, ndeps, nranks, OK, 0
