"""The switches between the nodes: a topology lowered to links and routes.

A platform's ``network.topology`` (netsim/platform.py) names one of three
kinds.  Each is lowered once per run to numbered one-way links and, for
every ordered pair of nodes that exchanges a message, the route: the
links the message crosses in order between leaving its node's NIC and
entering the destination's.  The engine (netsim/engine.py) queues each
message on every link of its route; the NICs stay the engine's own
(``network.contention``).

* ``fat_tree`` (``leaf_nodes`` D, ``up_links`` U): a two-level tree, D
  nodes under each leaf switch, each leaf with one link up to each of U
  spines (U < D tapers it D:U).  Between leaves: the leaf's up link to
  spine ``destination node mod U``, then that spine's down link to the
  destination's leaf.  Under one leaf: no link but the NICs.  Deeper
  trees: ``down`` [m1, ..., mh] (nodes per leaf, then children per switch
  at each level above) and ``up`` [w2, ..., wh] (parents of each switch
  of levels 1 ... h-1), an extended generalised fat tree XGFT(h; m; 1, w)
  as SimGrid's FAT_TREE builds it (a node has one leaf; two levels:
  ``down: [D, leaves], up: [U]``).  A message climbs to the lowest level
  whose subtree holds both ends, at level l taking parent (destination
  / (w1 ... w(l-1))) mod wl, and comes down the one way there is.
* ``torus`` (``dims`` [X, Y, ...]): node n at coordinates
  (n mod X, n / X mod Y, ...), joined to its two neighbours in every
  dimension by one link each way.  Dimension-order routing: all of x
  first, then y, ...; in each dimension the shorter way round, the
  positive way when both are as short.
* ``dragonfly`` (``groups`` G, ``routers`` R per group, ``nodes_per_router``
  N; ``local_links`` and ``global_links``, the parallel links joining two
  routers of a group and two groups, default 1): node n on router
  n / N, routers numbered group after group; the routers of a group all
  joined to each other; every pair of groups joined by its global links,
  which group g keeps on router (h mod R) for the link to group h (as
  SimGrid's DRAGONFLY cluster does, with R >= G).  Minimal routing: a local link to the
  router holding the global link, the global link, a local link to the
  destination's router (each only where needed).  ``routing: valiant``
  goes through an intermediate group instead (minimal to it, then minimal
  to the destination), drawn per pair of nodes from ``seed``: it spreads
  a group-to-group burst over many global links at the cost of two more
  hops.

Parallel links (U spines, local and global lanes) are chosen by the
destination node, modulo their number: static routing, like a switch's
destination-based tables.  ``hop_latency`` (seconds, default 0) is added
per link crossed, on top of the network level's latency, or a link's own
latency where given: a fat tree's ``level_latencies`` [l1, ...] for the
links from level 1 (the leaves) up, level 2 up, ..., a dragonfly's
``global_latency`` for its global links (the long cables between
groups);
``link_byte_time`` (seconds per byte, default: the message's network
level's) is the links' own speed, a dragonfly's ``global_byte_time``
its global links', a fat tree's ``level_byte_times`` [b1, ...] those of
the links from level 1 (the leaves) up, level 2 up, ... (0: the
default): a message holds a link that much longer (or shorter) than its
NIC, and is that much later through a slower one.
``sharing`` says how messages share the links: ``queues`` (the default:
each link serves them in the order they reach it), ``flows`` (max-min
fair rates of every flow in flight, netsim/flows.py) or ``rtt_flows``
(those rates in inverse proportion to each route's latency, as TCP's).
With flows, ``reach`` says how far, in links, a flow that starts or ends
moves the others' rates (default 2: the flows on its links, and those on
theirs); 0 solves again every flow linked to it however far (exact
max-min, slow at thousands of ranks; netsim/flows.py says why).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# flows solved again around a start or end, in links (netsim/flows.py)
REACH = 2


@dataclass
class Topology:
    """One topology's parameters (``network.topology``, checked by the schema)."""
    kind: str
    leaf_nodes: int = 0               # fat_tree, two levels
    up_links: int = 1
    down: list = field(default_factory=list)     # fat_tree, any depth
    up: list = field(default_factory=list)
    dims: list = field(default_factory=list)     # torus
    groups: int = 0                   # dragonfly
    routers: int = 0
    nodes_per_router: int = 0
    local_links: int = 1
    global_links: int = 1
    routing: str = "minimal"
    seed: int = 0
    hop_latency: float = 0.0
    link_byte_time: float = 0.0       # 0: as the message's network level
    level_byte_times: list = field(default_factory=list)   # fat_tree, per level above leaves
    level_latencies: list = field(default_factory=list)    # fat_tree, per level above leaves
    global_latency: float | None = None   # dragonfly's global links (None: hop_latency)
    global_byte_time: float = 0.0     # dragonfly's global links (0: link_byte_time)
    sharing: str = "queues"           # or "flows": max-min sharing (netsim/flows.py)
    reach: int = REACH                # flows: how far, in links, one change moves rates

    @classmethod
    def from_dict(cls, d: dict) -> Topology:
        keys = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        t = cls(**keys)
        t.dims = [int(x) for x in t.dims]
        t.down = [int(x) for x in t.down]
        t.up = [int(x) for x in t.up]
        t.level_byte_times = [float(x) for x in t.level_byte_times]
        t.level_latencies = [float(x) for x in t.level_latencies]
        return t

    def describe(self) -> dict:
        """The parameters that mean something for this kind (for the report)."""
        tree = (("down", "up") if self.down else ("leaf_nodes", "up_links")) + tuple(
            k for k in ("level_byte_times", "level_latencies") if getattr(self, k))
        own = {"fat_tree": tree, "torus": ("dims",),
               "dragonfly": ("groups", "routers", "nodes_per_router", "local_links",
                             "global_links", "routing", "seed")}[self.kind]
        return {"kind": self.kind, **{k: getattr(self, k) for k in own},
                "hop_latency": self.hop_latency, "link_byte_time": self.link_byte_time,
                "sharing": self.sharing,
                **({"reach": self.reach} if self.sharing != "queues" else {}),
                **({"global_byte_time": self.global_byte_time} if self.kind == "dragonfly"
                   else {}),
                **({"global_latency": self.global_latency}
                   if self.kind == "dragonfly" and self.global_latency is not None else {})}

    def latencies(self, nnodes: int) -> np.ndarray:
        """Seconds of latency of each link: ``hop_latency``, or the link's
        level's (fat tree) or the global links' (dragonfly) where given."""
        return self._per_link(self.hop_latency, self.global_latency, self.level_latencies,
                              nnodes)

    def byte_times(self, nnodes: int) -> np.ndarray:
        """Seconds per byte of each link (0: as the message's network level)."""
        return self._per_link(self.link_byte_time, self.global_byte_time or None,
                              self.level_byte_times, nnodes)

    def _per_link(self, default: float, global_links: float | None, levels: list,
                  nnodes: int) -> np.ndarray:
        """One value per link: ``default``, a dragonfly's global links'
        (``global_links``, None: the default) and a fat tree's per level of
        links from the leaves up (``levels``, the levels not listed: the
        default)."""
        out = np.full(self.nlinks(nnodes), float(default))
        if self.kind == "dragonfly" and global_links is not None:
            out[self.groups * self.routers * self.routers * self.local_links:] = global_links
        if self.kind == "fat_tree" and levels:
            m, _, _, first, n = self._tree_offsets(nnodes)
            for lv, x in enumerate(levels, start=1):
                out[first[lv]:first[lv + 1] if lv + 1 < len(m) else n] = x
        return out

    def capacity(self) -> int | None:
        """How many nodes the topology holds (None: any number)."""
        if self.kind == "torus":
            return int(np.prod(self.dims))
        if self.kind == "dragonfly":
            return self.groups * self.routers * self.nodes_per_router
        if self.down:
            return int(np.prod(self.down))
        return None

    def tree(self, nnodes: int) -> tuple[list, list]:
        """A fat tree as XGFT radices: children per element at each level
        (m1 ... mh) and parents (w0 = 1 for a node, w1 ... w(h-1))."""
        if self.down:
            return list(self.down), [1] + list(self.up)
        return [self.leaf_nodes, _ceil(nnodes, self.leaf_nodes)], [1, self.up_links]

    def _tree_offsets(self, nnodes: int):
        """Per level l >= 1 of a fat tree, how many elements it has and
        the first number of the links from them to their parents."""
        m, w = self.tree(nnodes)
        h = len(m)
        count = [int(np.prod(w[:l]) * np.prod(m[l:])) for l in range(h + 1)]
        first, n = [0] * (h + 1), 0
        for l in range(1, h):
            first[l] = n
            n += 2 * count[l] * w[l]
        return m, w, count, first, n

    # ---- links ------------------------------------------------------
    def nlinks(self, nnodes: int) -> int:
        """How many one-way links the topology has for ``nnodes`` nodes."""
        if self.kind == "fat_tree":
            return self._tree_offsets(nnodes)[4]
        if self.kind == "torus":
            return 2 * len(self.dims) * int(np.prod(self.dims))
        g, r = self.groups, self.routers
        return g * r * r * self.local_links + g * g * self.global_links

    def link_names(self, ids: np.ndarray, nnodes: int) -> list[str]:
        """A name for each link number, as the report shows it."""
        out = []
        if self.kind == "fat_tree":
            m, w, _, first, _ = self._tree_offsets(nnodes)
        for i in map(int, ids):
            if self.kind == "fat_tree":
                level = max(lv for lv in range(1, len(m)) if first[lv] <= i)
                pair, way = divmod(i - first[level], 2)
                child, choice = divmod(pair, w[level])
                parent = _parent_position(child, choice, level, m, w)
                below = f"{_switch(level, len(m))} {child}"
                above = f"{_switch(level + 1, len(m))} {parent}"
                out.append(f"{below} up to {above}" if way == 0 else f"{above} down to {below}")
            elif self.kind == "torus":
                node, rest = divmod(i, 2 * len(self.dims))
                dim, way = divmod(rest, 2)
                axis = "xyzuvw"[dim] if dim < 6 else f"d{dim}"
                out.append(f"node {node} {'-' if way else '+'}{axis}")
            else:
                local = self.groups * self.routers * self.routers * self.local_links
                if i < local:
                    pair, lane = divmod(i, self.local_links)
                    g, rest = divmod(pair, self.routers * self.routers)
                    a, b = divmod(rest, self.routers)
                    out.append(f"group {g} router {a} to {b}"
                               + (f" (lane {lane})" if self.local_links > 1 else ""))
                else:
                    pair, lane = divmod(i - local, self.global_links)
                    a, b = divmod(pair, self.groups)
                    out.append(f"global group {a} to {b}"
                               + (f" (lane {lane})" if self.global_links > 1 else ""))
        return out

    # ---- routes -----------------------------------------------------
    def routes(self, src: np.ndarray, dst: np.ndarray, nnodes: int):
        """Routes between nodes ``src[i]`` and ``dst[i]`` (distinct pairs):
        (ptr, links), pair i crossing ``links[ptr[i]:ptr[i + 1]]`` in order.
        Each kind gives a row of link numbers per pair, in route order with
        -1 where a hop is not needed; the mask below drops those."""
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        hops = {"fat_tree": self._fat_tree, "torus": self._torus,
                "dragonfly": self._dragonfly}[self.kind](src, dst, nnodes)
        used = hops >= 0
        ptr = np.zeros(len(src) + 1, dtype=np.int64)
        np.cumsum(used.sum(axis=1), out=ptr[1:])
        return ptr, hops[used]

    def _fat_tree(self, src, dst, nnodes):
        m, w, _, first, _ = self._tree_offsets(nnodes)
        h = len(m)
        # labels: a node's digits in radices m1 ... mh, least significant first
        a = np.stack([(src // int(np.prod(m[:j]))) % m[j] for j in range(h)], axis=1)
        b = np.stack([(dst // int(np.prod(m[:j]))) % m[j] for j in range(h)], axis=1)
        # the lowest level whose subtree holds both: above the highest digit
        # that differs (1: under one leaf, no link)
        differ = a != b
        top = np.where(differ.any(axis=1), h - np.argmax(differ[:, ::-1], axis=1), 1)
        out = np.full((len(src), 2 * (h - 1)), -1, dtype=np.int64)
        cur = a.copy()
        cur[:, 0] = 0                                  # the leaf's own label
        for lv in range(1, h):                         # from level lv to lv + 1
            go = top > lv
            choice = (dst // int(np.prod(w[:lv]))) % w[lv]
            pos = _position(cur, lv, m, w)
            out[go, lv - 1] = (first[lv] + 2 * (pos * w[lv] + choice))[go]
            cur[go, lv] = choice[go]
        for lv in range(h - 1, 0, -1):                 # from level lv + 1 down to lv
            go = top > lv
            choice = cur[:, lv].copy()
            cur[go, lv] = b[go, lv]
            pos = _position(cur, lv, m, w)
            out[go, 2 * (h - 1) - lv] = (first[lv] + 2 * (pos * w[lv] + choice) + 1)[go]
        return out

    def _torus(self, src, dst, nnodes):
        dims = self.dims
        nd = len(dims)
        out = np.full((len(src), sum(x // 2 for x in dims)), -1, dtype=np.int64)
        cur = src.copy()
        col = 0
        stride = 1
        for j, size in enumerate(dims):
            here = (cur // stride) % size
            there = (dst // stride) % size
            ahead = (there - here) % size
            up = ahead <= size // 2                  # the shorter way; a tie goes up
            steps = np.where(up, ahead, size - ahead)
            for k in range(size // 2):
                go = steps > k
                pos = (cur // stride) % size
                way = np.where(up, 0, 1)
                out[go, col] = ((cur * nd + j) * 2 + way)[go]
                nxt = np.where(up, (pos + 1) % size, (pos - 1) % size)
                cur = np.where(go, cur + (nxt - pos) * stride, cur)
                col += 1
            stride *= size
        return out

    def _dragonfly(self, src, dst, nnodes):
        g_, r_, n_ = self.groups, self.routers, self.nodes_per_router
        router_a, router_b = src // n_, dst // n_
        lane_l = dst % self.local_links
        lane_g = dst % self.global_links
        local0 = g_ * r_ * r_ * self.local_links

        def local(g, a, b):
            """The local link from router a to router b of group g (-1 where a == b)."""
            return np.where(a == b, -1, ((g * r_ + a) * r_ + b) * self.local_links + lane_l)

        def glob(a, b):
            return local0 + (a * g_ + b) * self.global_links + lane_g

        def gateway(other):
            """The router of any group that holds its global link to group ``other``."""
            return other % r_

        ga, gb = router_a // r_, router_b // r_
        ra, rb = router_a % r_, router_b % r_
        out = np.full((len(src), 5), -1, dtype=np.int64)
        same = ga == gb
        out[same, 0] = local(ga, ra, rb)[same]
        far = ~same
        if self.routing == "valiant" and g_ > 2:
            # an intermediate group other than both ends, drawn per pair
            mix = (src * 0x9E3779B1 + dst * 0x85EBCA77 + self.seed * 0xC2B2AE3D) % (2 ** 31)
            gi = mix % (g_ - 2)
            lo, hi = np.minimum(ga, gb), np.maximum(ga, gb)
            gi = gi + (gi >= lo)
            gi = gi + (gi >= hi)
            cols = [local(ga, ra, gateway(gi)), glob(ga, gi),
                    local(gi, gateway(ga), gateway(gb)), glob(gi, gb),
                    local(gb, gateway(gi), rb)]
        else:
            cols = [local(ga, ra, gateway(gb)), glob(ga, gb),
                    local(gb, gateway(ga), rb)]
        for c, links in enumerate(cols):
            out[far, c] = links[far]
        return out


def _ceil(a: int, b: int) -> int:
    return (a + b - 1) // b


def _position(label, level: int, m: list, w: list):
    """A fat-tree element's number within its level from its label
    (digits: parent choices below ``level``, child digits from it on)."""
    pos = np.zeros(len(label), dtype=np.int64)
    scale = 1
    for j in range(len(m)):
        pos += label[:, j] * scale
        scale *= w[j] if j < level else m[j]
    return pos


def _parent_position(child: int, choice: int, level: int, m: list, w: list) -> int:
    """The number of the parent ``choice`` of element ``child`` of a level."""
    digits, rest = [], child
    for j in range(len(m)):
        r = w[j] if j < level else m[j]
        digits.append(rest % r)
        rest //= r
    digits[level] = choice
    return int(_position(np.array([digits]), level + 1, m, w)[0])


def _switch(level: int, levels: int) -> str:
    return "leaf" if level == 1 else "spine" if level == levels else f"level-{level} switch"


def lower(topology: Topology, node_a: np.ndarray, node_b: np.ndarray, nnodes: int):
    """Per message between nodes ``node_a`` and ``node_b``: its route number
    (-1: none, the same node or no link between), with the routes' links as
    compressed rows (ptr, links) over the distinct pairs only, so that an
    all-to-all's many messages between two nodes share one route."""
    node_a = np.asarray(node_a, dtype=np.int64)
    node_b = np.asarray(node_b, dtype=np.int64)
    route = np.full(len(node_a), -1, dtype=np.int64)
    apart = node_a != node_b
    if not apart.any():
        return route, np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    pairs, inverse = np.unique(node_a[apart] * nnodes + node_b[apart], return_inverse=True)
    ptr, links = topology.routes(pairs // nnodes, pairs % nnodes, nnodes)
    empty = ptr[1:] == ptr[:-1]
    route[apart] = np.where(empty[inverse], -1, inverse)
    return route, ptr, links
