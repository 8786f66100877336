"""The target machine: a platform YAML file, validated, as plain numbers.

Keys (checked against netsim/platform.schema.yaml, which describes each;
every key but ``nodes``, ``cores_per_node`` and ``network.levels`` has a default):

``name``; ``nodes``; ``cores_per_node``; ``placement``: ``block`` (ranks
fill node after node), ``cyclic`` (rank r on node r mod nodes),
``{map: FILE}`` (a text/CSV file with one node number per rank, in rank
order) or ``{random: SEED}`` (each rank on a core drawn at random);
``network.levels``: innermost first, each ``{name, span, latency,
byte_time}`` and optionally ``rendezvous_byte_time`` (seconds per byte of
messages over the eager limit; default byte_time: shared-memory MPIs
stream large messages faster than they copy small ones) where ``span``
is how many consecutive cores (numbered node after node over the whole
machine) the level joins; the last level has no span and joins
everything; optionally ``one_way``: the level's measured ping-pong curve, a list of
``[bytes, seconds]`` one-way times (``calibrate fit`` writes it):
then a message's time on the wire is read off that curve, linearly
between its sizes and with its last slope beyond them, instead of
``(bytes - 1) * byte_time``, so that two ranks reproduce the measured
curve at every size (a shared-memory MPI's is far from one straight line:
the per-byte cost falls with the size, and jumps where the protocol
changes); the curve's latency, overheads and, over the eager limit, the
rendezvous handshake the engine charges apart come off it; optionally
``stream``: the level's measured streaming curve, ``[bytes, seconds]``
per message of a window of back-to-back nonblocking sends (PLogP's gap
g(m); ``calibrate fit`` writes it): a message then holds its
sender's NIC (and, with contention, the nodes' NICs) for that time less
``network.gap`` instead of its wire time, so that a window of messages
is spaced as measured while each message still arrives one wire time
after it leaves (shared-memory MPICH streamed a window of 4 MiB messages
at 450-600 us each, one-way trips took 700-860 us at the same moment);
optionally ``warmup: {bytes, seconds, first}``: a new connection's first
``bytes`` bytes from one rank to another over the level cost ``seconds``
more in all, spread over them in proportion (MPICH over TCP moved its
first 1 MiB messages to a new peer 3-7 ms slower each than later ones at
1 Gbit/s, about 30 ms over its first 10 MiB), and its first message
``first`` more whatever its size (opening the connection: MPICH's TCP
provider connects on first use; on virtual cores of 0.05 CPU fft2d's
first Alltoall, 31 new connections a rank, took 1.7 s longer than its
third); ``calibrate fit`` writes it;
``network.overhead: {send, recv}`` (LogGP o,
seconds per message) and optional ``overhead_byte: {send, recv}`` (LogGOPS
O, seconds per byte); ``network.gap`` (g, seconds between two messages of
one NIC); ``network.eager_limit`` (bytes; larger messages use rendezvous);
``network.contention`` (true: a node's NIC serialises the messages that
leave and enter the node); ``network.topology`` (the switches between
the nodes, their links contended: ``{kind: fat_tree, leaf_nodes,
up_links}`` or ``{kind: fat_tree, down, up}`` (any depth), ``{kind:
torus, dims}`` or ``{kind: dragonfly, groups, routers,
nodes_per_router}`` with optional ``local_links``,
``global_links``, ``routing``, ``seed``, ``global_byte_time`` and
``global_latency``; a fat tree's ``level_byte_times`` and
``level_latencies``;
``hop_latency`` and ``link_byte_time`` for any;
netsim/topology.py says what each means; contention implied; the levels'
latencies and byte times stay the links'); ``network.pack_byte_time`` (seconds per byte
to pack or unpack data described by a non-contiguous derived datatype,
charged to the calling rank's CPU for the collectives the trace flags so,
on the bytes sent and received; default 0; calibrate measures it
net of what the MPI overlaps with the transfer: an Alltoallw of
subarrays against an Alltoall of the same bytes contiguous);
``network.call_overhead`` (seconds of CPU per traced MPI call, charged to
the calling rank before the call: the language binding's own cost around
MPI, e.g. mpi4py parsing a buffer argument; per call, not per message, so
that a collective or a window of nonblocking sends is charged it once per
call and the network levels keep MPI's own per-message latency; default
0: the binding's cost folded into the latency, as a Python ping-pong
measures it); ``network.copy_byte_time`` (seconds per byte of a local
memory copy: the own block that alltoall and allgather copy from the send
to the receive buffer before exchanging the rest; default 0);
``network.copy_overhead`` (seconds per such copy besides its bytes: MPICH's
local copy costs about 1 us at 8 bytes, which an allgather in place saves;
default 0);
``network.alltoall_self_limit`` (bytes; default 0): an alltoall whose
own block is at most this size sends that block to itself as a message,
charged as one message through the innermost level (its latency,
overheads and wire time, not the binding's call) instead of the local
copy: MPICH's "scattered" alltoall, its choice up to
MPIR_CVAR_ALLTOALL_MEDIUM_MSG_SIZE (32768), does so, and that message
costs like one to another core (measured: 8-32 KiB blocks 5-8 us more
than the pairwise exchange that MPICH uses above);
``network.allreduce_short_limit`` (bytes; default 2048, MPICH's): an
analytic allreduce of at most this many bytes is charged as recursive
doubling, a larger one as a reduce-scatter and an allgather
(netsim/collectives.py);
``network.collective_overhead: {family: seconds}`` (CPU time per call of a
collective family beyond its messages, e.g. MPICH's alltoall posting a
message to itself; default none); ``network.rma_overhead`` (CPU seconds
per one-sided call, transfers, Lock, Unlock and Flush, beyond the
binding's call and its messages: MPICH's own work in them, about 1 us
on this host's shared memory, which a window on the calling rank itself
pays as much as one elsewhere; default 0); ``network.probe_late_polls``
(how many MPI_Iprobe/Improbe calls report nothing for a message that has
already arrived: MPICH's first call after the arrival only moves it into
its queue, so 1 there; a loop that sleeps g between polls then notices
1.5 g after the arrival on average, not g / 2; default 0);
``network.intercomm_poll_bytes`` (bytes of a rendezvous message over an
intercommunicator that move per call its sender makes: MPICH here moves
about 8 KiB per call there, so a sender that sleeps g between its Tests
holds the message about size / this x g; default 0: no such limit);
``network.semantics``: ``detailed`` (default,
netsim/engine.py) or ``loggopsim`` (LogGOPSim's exact rules, one level,
netsim/loggops.py); ``collectives``: ``{default: analytic|<algorithm>,
<op>: <algorithm>, ...}``; ``compute_scale`` (target computation time =
host time x this factor).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import numpy as np
import yaml

from .collectives import ALGORITHMS, DEFAULT_ALGORITHM, FOR_OP
from .topology import Topology


class PlatformError(Exception):
    """A platform file that cannot describe a machine (file and key named)."""


@dataclass
class Level:
    name: str
    span: int | None          # consecutive cores joined; None = everything
    latency: float            # seconds
    byte_time: float          # seconds per byte
    rendezvous_byte_time: float | None = None   # over the eager limit; None: byte_time
    one_way: list | None = None   # measured [bytes, seconds] ping-pong curve, by size
    stream: list | None = None    # measured [bytes, seconds per message] in a window of sends
    warmup: tuple | None = None   # (bytes, seconds, first): a new connection's extra cost


@dataclass
class Platform:
    name: str
    nodes: int
    cores_per_node: int
    placement: str | list
    levels: list
    o_send: float = 0.0
    o_recv: float = 0.0
    O_send: float = 0.0
    O_recv: float = 0.0
    gap: float = 0.0
    eager_limit: int = 65536
    contention: bool = False
    # the switches between the nodes (network.topology; None: one ideal
    # fabric), lowered to links and routes by netsim/topology.py
    topology: Topology | None = None
    pack_byte_time: float = 0.0
    call_overhead: float = 0.0
    copy_byte_time: float = 0.0
    copy_overhead: float = 0.0
    alltoall_self_limit: int = 0
    allreduce_short_limit: int = 2048
    collective_overhead: dict = field(default_factory=dict)   # family -> seconds
    rma_overhead: float = 0.0
    probe_late_polls: int = 0
    intercomm_poll_bytes: int = 0
    collectives: dict = field(default_factory=lambda: {"default": "analytic"})
    compute_scale: float = 1.0
    semantics: str = "detailed"      # or "loggopsim" (netsim/loggops.py)
    source: str = ""
    _self_cost: dict = field(default_factory=dict, repr=False, compare=False)

    # ---- derived per-rank tables -------------------------------------
    def core_of(self, nranks: int) -> np.ndarray:
        """Global core number (node * cores_per_node + local core) per rank."""
        cap = self.nodes * self.cores_per_node
        if isinstance(self.placement, list):
            node = np.asarray(self.placement, dtype=np.int64)
            if len(node) < nranks:
                raise PlatformError(f"{self.source}: placement map lists {len(node)} ranks, "
                                    f"the trace has {nranks}")
            node = node[:nranks]
            if node.min() < 0 or node.max() >= self.nodes:
                raise PlatformError(f"{self.source}: placement map names node "
                                    f"{int(node.max())}, the platform has {self.nodes}")
            local = np.zeros(nranks, dtype=np.int64)
            seen: dict = {}
            for k, n in enumerate(node):
                local[k] = seen.get(int(n), 0)
                seen[int(n)] = local[k] + 1
            if max(seen.values()) > self.cores_per_node:
                raise PlatformError(f"{self.source}: placement map puts "
                                    f"{max(seen.values())} ranks on one node of "
                                    f"{self.cores_per_node} cores")
            return node * self.cores_per_node + local
        if nranks > cap:
            raise PlatformError(f"{self.source}: {nranks} ranks do not fit on {self.nodes} "
                                f"nodes x {self.cores_per_node} cores; raise 'nodes'")
        r = np.arange(nranks, dtype=np.int64)
        if self.placement == "block":
            return r
        if self.placement.startswith("random:"):
            # cores drawn without replacement from the whole machine
            rng = np.random.default_rng(int(self.placement.split(":")[1]))
            return rng.permutation(cap)[:nranks]
        # cyclic: rank r on node r mod nodes
        return (r % self.nodes) * self.cores_per_node + r // self.nodes

    def node_of(self, nranks: int) -> np.ndarray:
        return self.core_of(nranks) // self.cores_per_node

    def level_arrays(self):
        """(span, latency, byte_time) arrays, innermost first; last span = 0."""
        span = np.array([lv.span or 0 for lv in self.levels], dtype=np.int64)
        lat = np.array([lv.latency for lv in self.levels], dtype=np.float64)
        bt = np.array([lv.byte_time for lv in self.levels], dtype=np.float64)
        return span, lat, bt

    def rendezvous_byte_times(self) -> np.ndarray:
        """Per-byte time of messages over the eager limit, per level."""
        return np.array([lv.byte_time if lv.rendezvous_byte_time is None
                         else lv.rendezvous_byte_time for lv in self.levels], dtype=np.float64)

    def level_of(self, core_a: np.ndarray, core_b: np.ndarray) -> np.ndarray:
        """Innermost network level joining each pair of cores."""
        span = self.level_arrays()[0]
        lv = np.full(len(core_a), len(span) - 1, dtype=np.int64)
        for i in range(len(span) - 2, -1, -1):
            lv[core_a // span[i] == core_b // span[i]] = i
        return lv

    def beyond_curves(self, core_a: np.ndarray, core_b: np.ndarray,
                      nbytes: np.ndarray) -> list[str]:
        """One line per level whose measured curves (one-way, stream) stop
        below half the largest message between cores a and b over it (the
        schedule's messages: point-to-point and decomposed collectives';
        an analytic collective is timed by the level's fitted lines): such
        messages are timed by the curves' last slope, which a few noisy
        points at the curve's end can make far off (a quantised
        measurement's flat last step timed 1 MiB as 256 KiB)."""
        nbytes = np.asarray(nbytes, dtype=np.float64)
        lv = self.level_of(np.asarray(core_a), np.asarray(core_b))
        out = []
        for i, level in enumerate(self.levels):
            curves = [c for c in (level.one_way, level.stream) if c]
            here = nbytes[lv == i]
            if not curves or not len(here):
                continue
            reach = min(c[-1][0] for c in curves)
            largest = float(here.max())
            if largest > 2 * reach:
                asked = 1 << int(np.ceil(np.log2(largest)))
                out.append(f"level {level.name}: {int((here > reach).sum())} messages of up "
                           f"to {int(largest)} bytes, beyond its measured curves (to "
                           f"{int(reach)} bytes): timed by their last slope; measure up to "
                           f"that size (python -m calibrate measure --max-bytes {asked})")
        return out

    def wire(self, core_a: np.ndarray, core_b: np.ndarray, nbytes: np.ndarray,
             rendezvous: np.ndarray | None = None) -> np.ndarray:
        """Seconds each message (from core a to core b, of ``nbytes``) spends
        on the wire: (bytes - 1) * its level's (rendezvous) byte time, or,
        where the level has a measured ``one_way`` curve, that curve less
        what the engine charges a ping-pong trip besides the wire (the
        binding's call, both overheads, the latency and, over the eager
        limit, the request-to-send and clear-to-send trips: 2 L + o_send +
        o_recv); read linearly between the curve's sizes, with its last
        slope beyond them.  ``rendezvous``: which messages take that protocol
        (default: those over the eager limit; a synchronous send takes it
        at any size)."""
        nbytes = np.asarray(nbytes, dtype=np.float64)
        lv = self.level_of(np.asarray(core_a), np.asarray(core_b))
        rdv = nbytes > self.eager_limit if rendezvous is None else np.asarray(rendezvous, bool)
        bt = np.where(rdv, self.rendezvous_byte_times()[lv], self.level_arrays()[2][lv])
        out = np.maximum(nbytes - 1, 0) * bt
        for i, level in enumerate(self.levels):
            if not level.one_way:
                continue
            here = lv == i
            x = nbytes[here]
            trip = one_way_at(level.one_way, x)
            fixed = (self.call_overhead + self.o_send + self.o_recv + level.latency
                     + x * self.O_recv
                     + np.where(rdv[here], 2 * level.latency + self.o_send + self.o_recv,
                                0.0))
            out[here] = np.maximum(trip - fixed, 0.0)
        return out

    def occupancy(self, core_a: np.ndarray, core_b: np.ndarray, nbytes: np.ndarray,
                  wire: np.ndarray) -> np.ndarray:
        """Seconds each message holds its sender's NIC besides the gap: its
        ``wire`` time, or, where the level has a measured ``stream`` curve,
        that curve less the gap (a window of messages is then spaced as
        measured); read like the one-way curve."""
        nbytes = np.asarray(nbytes, dtype=np.float64)
        lv = self.level_of(np.asarray(core_a), np.asarray(core_b))
        out = np.array(wire, dtype=np.float64)
        for i, level in enumerate(self.levels):
            if level.stream:
                here = lv == i
                out[here] = np.maximum(one_way_at(level.stream, nbytes[here]) - self.gap, 0.0)
        return out

    def warmup_extra(self, level: np.ndarray, before: np.ndarray,
                     nbytes: np.ndarray, first=None) -> np.ndarray:
        """Seconds of warm-up each message adds: its share of its level's
        ``warmup`` seconds, for the part of its bytes that falls within the
        connection's first warm-up bytes, ``before`` being the bytes that
        connection carried before it, plus the level's ``first`` where
        ``first`` (booleans) says it is the connection's first message (0
        where the level has no warm-up)."""
        level = np.asarray(level)
        before = np.asarray(before, dtype=np.float64)
        after = before + np.asarray(nbytes, dtype=np.float64)
        out = np.zeros(len(level))
        for i, lv in enumerate(self.levels):
            if lv.warmup:
                w, secs, opening = lv.warmup
                here = level == i
                out[here] = secs * (np.minimum(after[here], w)
                                    - np.minimum(before[here], w)) / w
                if first is not None and opening:
                    out[here & np.asarray(first, bool)] += opening
        return out

    def self_message(self, nbytes: float) -> float:
        """Seconds a message of ``nbytes`` to oneself costs (innermost
        level: latency, both overheads, wire; no binding call): the whole
        measured trip, with no handshake modelled apart at any size."""
        t = self._self_cost.get(nbytes)
        if t is None:
            lv = self.levels[0]
            w = self.wire(np.zeros(1, np.int64), np.zeros(1, np.int64), np.array([nbytes]),
                          rendezvous=np.zeros(1, bool))[0]
            t = self._self_cost[nbytes] = (lv.latency + self.o_send + self.o_recv
                                           + nbytes * self.O_recv + w)
        return t

    def algorithm(self, op: str) -> str:
        return self.collectives.get(op, self.collectives.get("default", DEFAULT_ALGORITHM))

    def describe(self) -> dict:
        """A JSON-able summary (for predictions and the report)."""
        return {"name": self.name, "source": self.source, "nodes": self.nodes,
                "cores_per_node": self.cores_per_node,
                "placement": self.placement if isinstance(self.placement, str) else "map",
                "levels": [vars(lv) for lv in self.levels],
                "overhead": {"send": self.o_send, "recv": self.o_recv},
                "overhead_byte": {"send": self.O_send, "recv": self.O_recv},
                "gap": self.gap, "eager_limit": self.eager_limit,
                "contention": self.contention,
                "topology": self.topology.describe() if self.topology else None,
                "pack_byte_time": self.pack_byte_time,
                "call_overhead": self.call_overhead, "copy_byte_time": self.copy_byte_time,
                "copy_overhead": self.copy_overhead,
                "alltoall_self_limit": self.alltoall_self_limit,
                "allreduce_short_limit": self.allreduce_short_limit,
                "collective_overhead": self.collective_overhead,
                "rma_overhead": self.rma_overhead,
                "probe_late_polls": self.probe_late_polls,
                "intercomm_poll_bytes": self.intercomm_poll_bytes, "semantics": self.semantics,
                "collectives": self.collectives,
                "compute_scale": self.compute_scale}


def one_way_at(curve, nbytes) -> np.ndarray:
    """Seconds of a measured one-way curve ([bytes, seconds] pairs, sizes
    increasing) at ``nbytes``: linear between its sizes, with its last
    slope (never negative) beyond them."""
    n = np.array([p[0] for p in curve], dtype=np.float64)
    t = np.array([p[1] for p in curve], dtype=np.float64)
    x = np.asarray(nbytes, dtype=np.float64)
    slope = max((t[-1] - t[-2]) / (n[-1] - n[-2]), 0.0)
    return np.where(x > n[-1], t[-1] + (x - n[-1]) * slope, np.interp(x, n, t))


SCHEMA_PATH = os.path.join(os.path.dirname(__file__), "platform.schema.yaml")
_VALIDATOR = None


def _validator():
    global _VALIDATOR
    if _VALIDATOR is None:
        import jsonschema
        with open(SCHEMA_PATH) as f:
            _VALIDATOR = jsonschema.Draft202012Validator(yaml.safe_load(f))
    return _VALIDATOR


def schema_maximum(*keys: str):
    """The largest value the schema takes for a key, named by its path
    (``"network", "probe_late_polls"``): for writers that must stay inside it."""
    node = _validator().schema
    for k in keys:
        node = node["properties"][k]
    return node["maximum"]


def _dotted(path) -> str:
    """network.levels[1].latency from a JSON path."""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _message(e) -> str:
    """One line naming the key and what it must be, from a schema error."""
    path = list(e.absolute_path)
    for i, p in enumerate(path):          # anything inside a measured curve
        if p in ("one_way", "stream") and i >= 2 and path[i - 2] == "levels":
            return (f"{_dotted(path[:i])}: '{p}' must be a list of at least two "
                    f"[bytes, seconds] pairs")
    if path and path[-1] == "levels" and e.validator in ("minItems", "type"):
        return "network.levels must be a non-empty list, innermost first"
    if path and path[-1] == "placement":
        return (f"placement must be block, cyclic, {{map: FILE}} or {{random: SEED}}, "
                f"not {e.instance!r}")
    where = _dotted(path[:-1]) if path and isinstance(path[-1], str) else _dotted(path)
    key = f"'{path[-1]}'" if path and isinstance(path[-1], str) else "it"
    prefix = f"{where}: " if where else ""
    v = e.instance
    if e.validator == "additionalProperties":
        known = sorted(e.schema.get("properties", {}))
        extra = sorted(set(v) - set(known))
        return f"{_dotted(path) or 'top level'}: unknown key(s) {extra}; known: {known}"
    if e.validator == "required":
        return f"{_dotted(path) or 'top level'}: missing key {e.message.split()[0]}"
    if e.validator == "minimum":
        return f"{prefix}{key} must be >= {e.validator_value}, not {v!r}"
    if e.validator == "minItems" and isinstance(v, list):
        return f"{prefix}{key} must list at least {e.validator_value}, not {v!r}"
    if e.validator == "exclusiveMinimum":
        return f"{prefix}{key} must be > {e.validator_value}, not {v!r}"
    if e.validator == "type":
        want = {"integer": "a whole number", "number": "a number", "boolean": "true or false",
                "object": "a mapping", "array": "a list", "string": "text"}
        types = e.validator_value if isinstance(e.validator_value, list) else [e.validator_value]
        said = " or ".join(want.get(t, "nothing" if t == "null" else t) for t in types)
        return f"{prefix}{key} must be {said}, not {v!r}"
    if e.validator == "enum":
        return f"{prefix}{key} must be one of {', '.join(map(str, e.validator_value))}, " \
               f"not {v!r}"
    return f"{_dotted(path)}: {e.message}"


def _non_finite(x, path=()):
    """The path of the first NaN or infinite number in a parsed file, or None."""
    if isinstance(x, float) and not np.isfinite(x):
        return path
    items = x.items() if isinstance(x, dict) else enumerate(x) if isinstance(x, list) else ()
    for k, v in items:
        found = _non_finite(v, path + (k,))
        if found is not None:
            return found
    return None


def _check_levels(levels: list, source: str) -> None:
    """Spans grow outwards, only the last level omits one; curves by size."""
    prev = 0
    for i, lv in enumerate(levels):
        where = f"{source}: network.levels[{i}]"
        span = lv.get("span")
        if span is None and i < len(levels) - 1:
            raise PlatformError(f"{where}: only the last (outermost) level may omit 'span'")
        if span is not None and span <= prev:
            raise PlatformError(f"{where}: span {span} must exceed the inner level's {prev}")
        prev = span if span is not None else prev
        for key in ("one_way", "stream"):
            sizes = [n for n, _ in lv.get(key, [])]
            if sizes != sorted(set(sizes)):
                raise PlatformError(f"{where}: '{key}' sizes must increase, got {sizes}")


def _check_models(d: dict, source: str) -> None:
    """Collective algorithms and families the simulator knows; loggopsim's one level."""
    for op, alg in (d.get("collectives") or {}).items():
        if alg != "analytic" and alg not in ALGORITHMS:
            raise PlatformError(f"{source}: collectives.{op}: unknown algorithm {alg!r}; "
                                f"choose analytic or one of {sorted(ALGORITHMS)}")
    for fam in d["network"].get("collective_overhead") or {}:
        if fam not in FOR_OP:
            raise PlatformError(f"{source}: network.collective_overhead.{fam}: not a "
                                f"collective family; choose from {sorted(FOR_OP)}")
    levels = d["network"]["levels"]
    if d["network"].get("semantics") == "loggopsim":
        if len(levels) != 1:
            raise PlatformError(f"{source}: loggopsim semantics take one network level (L, G)")
        if "one_way" in levels[0] or "stream" in levels[0] or "warmup" in levels[0]:
            raise PlatformError(f"{source}: loggopsim semantics take one G: drop the level's "
                                f"one_way and stream curves and its warmup")


def _check(d, source: str, schema: bool = True) -> None:
    """The schema (netsim/platform.schema.yaml) and the rules it cannot say."""
    if not isinstance(d, dict):
        raise PlatformError(f"{source}: a platform file must be a mapping of keys")
    errors = list(_validator().iter_errors(d)) if schema else []
    if errors:
        import jsonschema
        raise PlatformError(f"{source}: {_message(jsonschema.exceptions.best_match(errors))}")
    bad = _non_finite(d)
    if bad is not None:
        raise PlatformError(f"{source}: {_dotted(bad)} must be a finite number")
    _check_levels(d["network"]["levels"], source)
    _check_models(d, source)
    if d["network"].get("topology"):
        _check_topology(d["network"]["topology"], int(d["nodes"]), source)


# what each kind of topology needs, and takes besides hop_latency
_TOPOLOGY_KEYS = {"fat_tree": (("leaf_nodes", "up_links"),
                              ("level_byte_times", "level_latencies")),
                  "torus": (("dims",), ()),
                  "dragonfly": (("groups", "routers", "nodes_per_router"),
                                ("local_links", "global_links", "routing", "seed",
                                 "global_byte_time", "global_latency"))}
# what every kind takes
_TOPOLOGY_ANY = ["hop_latency", "link_byte_time", "sharing", "reach"]


def _check_topology(t: dict, nodes: int, source: str) -> None:
    """A kind's own keys, no other kind's, and room for every node."""
    where = f"{source}: network.topology"
    need, may = _TOPOLOGY_KEYS[t["kind"]]
    if t["kind"] == "fat_tree" and ("down" in t or "up" in t):
        need = ("down", "up")                   # a tree of any depth
        if len(t.get("up", [])) != len(t.get("down", [])) - 1:
            raise PlatformError(f"{where}: 'up' gives the parents of each switch level but "
                                f"the top: {len(t.get('down', [])) - 1} numbers for "
                                f"{len(t.get('down', []))} levels of 'down'")
    for k in need:
        if k not in t:
            raise PlatformError(f"{where}: a {t['kind']} needs '{k}'")
    for key in ("level_byte_times", "level_latencies"):
        if t["kind"] == "fat_tree" and key in t:
            levels = len(t["down"]) if "down" in t else 2
            if len(t[key]) > levels - 1:
                raise PlatformError(f"{where}: {key} lists {len(t[key])} link levels; a "
                                    f"{levels}-level tree has {levels - 1} above its leaves")
    foreign = sorted(set(t) - set(need) - set(may) - {"kind", *_TOPOLOGY_ANY})
    if foreign:
        raise PlatformError(f"{where}: {foreign} do not apply to a {t['kind']}; it takes "
                            f"{sorted(need + may) + _TOPOLOGY_ANY}")
    room = Topology.from_dict(t).capacity()
    if room is not None and room < nodes:
        raise PlatformError(f"{where}: the {t['kind']} holds {room} nodes, the platform has "
                            f"{nodes}: enlarge it or lower 'nodes'")


def _placement(place, source: str):
    """``block``, ``cyclic``, ``{random: SEED}`` or the node of every rank
    read from a map file."""
    if not isinstance(place, dict):
        return place
    if "random" in place:
        return f"random:{int(place['random'])}"
    path = place["map"]
    if not os.path.isabs(path):
        path = os.path.join(os.path.dirname(os.path.abspath(source)), path)
    try:
        with open(path) as f:
            return [int(x) for x in f.read().replace(",", " ").split()]
    except (OSError, ValueError) as e:
        raise PlatformError(f"{source}: placement map {path}: {e}") from None


def _curve(points):
    return [(int(n), float(t)) for n, t in points] if points is not None else None


def from_dict(d: dict, source: str = "<dict>", schema: bool = True) -> Platform:
    """Check a platform description (the parsed YAML) and turn it into numbers.
    ``schema=False`` skips the schema (and loading its validator, a tenth
    of a second of start-up) for a description this code built itself
    from numbers it checked, such as ``--loggops``."""
    _check(d, source, schema)
    net = d["network"]
    last = len(net["levels"]) - 1
    levels = [Level(str(lv.get("name", f"level{i}")), None if i == last else int(lv["span"]),
                    float(lv["latency"]), float(lv["byte_time"]),
                    float(lv["rendezvous_byte_time"]) if "rendezvous_byte_time" in lv else None,
                    _curve(lv.get("one_way")), _curve(lv.get("stream")),
                    (float(lv["warmup"]["bytes"]), float(lv["warmup"]["seconds"]),
                     float(lv["warmup"].get("first", 0.0)))
                    if lv.get("warmup") else None)
              for i, lv in enumerate(net["levels"])]
    ov = net.get("overhead") or {}
    ob = net.get("overhead_byte") or {}
    return Platform(
        name=str(d.get("name", os.path.splitext(os.path.basename(source))[0])),
        nodes=int(d["nodes"]), cores_per_node=int(d["cores_per_node"]),
        placement=_placement(d.get("placement", "block"), source), levels=levels,
        o_send=float(ov.get("send", 0.0)), o_recv=float(ov.get("recv", 0.0)),
        O_send=float(ob.get("send", 0.0)), O_recv=float(ob.get("recv", 0.0)),
        gap=float(net.get("gap", 0.0)), eager_limit=int(net.get("eager_limit", 65536)),
        # a topology's links are contended by definition
        contention=bool(net.get("contention", False) or net.get("topology")),
        topology=Topology.from_dict(net["topology"]) if net.get("topology") else None,
        collectives=dict(d.get("collectives") or {"default": "analytic"}),
        pack_byte_time=float(net.get("pack_byte_time", 0.0)),
        call_overhead=float(net.get("call_overhead", 0.0)),
        copy_byte_time=float(net.get("copy_byte_time", 0.0)),
        copy_overhead=float(net.get("copy_overhead", 0.0)),
        alltoall_self_limit=int(net.get("alltoall_self_limit", 0)),
        allreduce_short_limit=int(net.get("allreduce_short_limit", 2048)),
        collective_overhead={k: float(v) for k, v in
                             (net.get("collective_overhead") or {}).items()},
        rma_overhead=float(net.get("rma_overhead", 0.0)),
        probe_late_polls=int(net.get("probe_late_polls", 0)),
        intercomm_poll_bytes=int(net.get("intercomm_poll_bytes", 0)),
        compute_scale=float(d.get("compute_scale", 1.0)),
        semantics=net.get("semantics", "detailed"), source=source)


class _Loader(yaml.SafeLoader):
    """YAML that reads 6e-9 as a number (YAML 1.1 wants a dot: 6.0e-9), and
    refuses a key given twice in one mapping (YAML keeps the last without
    a word: a second ``nodes: 3`` below ``nodes: 256`` went unnoticed)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping", node.start_mark,
                    f"the key {key!r} is given twice", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                                |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                                |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                                |[-+]?\.(?:inf|Inf|INF)
                                |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."))


def load_platform(path: str) -> Platform:
    """Read and validate a platform YAML file."""
    try:
        with open(path) as f:
            d = yaml.load(f, Loader=_Loader)
    except OSError as e:
        raise PlatformError(f"{path}: cannot read platform file: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise PlatformError(f"{path}: not a text file ({e.reason})") from None
    except yaml.YAMLError as e:
        raise PlatformError(f"{path}: not valid YAML: {e}") from None
    return from_dict(d, path)
