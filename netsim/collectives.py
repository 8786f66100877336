"""Collective operations: point-to-point algorithms and analytic costs.

Decomposed mode: an algorithm turns one rank's part of a collective into a
list of *steps*; each step is ``(sends, recvs)``, lists of ``(peer, bytes)``
with peers as communicator-local indices.  A step's transfers run
concurrently; the next step starts when all of them completed.  Every rank
computes its own steps from (its index, communicator size, root, bytes),
so the lowering needs no cross-rank pass.

Algorithms (p members, n bytes per member's contribution):

=======================  ==================================================
``binomial``             bcast, reduce, gather, scatter: ceil(log2 p) rounds
                         along a binomial tree rooted at the root
``recursive_doubling``   allreduce, allgather (power-of-two core; the
                         ``p - 2^k`` extra ranks fold into a partner first
                         and get the result back last), scan/exscan
``ring``                 allreduce (reduce-scatter + allgather, 2(p-1)
                         rounds of n/p), allgather (p-1 rounds of n)
``rabenseifner``         allreduce: recursive halving reduce-scatter then
                         recursive doubling allgather (n/2, n/4, ... bytes)
``pairwise``             alltoall(v/w), reduce_scatter: p-1 rounds, round
                         k sends to i+k and receives from i-k
``scattered``            alltoall(v/w): every send and receive posted at
                         once, in rounds of at most 32 peers (MPICH's
                         Alltoallv/w, and its Alltoall of blocks from 256 B
                         to 32 KiB)
``bruck``                alltoall: ceil(log2 p) rounds, round k sends to
                         i+2^k the blocks whose index has bit k set (about
                         p/2 blocks a round; MPICH's Alltoall of blocks up
                         to 256 B on 8 members or more)
``mpich``                alltoall(v/w): MPICH's own choice, call by call:
                         Alltoallv/w scattered; Alltoall bruck up to 256 B a
                         block (8 members or more), scattered up to 32 KiB,
                         pairwise beyond
``dissemination``        barrier: ceil(log2 p) rounds, 0-byte messages
``linear``               gather/scatter/bcast/reduce: the root talks to
                         every member in turn
=======================  ==================================================

Analytic mode (``analytic``) charges one cost to every member once the
last member arrived; with L the latency of the widest network level
among the members, G the per-byte time of one block there (n bytes, n/p
for allreduce and reduce_scatter) as a point-to-point message of that
size is charged (the level's measured curve, else its eager or
rendezvous byte time), o the send+receive overhead, and
``c = ceil(log2 p)``:

=====================================  =====================================
barrier                                c (L + o)
bcast, reduce, scan, exscan            c (L + o + n G)
allreduce up to the short limit        s (L + o + n G)
allreduce beyond it                    2 c (L + o) + 2 n G (p-1)/p
gather, scatter, allgather             c (L + o) + (p-1) n G
alltoall                               (p-1) (L + o) + (p-1) n G
reduce_scatter                         c (L + o) + n G (p-1)/p
neighbour collectives                  (L + o + n G) per neighbour
=====================================  =====================================

These are the usual Hockney/LogP estimates of the algorithms above
(Thakur, Rabenseifner and Gropp 2005).  An allreduce of at most the
platform's ``allreduce_short_limit`` bytes (MPICH's 2048 by default) is
recursive doubling, as MPICH runs it: s = log2 of the largest power of
two <= p exchanges of the whole n, two more where p is no power of two
(the extra ranks fold in first and get the result back last); beyond the
limit, a reduce-scatter and an allgather (Rabenseifner).  MPICH's
allreduce of 8 bytes between two ranks of this host took 2.3 us, about
one one-way trip, where reduce then broadcast would take two.

Where the level has a
connection warm-up (netsim/platform.py), each of the bandwidth term's
blocks (:func:`blocks`) also pays its share of it, a member's earlier
blocks over the same communicator having warmed its connections.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable

DEFAULT_ALGORITHM = "analytic"

# the algorithms each collective accepts (first = used when the platform
# names an algorithm the collective cannot use)
FOR_OP = {
    "barrier": ("dissemination",),
    "bcast": ("binomial", "linear"),
    "reduce": ("binomial", "linear"),
    "allreduce": ("recursive_doubling", "ring", "rabenseifner", "binomial"),
    "gather": ("binomial", "linear"),
    "scatter": ("binomial", "linear"),
    "allgather": ("ring", "recursive_doubling"),
    "alltoall": ("pairwise", "scattered", "bruck", "mpich"),
    "reduce_scatter": ("pairwise",),
    "scan": ("recursive_doubling",),
    "exscan": ("recursive_doubling",),
}
ALGORITHMS = sorted({a for v in FOR_OP.values() for a in v})

# trace op -> collective family (v/w variants, blocks, nonblocking and
# persistent forms share the algorithm of their family)
FAMILY = {}
for _fam in FOR_OP:
    for _v in ("", "v", "w"):
        FAMILY[_fam + _v] = _fam
        FAMILY["i" + _fam + _v] = _fam
        FAMILY[_fam + _v + "_init"] = _fam
FAMILY.update({"reduce_scatter_block": "reduce_scatter", "ireduce_scatter_block": "reduce_scatter",
               "reduce_scatter_block_init": "reduce_scatter", "ibarrier": "barrier",
               "barrier_init": "barrier"})
NEIGHBOR = ("neighbor_allgather", "neighbor_allgatherv", "neighbor_alltoall",
            "neighbor_alltoallv", "neighbor_alltoallw")
for _n in NEIGHBOR:
    FAMILY[_n] = "neighbor"
    FAMILY["i" + _n] = "neighbor"
    FAMILY[_n + "_init"] = "neighbor"


# A collective of Python objects (comm.allreduce(obj); the trace's flags
# bit 64) is mpi4py's algorithm, not MPI's collective of that name.  Every
# one moves the size of each pickle (an MPI_Count) just before the pickle;
# both go out at once (eager), so the pair costs about what one message of
# both costs.  Its gather, scatter, bcast, allgather and alltoall are MPI's
# (size, then the pickles with the v-form), and its reduce a binomial tree
# of point-to-point messages to member 0 (as MPI's binomial reduce); but
# allreduce is that reduce followed by a broadcast of the result, where
# MPI's allreduce exchanges (recursive doubling, ring, Rabenseifner).
OBJECT_COUNT_BYTES = 8
OF_OBJECTS = {"allreduce": ("reduce", "bcast")}


def choose(family: str, wanted: str) -> str:
    """The algorithm used for ``family`` when the platform asks ``wanted``."""
    if wanted == "analytic" or family == "neighbor":
        return "analytic"
    ok = FOR_OP[family]
    return wanted if wanted in ok else ok[0]


# MPICH's limits for its Alltoall (MPIR_CVAR_ALLTOALL_SHORT_MSG_SIZE,
# _MEDIUM_MSG_SIZE, _THROTTLE: bytes of one block; peers posted at once)
MPICH_ALLTOALL_SHORT = 256
MPICH_ALLTOALL_MEDIUM = 32768
SCATTERED_THROTTLE = 32


def resolve(algorithm: str, p: int, n: float, vector: bool) -> str:
    """The algorithm one call runs: ``algorithm`` itself, or, for
    ``mpich``, MPICH's choice for this call (``vector``: an Alltoallv/w;
    ``n``: bytes of one block)."""
    if algorithm != "mpich":
        return algorithm
    if vector or n > MPICH_ALLTOALL_MEDIUM:
        return "scattered" if vector else "pairwise"
    if n <= MPICH_ALLTOALL_SHORT and p >= 8:
        return "bruck"
    return "scattered"


def _log2c(p: int) -> int:
    return max(0, math.ceil(math.log2(p))) if p > 1 else 0


def short_allreduce_steps(p: int) -> int:
    """Exchanges of a recursive-doubling allreduce of p members: those of
    its power-of-two core, and the fold in and out where p is none."""
    if p <= 1:
        return 0
    p2, rem, _ = _fold(0, p)
    return p2.bit_length() - 1 + (2 if rem else 0)


def analytic_cost(family: str, p: int, n: float, L: float, G: float, o: float,
                  neighbours: int = 0) -> float:
    """Seconds one collective costs every member (formulas in the module
    doc; ``allreduce_short``: an allreduce up to the short limit)."""
    if family == "neighbor":
        return neighbours * (L + o + n * G)
    if p <= 1:
        return 0.0
    c = _log2c(p)
    if family == "barrier":
        return c * (L + o)
    if family in ("bcast", "reduce", "scan", "exscan"):
        return c * (L + o + n * G)
    if family == "allreduce":
        return 2 * c * (L + o) + 2 * n * G * (p - 1) / p
    if family == "allreduce_short":
        return short_allreduce_steps(p) * (L + o + n * G)
    if family in ("gather", "scatter", "allgather"):
        return c * (L + o) + (p - 1) * n * G
    if family == "alltoall":
        return (p - 1) * (L + o) + (p - 1) * n * G
    if family == "reduce_scatter":
        return c * (L + o) + n * G * (p - 1) / p
    raise ValueError(f"no analytic cost for {family}")


def blocks(family: str, p: int, neighbours: int = 0) -> int:
    """How many blocks one member moves in turn in the analytic cost's
    bandwidth term (the terms in G above: allreduce and reduce_scatter
    count blocks of n/p): what a new connection's warm-up is charged on."""
    if family == "neighbor":
        return neighbours
    if p <= 1 or family == "barrier":
        return 0
    if family in ("bcast", "reduce", "scan", "exscan"):
        return _log2c(p)
    if family == "allreduce":
        return 2 * (p - 1)
    if family == "allreduce_short":
        return short_allreduce_steps(p)
    return p - 1            # gather, scatter, allgather, alltoall, reduce_scatter


# ---------------------------------------------------------------------------
# Decomposed algorithms: steps of one member
# ---------------------------------------------------------------------------

def _binomial_down(i, p, root, nbytes_of):
    """Bcast/scatter shape: receive from the parent, then send to children.

    ``nbytes_of(subtree_size)`` is the size a hop carries."""
    v = (i - root) % p
    steps = []
    mask = 1
    while mask < p:
        if v & mask:
            parent = (v - mask + root) % p
            steps.append(([], [(parent, nbytes_of(min(mask, p - v)))]))
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:
        if v + mask < p:
            child = (v + mask + root) % p
            steps.append(([(child, nbytes_of(min(mask, p - v - mask)))], []))
        mask >>= 1
    return steps


def _binomial_up(i, p, root, nbytes_of):
    """Reduce/gather shape: the mirror image of :func:`_binomial_down`."""
    down = _binomial_down(i, p, root, nbytes_of)
    return [(r, s) for s, r in reversed(down)]


def _fold(i, p):
    """Recursive doubling on non-powers of two: (p2, rem, new index or -1)."""
    p2 = 1 << (p.bit_length() - 1)
    rem = p - p2
    if i < 2 * rem:
        return p2, rem, (i // 2 if i % 2 else -1)
    return p2, rem, i - rem


def _real(new, rem):
    return new * 2 + 1 if new < rem else new + rem


def _recursive_doubling(i, p, n, grow=False):
    """Allreduce (n each round) or allgather (``grow``: n * 2^k per round)."""
    p2, rem, new = _fold(i, p)
    steps = []
    if i < 2 * rem:
        if new < 0:                     # even extra: hand over, wait for the result
            total = n * p if grow else n
            return [([(i + 1, n)], []), ([], [(i + 1, total)])]
        steps.append(([], [(i - 1, n)]))
    mask, have = 1, n * (2 if (grow and i < 2 * rem) else 1)
    while mask < p2:
        partner = _real(new ^ mask, rem)
        steps.append(([(partner, have)], [(partner, have)]))
        if grow:
            have *= 2
        mask <<= 1
    if i < 2 * rem:
        steps.append(([(i - 1, n * p if grow else n)], []))
    return steps


def _ring(i, p, chunk, rounds):
    right, left = (i + 1) % p, (i - 1) % p
    return [([(right, chunk)], [(left, chunk)]) for _ in range(rounds)]


def _rabenseifner(i, p, n):
    p2, rem, new = _fold(i, p)
    if new < 0:
        return [([(i + 1, n)], []), ([], [(i + 1, n)])]
    steps = [([], [(i - 1, n)])] if i < 2 * rem else []
    size, mask, halves = n, p2 >> 1, []
    while mask >= 1:                      # recursive halving
        size /= 2
        partner = _real(new ^ mask, rem)
        steps.append(([(partner, size)], [(partner, size)]))
        halves.append((partner, size))
        mask >>= 1
    for partner, size in reversed(halves):  # recursive doubling allgather
        steps.append(([(partner, size)], [(partner, size)]))
    if i < 2 * rem:
        steps.append(([(i - 1, n)], []))
    return steps


# Each family's steps for member i: (algorithm, i, p, root, n, per_peer) -> steps

def _barrier(alg, i, p, root, n, per_peer):
    return [([((i + (1 << k)) % p, 0)], [((i - (1 << k)) % p, 0)]) for k in range(_log2c(p))]


def _from_root(alg, i, p, root, n, per_peer, grows: bool):
    """bcast (``grows`` False) and scatter (True: a subtree's share)."""
    if alg == "linear":
        if i == root:
            return [([(j, n)], []) for j in range(p) if j != root]
        return [([], [(root, n)])]
    return _binomial_down(i, p, root, (lambda k: n * k) if grows else (lambda k: n))


def _to_root(alg, i, p, root, n, per_peer, grows: bool):
    """reduce (``grows`` False) and gather (True: a subtree's share)."""
    if alg == "linear":
        if i == root:
            return [([], [(j, n) for j in range(p) if j != root])]
        return [([(root, n)], [])]
    return _binomial_up(i, p, root, (lambda k: n * k) if grows else (lambda k: n))


def _allreduce(alg, i, p, root, n, per_peer):
    if alg == "ring":
        return _ring(i, p, n / p, 2 * (p - 1))
    if alg == "rabenseifner":
        return _rabenseifner(i, p, n)
    if alg == "binomial":
        return _binomial_up(i, p, 0, lambda k: n) + _binomial_down(i, p, 0, lambda k: n)
    return _recursive_doubling(i, p, n)


def _allgather(alg, i, p, root, n, per_peer):
    if alg == "recursive_doubling":
        return _recursive_doubling(i, p, n, grow=True)
    return _ring(i, p, n, p - 1)


def _alltoall(alg, i, p, root, n, per_peer):
    """Pairwise exchange: step k sends to i+k and receives from i-k;
    scattered: those sends and receives posted at once, a round per
    ``SCATTERED_THROTTLE`` offsets; bruck: log2 rounds of about p/2 blocks."""
    if alg == "bruck":
        out, k = [], 1
        while k < p:
            moved = sum(1 for j in range(1, p) if j & k) * n
            out.append(([((i + k) % p, moved)], [((i - k) % p, moved)]))
            k <<= 1
        return out
    out = []
    for k in range(1, p):
        to, frm = (i + k) % p, (i - k) % p
        nb = per_peer[to] if per_peer is not None and len(per_peer) == p else n
        out.append(([(to, nb)], [(frm, n)]))
    if alg == "scattered":
        # MPICH counts the member itself among a round's offsets
        # (offset k is out[k - 1]; the round from offset a holds a to a + 31)
        rounds = [out[max(a - 1, 0):a + SCATTERED_THROTTLE - 1]
                  for a in range(0, p, SCATTERED_THROTTLE)]
        return [([s for step, _ in r for s in step], [x for _, step in r for x in step])
                for r in rounds]
    return out


def _reduce_scatter(alg, i, p, root, n, per_peer):
    return _ring(i, p, n / p, p - 1)


def _scan(alg, i, p, root, n, per_peer):
    """Recursive doubling: step k sends to i+2^k and receives from i-2^k."""
    out, k = [], 1
    while k < p:
        out.append(([(i + k, n)] if i + k < p else [], [(i - k, n)] if i - k >= 0 else []))
        k <<= 1
    return out


STEPS: dict[str, Callable[..., list]] = {
    "barrier": _barrier,
    "bcast": functools.partial(_from_root, grows=False),
    "scatter": functools.partial(_from_root, grows=True),
    "reduce": functools.partial(_to_root, grows=False),
    "gather": functools.partial(_to_root, grows=True),
    "allreduce": _allreduce, "allgather": _allgather, "alltoall": _alltoall,
    "reduce_scatter": _reduce_scatter, "scan": _scan, "exscan": _scan,
}


def steps(family: str, algorithm: str, i: int, p: int, root: int, n: float,
          per_peer: list | None = None) -> list:
    """The steps of member ``i`` (see the module doc).

    ``n`` is the member's contribution in bytes (alltoall: to each peer;
    reduce_scatter: the whole input); ``per_peer`` optional bytes per
    destination for alltoallv/w."""
    if p <= 1:
        return []
    if family not in STEPS:
        raise ValueError(f"no decomposition for {family}")
    return STEPS[family](algorithm, i, p, root, n, per_peer)
