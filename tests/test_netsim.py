"""The simulator: hand-computed cases, collectives, contention, deadlock,
GOAL round trips, and predictions on real traces of the examples."""
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import APPS, EXAMPLES, ROOT, host_lines, run, trace
from schedules import US, collective_schedule, platform

from interop.goal import read_goal, write_goal
from netsim import Builder, PlatformError, ScheduleError, from_dict, load_platform
from netsim import run as simulate
from netsim.engine import CALC, RECV, SEND
from netsim.schedule import Schedule


def pingpong(a, b, size, nranks=4):
    B = Builder(nranks)
    lo, hi = sorted((a, b))
    # ranks' ops must be contiguous: add the lower rank's first
    for r in (lo, hi):
        if r == a:
            s = B.op(SEND, a, [], peer=b, size=size, tag=0)
            B.op(RECV, a, [(s, False)], peer=b, size=size, tag=0)
        else:
            x = B.op(RECV, b, [], peer=a, size=size, tag=0)
            B.op(SEND, b, [(x, False)], peer=a, size=size, tag=0)
    return B.done()


@pytest.mark.parametrize("a,b,L,G", [(0, 1, 1 * US, 1e-9), (0, 2, 7 * US, 4e-9)])
def test_eager_pingpong_per_level(a, b, L, G):
    o, n = 0.5 * US, 100
    res = simulate(pingpong(a, b, n), platform())
    # each way: send overhead, latency, (n-1) bytes, receive overhead
    assert res.predicted_time == pytest.approx(2 * (o + L + (n - 1) * G + o), rel=1e-12)


def test_rendezvous_adds_the_handshake():
    o, L, G, n = 0.5 * US, 7 * US, 4e-9, 5000
    res = simulate(pingpong(0, 2, n), platform())
    one_way = (o + L) + (o + L) + (o + L + (n - 1) * G) + o   # RTS, CTS, data, receive
    assert res.predicted_time == pytest.approx(2 * one_way, rel=1e-12)
    eager = simulate(pingpong(0, 2, n), platform(network={"eager_limit": 10000}))
    assert eager.predicted_time == pytest.approx(2 * (o + L + (n - 1) * G + o), rel=1e-12)


@pytest.mark.parametrize("late", [0.0, 50 * US])
def test_a_small_synchronous_send_moves_its_data_eagerly_and_waits_for_the_ack(late):
    """A synchronous send up to the eager limit (schwimmbad's workers
    return results so, 117 bytes) travels as an eager message, and
    completes when the receiver's acknowledgement of the match comes back
    (MPICH's eager sync protocol), not after a rendezvous' handshake:
    netsim's three latencies on its receive put emcee's pool 29 % high."""
    o, L, G, n = 0.5 * US, 7 * US, 4e-9, 100
    B = Builder(4)
    send = B.op(SEND, 0, [], peer=2, size=n, tag=0, sync=True)
    work = B.op(CALC, 2, [], dur=late)
    recv = B.op(RECV, 2, [(work, False)], peer=0, size=n, tag=0)
    res = simulate(B.done(), platform())
    arrived = o + L + (n - 1) * G
    matched = max(arrived, late)
    assert res.end[recv] == pytest.approx(matched + o, rel=1e-12)
    assert res.end[send] == pytest.approx(matched + L, rel=1e-12)
    # over the eager limit, the handshake as before
    B = Builder(4)
    send = B.op(SEND, 0, [], peer=2, size=5000, tag=0, sync=True)
    recv = B.op(RECV, 2, [], peer=0, size=5000, tag=0)
    res = simulate(B.done(), platform())
    assert res.end[recv] == pytest.approx((o + L) * 3 + 4999 * G + o, rel=1e-12)


def test_rendezvous_byte_time_applies_over_the_eager_limit():
    o, L, G, Gr = 0.5 * US, 7 * US, 4e-9, 1e-9
    levels = [{"name": "node", "span": 2, "latency": 1 * US, "byte_time": 1e-9},
              {"name": "net", "latency": L, "byte_time": G, "rendezvous_byte_time": Gr}]
    plat = platform(network={"levels": levels})
    big, small = 5000, 800
    one_way = (o + L) + (o + L) + (o + L + (big - 1) * Gr) + o
    assert simulate(pingpong(0, 2, big), plat).predicted_time == pytest.approx(2 * one_way,
                                                                               rel=1e-12)
    eager = 2 * (o + L + (small - 1) * G + o)
    assert simulate(pingpong(0, 2, small), plat).predicted_time == pytest.approx(eager, rel=1e-12)
    with pytest.raises(PlatformError, match="unknown key"):
        platform(network={"levels": [dict(levels[1], rendezvous_bytetime=1e-9)]})


def test_a_measured_one_way_curve_is_followed_between_and_beyond_its_sizes():
    """A level's one_way curve (calibrate writes the measured
    ping-pong): two ranks reproduce it at every size, eager or rendezvous
    (eager limit 1000), linearly between its sizes and with its last slope
    beyond them; the other level keeps its byte time."""
    curve = [[0, 3 * US], [512, 4 * US], [4096, 20 * US], [8192, 30 * US]]
    levels = [{"name": "node", "span": 2, "latency": 1 * US, "byte_time": 1e-9,
               "one_way": curve},
              {"name": "net", "latency": 7 * US, "byte_time": 4e-9}]
    plat = platform(network={"levels": levels})
    for n, want in [(256, 3.5), (512, 4), (1000, 4 + 488 * 16 / 3584), (2048, 4 + 1536 * 16 / 3584),
                    (6144, 25), (16384, 50)]:
        got = simulate(pingpong(0, 1, n), plat).predicted_time / 2
        assert got == pytest.approx(want * US, rel=1e-9), n
    o, n = 0.5 * US, 2048                 # ranks 0 and 2: the level without a curve
    assert simulate(pingpong(0, 2, n), plat).predicted_time == pytest.approx(
        2 * ((o + 7 * US) * 3 + (n - 1) * 4e-9 + o), rel=1e-12)
    with pytest.raises(PlatformError, match=r"network.levels\[1\]: 'one_way' must be a list"):
        platform(network={"levels": [levels[0], dict(levels[1], one_way=[[8, 1e-6]])]})
    with pytest.raises(PlatformError, match="sizes must increase"):
        platform(network={"levels": [dict(levels[1], one_way=[[8, 1e-6], [0, 2e-6]])]})
    with pytest.raises(PlatformError, match="drop the level's one_way"):
        platform(network={"levels": [dict(levels[1], one_way=curve)], "semantics": "loggopsim"})


def test_messages_beyond_the_measured_curves_are_named(jacobi_trace, tmp_path):
    """Messages more than twice the size where a level's curves stop are
    timed by the curves' last slope: netsim names the level, how many and
    how large, and the measurement that would cover them, on stderr and
    in the prediction's warnings; within twice the size, nothing."""
    curve = [[0, 3 * US], [512, 4 * US], [4096, 20 * US], [8192, 30 * US]]
    levels = [{"name": "node", "span": 2, "latency": 1 * US, "byte_time": 1e-9,
               "one_way": curve},
              {"name": "net", "latency": 7 * US, "byte_time": 4e-9}]
    plat = platform(network={"levels": levels})
    a, b = np.array([0, 0, 0]), np.array([1, 1, 2])
    assert plat.beyond_curves(a, b, np.array([100.0, 16384.0, 1e9])) == []
    said = plat.beyond_curves(a, b, np.array([9000.0, 20000.0, 1e9]))
    assert len(said) == 1 and said[0].startswith("level node: 2 messages of up to 20000 bytes")
    assert "(to 8192 bytes)" in said[0] and "--max-bytes 32768" in said[0]
    small = tmp_path / "small.yaml"
    small.write_text(yaml.safe_dump({
        "name": "short-curve", "nodes": 1, "cores_per_node": 4,
        "network": {"levels": [{"name": "node", "latency": 1e-6, "byte_time": 1e-10,
                                "one_way": [[0, 1e-6], [8, 1.1e-6]]}]}}))
    p = run([sys.executable, "-m", "netsim", str(jacobi_trace), "--platform", str(small),
             "-o", str(tmp_path / "pred.json")])
    assert "netsim: WARNING: level node:" in p.stderr and "beyond its measured curves" in p.stderr
    pred = json.loads((tmp_path / "pred.json").read_text())
    assert any("level node:" in w and "--max-bytes" in w for w in pred["warnings"])


def test_a_measured_stream_curve_spaces_a_window_of_messages():
    """A level's stream curve (seconds per message of a window of
    nonblocking sends, calibrate's ``stream``) is how long each
    message holds its sender's NIC: k messages in flight leave that far
    apart, each still arriving one wire time after it leaves, and a
    ping-pong, one message at a time, is unchanged."""
    o, L, k, n = 0.5 * US, 1 * US, 8, 500

    def window(plat):
        B = Builder(4)
        prev = []
        for _ in range(k):                      # k Isends, each after the last started
            prev = [(B.op(SEND, 0, prev, peer=1, size=n, tag=0), True)]
        for _ in range(k):
            B.op(RECV, 1, [], peer=0, size=n, tag=0)
        return simulate(B.done(), plat).predicted_time

    plain = platform()
    wire = (n - 1) * 1e-9                      # W, shorter than o: the CPU sets the pace
    assert window(plain) == pytest.approx((k - 1) * o + o + L + wire + o, rel=1e-12)
    levels = [{"name": "node", "span": 2, "latency": L, "byte_time": 1e-9,
               "stream": [[0, 3 * US], [4096, 3 * US]]},
              {"name": "net", "latency": 7 * US, "byte_time": 4e-9}]
    for gap in (0.0, 1 * US):                   # the gap is part of the measured spacing
        plat = platform(network={"levels": levels, "gap": gap})
        assert window(plat) == pytest.approx((k - 1) * 3 * US + o + L + wire + o, rel=1e-12)
    assert simulate(pingpong(0, 1, n), platform(network={"levels": levels})).predicted_time == \
        pytest.approx(simulate(pingpong(0, 1, n), plain).predicted_time, rel=1e-12)
    with pytest.raises(PlatformError, match=r"network.levels\[0\]: 'stream' must be a list"):
        platform(network={"levels": [dict(levels[0], stream=[[8, 1e-6]]), levels[1]]})
    with pytest.raises(PlatformError, match="drop the level's one_way and stream"):
        platform(network={"levels": [dict(levels[0], span=None)], "semantics": "loggopsim"})


ONE_NODE = dict(nodes=1, cores_per_node=16,
                network={"levels": [{"name": "node", "latency": 1 * US, "byte_time": 0.0}],
                         "overhead": {"send": 0.5 * US, "recv": 0.5 * US}})


@pytest.mark.parametrize("family,alg,p,hops", [
    ("bcast", "binomial", 4, 2), ("bcast", "binomial", 8, 3), ("reduce", "binomial", 8, 3),
    ("allreduce", "recursive_doubling", 8, 3), ("allreduce", "ring", 4, 6),
    ("allreduce", "rabenseifner", 8, 6), ("allgather", "ring", 5, 4),
    ("allgather", "recursive_doubling", 8, 3), ("alltoall", "pairwise", 4, 3),
    ("alltoall", "bruck", 8, 3), ("alltoall", "bruck", 5, 3),
    ("barrier", "dissemination", 8, 3), ("barrier", "dissemination", 5, 3),
    ("scan", "recursive_doubling", 8, 3), ("gather", "binomial", 8, 3),
])
def test_collective_algorithms_take_their_rounds(family, alg, p, hops):
    # zero byte time: every round costs o + L + o, rounds run back to back
    res = simulate(collective_schedule(family, alg, p, 8), from_dict(dict(ONE_NODE)))
    assert res.predicted_time == pytest.approx(hops * 2 * US, rel=1e-9)


@pytest.mark.parametrize("p", [4, 8])
def test_a_scattered_alltoall_posts_everything_at_once(p):
    """MPICH's Alltoallv/w post every send and receive at once: one round,
    its latency hidden behind the rank's 2 (p - 1) overheads (pairwise: p -
    1 rounds of o + L + o)."""
    o = 0.5 * US
    res = simulate(collective_schedule("alltoall", "scattered", p, 8), from_dict(dict(ONE_NODE)))
    assert res.predicted_time == pytest.approx(2 * (p - 1) * o, rel=1e-9)
    assert np.isfinite(res.end).all()


@pytest.mark.parametrize("p,rounds", [(32, [31]), (33, [31, 1]), (40, [31, 8])])
def test_a_scattered_alltoall_posts_32_peers_a_round(p, rounds):
    """MPICH posts at most 32 offsets (itself among the first) a round and
    waits for the round: each round of m peers costs m o + L + o when the
    latency L is longer than the posting."""
    o, L = 0.5 * US, 100 * US
    plat = from_dict(dict(nodes=1, cores_per_node=64, network={
        "levels": [{"name": "node", "latency": L, "byte_time": 0.0}],
        "overhead": {"send": o, "recv": o}}))
    res = simulate(collective_schedule("alltoall", "scattered", p, 8), plat)
    assert res.predicted_time == pytest.approx(sum(m * o + L + o for m in rounds), rel=1e-9)


def test_mpich_alltoall_choice_by_call():
    """``mpich`` runs, call by call, what MPICH's Alltoall would: Bruck up
    to 256 B a block on 8 members or more, scattered up to 32 KiB,
    pairwise beyond; the v/w forms scattered at any size."""
    from netsim.collectives import resolve
    assert resolve("mpich", 8, 256, False) == "bruck"
    assert resolve("mpich", 7, 256, False) == "scattered"
    assert resolve("mpich", 8, 257, False) == "scattered"
    assert resolve("mpich", 8, 32768, False) == "scattered"
    assert resolve("mpich", 8, 32769, False) == "pairwise"
    assert resolve("mpich", 8, 1 << 20, True) == "scattered"
    assert resolve("pairwise", 8, 8, True) == "pairwise"


@pytest.mark.parametrize("p", [3, 5, 6, 7])
def test_non_power_of_two_allreduce_completes_with_fold(p):
    res = simulate(collective_schedule("allreduce", "recursive_doubling", p, 8),
                   from_dict(dict(ONE_NODE)))
    k = (p.bit_length() - 1)
    # fold in, k exchange rounds, result back out; the non-extra ranks start
    # their first exchange early, so the total lies between k+1 and k+2 rounds
    assert (k + 1) * 2 * US - 1e-15 <= res.predicted_time <= (k + 2) * 2 * US + 1e-15
    assert np.isfinite(res.end).all()


def fan_in(contention):
    B = Builder(8)
    B.op(RECV, 0, [], peer=2, size=1001, tag=0)
    B.op(RECV, 0, [], peer=4, size=1001, tag=0)
    B.op(RECV, 0, [], peer=6, size=1001, tag=0)
    for r in (2, 4, 6):
        B.op(SEND, r, [], peer=0, size=1001, tag=0)
    return simulate(B.done(), platform(network={"contention": contention,
                                                "eager_limit": 100000}))


def test_nic_contention_serialises_a_fan_in():
    o, L, G = 0.5 * US, 7 * US, 4e-9
    t1 = o + L + 1000 * G               # first arrival
    free = fan_in(False).predicted_time
    busy = fan_in(True).predicted_time
    assert free == pytest.approx(t1 + 3 * o, rel=1e-12)          # receiver CPU only
    assert busy == pytest.approx(t1 + 2 * 1000 * G + o, rel=1e-12)  # NIC in series


def flows(pairs, topology=None, size=1001, **over):
    """Messages sent at once between ranks (``pairs``), on the test
    platform (8 nodes of 2 cores: rank r on node r // 2) with ``topology``
    (None: one ideal fabric); returns the simulation's Result."""
    B = Builder(16)
    for src, dst in pairs:
        B.op(SEND, src, [], peer=dst, size=size, tag=0)
        B.op(RECV, dst, [], peer=src, size=size, tag=0)
    net = {"eager_limit": 100000} | ({"topology": topology} if topology else {})
    return simulate(B.done(), platform(network=net, **over))


def cross_leaf_pair(pairs=((0, 4), (2, 6)), **topology):
    """Two messages at once (by default ranks 0 and 2, nodes 0 and 1 of
    leaf 0, to ranks 4 and 6, nodes 2 and 3 of leaf 1); a fat tree of 2
    nodes per leaf."""
    tree = {"kind": "fat_tree", "leaf_nodes": 2, **topology} if topology else None
    return flows(pairs, tree).predicted_time


def test_two_flows_share_a_tapered_up_link_and_not_a_full_one():
    o, L, G = 0.5 * US, 7 * US, 4e-9
    alone = o + L + 1000 * G + o                  # send, wire, receive
    assert cross_leaf_pair() == pytest.approx(alone, rel=1e-12)
    # full bisection (2 up links for 2 nodes): the destinations' spines differ
    assert cross_leaf_pair(up_links=2) == pytest.approx(alone, rel=1e-12)
    # tapered 2:1: both cross leaf 0's one up link, the second after the first
    assert cross_leaf_pair(up_links=1) == pytest.approx(alone + 1000 * G, rel=1e-12)
    # from two leaves (nodes 0 and 4) into leaf 1: the spine's one down link
    into_one_leaf = ((0, 4), (8, 6))
    assert cross_leaf_pair(into_one_leaf, up_links=1) == pytest.approx(alone + 1000 * G,
                                                                       rel=1e-12)
    assert cross_leaf_pair(into_one_leaf, up_links=2) == pytest.approx(alone, rel=1e-12)


def test_a_torus_routes_the_shorter_way_and_shares_its_links():
    o, L, G, h = 0.5 * US, 7 * US, 4e-9, 0.25 * US
    alone = o + L + 1000 * G + o
    ring = {"kind": "torus", "dims": [8], "hop_latency": h}

    def time(*pairs):
        return flows(pairs, ring).predicted_time
    # node 0 to node 3: three links the positive way; to node 7: one the
    # negative way round; to node 4: four either way
    assert time((0, 6)) == pytest.approx(alone + 3 * h, rel=1e-12)
    assert time((0, 14)) == pytest.approx(alone + 1 * h, rel=1e-12)
    assert time((0, 8)) == pytest.approx(alone + 4 * h, rel=1e-12)
    # nodes 0 -> 2 and 1 -> 3 both cross node 1's +x link: one after the other
    assert time((0, 4), (2, 6)) == pytest.approx(alone + 2 * h + 1000 * G, rel=1e-12)
    # nodes 0 -> 2 and 3 -> 1 go opposite ways: no link shared
    assert time((0, 4), (6, 2)) == pytest.approx(alone + 2 * h, rel=1e-12)
    # a 2 x 4 torus: x first, then y; node 0 -> node 5 = (1, 2) crosses
    # node 0's +x, node 1's +y and node 3's +y; node 1 -> node 3 = (1, 1)
    # crosses node 1's +y too
    two_d = {"kind": "torus", "dims": [2, 4]}
    res = flows(((0, 10), (2, 6)), two_d)
    assert res.predicted_time == pytest.approx(alone + 1000 * G, rel=1e-12)
    assert list(res.links.link) == ["node 1 +y", "node 0 +x", "node 3 +y"]
    assert res.links.busy.iloc[0] == pytest.approx(2 * 1000 * G, rel=1e-12)


def test_a_three_level_tree_shares_its_upper_links():
    o, L, G = 0.5 * US, 7 * US, 4e-9
    alone = o + L + 1000 * G + o
    # 2 nodes per leaf, 2 leaves per level-2 switch, 2 of those: node 0 ->
    # node 4 and node 2 -> node 7 climb from different leaves and level-2
    # switch 0 to the top; with one spine they share its up link
    one = {"kind": "fat_tree", "down": [2, 2, 2], "up": [1, 1]}
    res = flows(((0, 8), (4, 14)), one)
    assert res.predicted_time == pytest.approx(alone + 1000 * G, rel=1e-12)
    assert res.links.link.iloc[0] == "level-2 switch 0 up to spine 0"
    # two spines: destination 4 climbs to spine 0, destination 7 to spine 1
    two = flows(((0, 8), (4, 14)), one | {"up": [1, 2]})
    assert two.predicted_time == pytest.approx(alone, rel=1e-12)
    assert len(two.links) == 8                   # 4 up, 4 down, none shared
    # two nodes under one level-2 switch stay below the spines
    assert "spine" not in " ".join(flows(((0, 4),), one).links.link)


def test_a_dragonfly_global_link_is_shared_unless_doubled():
    o, L, G = 0.5 * US, 7 * US, 4e-9
    alone = o + L + 1000 * G + o
    # 2 groups x 2 routers x 2 nodes: nodes 0-3 in group 0 (routers 0, 1),
    # 4-7 in group 1; group 0 keeps its link to group 1 on its router 1,
    # group 1 its link to group 0 on its router 0
    fly = {"kind": "dragonfly", "groups": 2, "routers": 2, "nodes_per_router": 2}
    # node 0 -> node 4 (local, global) and node 2 -> node 7 (global,
    # local): one global link between the groups, crossed in turn
    res = flows(((0, 8), (4, 14)), fly)
    assert res.predicted_time == pytest.approx(alone + 1000 * G, rel=1e-12)
    assert res.links.link.iloc[0] == "global group 0 to 1"
    assert res.links.busy.iloc[0] == pytest.approx(2 * 1000 * G, rel=1e-12)
    assert set(res.links.link.iloc[1:]) == {"group 0 router 0 to 1", "group 1 router 0 to 1"}
    # two global links: destination nodes 4 and 7 take one each
    doubled = flows(((0, 8), (4, 14)), fly | {"global_links": 2}).predicted_time
    assert doubled == pytest.approx(alone, rel=1e-12)
    # valiant routing needs a third group to go through: with two, minimal
    assert flows(((0, 8), (4, 14)), fly | {"routing": "valiant"}).predicted_time == \
        pytest.approx(alone + 1000 * G, rel=1e-12)


def test_links_of_their_own_speed():
    o, L, G = 0.5 * US, 7 * US, 4e-9
    alone = o + L + 1000 * G + o
    fly = {"kind": "dragonfly", "groups": 2, "routers": 2, "nodes_per_router": 2}
    # a global link half as fast: a message alone through it is later by
    # its time on the wire once more
    slow = flows([(0, 8)], fly | {"global_byte_time": 2 * G})
    assert slow.predicted_time == pytest.approx(alone + 1000 * G, rel=1e-12)
    assert slow.links.set_index("link").busy["global group 0 to 1"] == \
        pytest.approx(2000 * G, rel=1e-12)
    # twice as fast: two messages through it fit in one NIC's time
    fast = flows(((0, 8), (4, 14)), fly | {"global_byte_time": G / 2})
    assert fast.predicted_time == pytest.approx(alone, rel=1e-12)
    # every link half as fast (a torus ring): the longest wait is one extra time
    ring = flows([(0, 6)], {"kind": "torus", "dims": [8], "link_byte_time": 2 * G})
    assert ring.predicted_time == pytest.approx(alone + 1000 * G, rel=1e-12)
    with pytest.raises(PlatformError, match="do not apply to a torus"):
        platform(network={"topology": {"kind": "torus", "dims": [8], "global_byte_time": G}})
    # a 3-level tree whose top links are half as fast: a message across the
    # top is later by one wire time, one under a level-2 switch is not
    tree = {"kind": "fat_tree", "down": [2, 2, 2], "up": [1, 1], "level_byte_times": [0, 2 * G]}
    assert flows([(0, 8)], tree).predicted_time == pytest.approx(alone + 1000 * G, rel=1e-12)
    assert flows([(0, 4)], tree).predicted_time == pytest.approx(alone, rel=1e-12)
    lower = tree | {"level_byte_times": [2 * G]}          # the leaves' links only
    assert flows([(0, 4)], lower).predicted_time == pytest.approx(alone + 1000 * G, rel=1e-12)
    assert flows([(0, 8)], lower).predicted_time == pytest.approx(alone + 1000 * G, rel=1e-12)
    with pytest.raises(PlatformError, match="a 3-level tree has 2"):
        platform(network={"topology": tree | {"level_byte_times": [G, G, G]}})


def test_valiant_routing_spreads_a_group_to_group_burst():
    """Every node of group 0 sends to group 1: minimal routing queues them
    all on the one global link between; valiant spreads them over the
    other groups' links, at the price of more hops."""
    fly = {"kind": "dragonfly", "groups": 8, "routers": 4, "nodes_per_router": 1}
    pairs = [(2 * k, 2 * (k + 4)) for k in range(4)]   # nodes 0-3 -> nodes 4-7
    minimal = flows(pairs, fly, size=50000)
    valiant = flows(pairs, fly | {"routing": "valiant"}, size=50000)
    assert minimal.links.link.iloc[0] == "global group 0 to 1"
    assert minimal.links.busy.iloc[0] == pytest.approx(4 * 49999 * 4e-9, rel=1e-12)
    via = {n for n in valiant.links.link if n.startswith("global group 0 to ")}
    assert len(via) > 1 and "global group 0 to 1" not in via
    assert valiant.predicted_time < minimal.predicted_time


def test_random_placement_is_a_seeded_permutation_of_cores():
    p = platform(placement={"random": 3})
    cores = p.core_of(16)
    assert sorted(cores) == list(range(16)) and list(cores) != list(range(16))
    assert list(platform(placement={"random": 3}).core_of(16)) == list(cores)
    assert list(platform(placement={"random": 4}).core_of(16)) != list(cores)
    assert len(set(platform(placement={"random": 0}).core_of(5))) == 5


def first_then_compute(pairs, topology, after):
    """Messages sent at once (``pairs`` of ranks, the test platform, 1,001
    bytes each); the first message's receiver then computes ``after``
    seconds: the predicted time tells when that message was through."""
    B = Builder(16)
    for k, (src, dst) in enumerate(pairs):
        B.op(SEND, src, [], peer=dst, size=1001, tag=0)
        r = B.op(RECV, dst, [], peer=src, size=1001, tag=0)
        if k == 0:
            B.op(CALC, dst, [(r, False)], dur=after)
    net = {"eager_limit": 100000, "topology": topology}
    return simulate(B.done(), platform(network=net)).predicted_time


def test_flows_share_a_link_at_once_and_by_round_trip():
    o, L, G, h = 0.5 * US, 7 * US, 4e-9, 0.25 * US
    P = 1000 * G
    alone = o + L + P + o
    D = 10 * P
    tapered = {"kind": "fat_tree", "leaf_nodes": 2, "up_links": 1}
    pairs = ((0, 4), (2, 6))           # nodes 0, 1 of leaf 0 to nodes 2, 3 of leaf 1
    # queues serve the first message whole, then the second ...
    assert first_then_compute(pairs, tapered, D) == pytest.approx(alone + D, rel=1e-12)
    # ... flows share the up link at half the rate each: both through at 2P
    for sharing in ("flows", "rtt_flows"):          # the same round trips
        assert first_then_compute(pairs, tapered | {"sharing": sharing}, D) == \
            pytest.approx(alone + P + D, rel=1e-12)
    # a ring: node 1 -> 2 (one link) and node 0 -> 2 (two links) share node
    # 1's +x link and node 2's NIC; the one-link flow is computed on
    ring = {"kind": "torus", "dims": [8], "hop_latency": h}
    near_first = ((2, 5), (0, 4))
    assert first_then_compute(near_first, ring | {"sharing": "flows"}, D) == \
        pytest.approx(o + 2 * P + L + h + o + D, rel=1e-12)
    # rtt_flows: rates in inverse proportion to the route's latency, so the
    # near flow is through once it has done P at rate phi_near / (phi_near + phi_far)
    near, far = 1 / (L + h), 1 / (L + 2 * h)
    through = P * (near + far) / near
    assert first_then_compute(near_first, ring | {"sharing": "rtt_flows"}, D) == \
        pytest.approx(o + through + L + h + o + D, rel=1e-12)


@pytest.mark.parametrize("sharing", ["flows", "rtt_flows"])
def test_flows_alone_on_their_links_are_timed_as_queues(sharing):
    """Where no link is shared, flows change nothing: eager and rendezvous
    ping-pongs across a tree, and a shift in which every route is its own."""
    tree = {"kind": "fat_tree", "down": [2, 2, 2], "up": [2, 2]}
    for size in (1001, 200000):                      # eager, rendezvous
        B = pingpong(0, 14, size, nranks=16)
        net = {"topology": tree}
        queues = simulate(B, platform(network=net)).predicted_time
        B = pingpong(0, 14, size, nranks=16)
        flowing = simulate(B, platform(network={"topology": tree | {"sharing": sharing}}))
        assert flowing.predicted_time == pytest.approx(queues, rel=1e-12)
    shift = [(r, (r + 2) % 16) for r in range(0, 16, 2)]
    assert flows(shift, tree | {"sharing": sharing}).predicted_time == \
        pytest.approx(flows(shift, tree).predicted_time, rel=1e-12)


@pytest.mark.parametrize("sharing", ["flows", "rtt_flows"])
def test_more_flows_at_once_than_the_first_room_share_the_nic_whole(sharing):
    """3,000 messages from one node to another, each sent as the previous
    one started: they all flow at once, more than the engine first numbers
    flows for (its heap's room), so it runs again with more.  The NIC is
    shared, never idle, so the last byte leaves after the messages' NIC
    times summed, as queued messages would (receives cost nothing here)."""
    from netsim.engine import heap_room
    k, size = 3000, 50000
    s = burst(k, chained=True, to=2, size=size)          # rank 2: the next node
    assert heap_room(s.graph(), s.nranks, 10 ** 9) < k
    tree = {"kind": "fat_tree", "leaf_nodes": 2, "up_links": 2, "sharing": sharing}
    net = {"eager_limit": 100000, "overhead": {"send": 0.5 * US, "recv": 0.0},
           "topology": tree}
    o, L, G = 0.5 * US, 7 * US, 4e-9
    assert simulate(s, platform(network=net)).predicted_time == \
        pytest.approx(1 * US + o + k * (size - 1) * G + L, rel=1e-9)


def test_reach_bounds_how_far_one_flow_moves_the_others():
    """A topology's ``reach``: 300 messages of 1 to 100 kB started at
    random times among 16 ranks on a 2:1 tapered tree.  A reach longer
    than any chain of linked flows (100 links) is the exact solve (0) to
    the last bit; 1 (only the flows on a changed flow's links solved
    again) moves the prediction, by little; a negative reach is refused,
    the key named."""
    def staggered(reach):
        rng = np.random.default_rng(3)
        B = Builder(16)
        for k in range(300):
            src, dst = (int(x) for x in rng.choice(16, 2, replace=False))
            size = int(rng.integers(1000, 100000))
            c = B.op(CALC, src, [], dur=float(rng.uniform(0, 50 * US)))
            B.op(SEND, src, [(c, False)], peer=dst, size=size, tag=k)
            B.op(RECV, dst, [], peer=src, size=size, tag=k)
        tree = {"kind": "fat_tree", "leaf_nodes": 2, "up_links": 1, "sharing": "rtt_flows",
                "reach": reach}
        net = {"eager_limit": 1000000, "topology": tree}
        return simulate(B.done(), platform(network=net)).predicted_time
    exact = staggered(0)
    assert staggered(100) == exact
    near = staggered(1)
    assert near != exact
    assert near == pytest.approx(exact, rel=0.01)
    with pytest.raises(PlatformError, match="reach"):
        staggered(-1)


def test_links_of_their_own_latency():
    """A link's own latency in place of hop_latency: a fat tree's per level
    of links, a dragonfly's global links; the others keep hop_latency."""
    o, L, G, h = 0.5 * US, 7 * US, 4e-9, 0.25 * US
    alone = o + L + 1000 * G + o
    # 3 levels: node 0 -> node 4 (under one level-2 switch) crosses two
    # level-1 links (up, down); node 0 -> node 7, two of each level
    tree = {"kind": "fat_tree", "down": [2, 2, 2], "up": [1, 1], "hop_latency": h,
            "level_latencies": [1 * US, 3 * US]}
    assert flows([(0, 4)], tree).predicted_time == pytest.approx(alone + 2 * US, rel=1e-12)
    assert flows([(0, 14)], tree).predicted_time == pytest.approx(alone + 8 * US, rel=1e-12)
    # a level not listed keeps hop_latency
    first = tree | {"level_latencies": [1 * US]}
    assert flows([(0, 14)], first).predicted_time == pytest.approx(alone + 2 * US + 2 * h,
                                                                    rel=1e-12)
    # a dragonfly: node 0 -> node 4 takes a local link, then the global one
    fly = {"kind": "dragonfly", "groups": 2, "routers": 2, "nodes_per_router": 2,
           "hop_latency": h, "global_latency": 2 * US}
    assert flows([(0, 8)], fly).predicted_time == pytest.approx(alone + h + 2 * US, rel=1e-12)
    with pytest.raises(PlatformError, match="do not apply to a torus"):
        platform(network={"topology": {"kind": "torus", "dims": [8], "global_latency": h}})
    with pytest.raises(PlatformError, match="level_latencies lists 3 link levels"):
        platform(network={"topology": tree | {"level_latencies": [h, h, h]}})


def test_a_topology_names_its_fault():
    with pytest.raises(PlatformError, match="do not apply to a torus"):
        platform(network={"topology": {"kind": "torus", "leaf_nodes": 2, "dims": [8]}})
    with pytest.raises(PlatformError, match="needs 'up_links'"):
        platform(network={"topology": {"kind": "fat_tree", "leaf_nodes": 2}})
    with pytest.raises(PlatformError, match="2 numbers for 3 levels"):
        platform(network={"topology": {"kind": "fat_tree", "down": [2, 2, 2], "up": [2]}})
    with pytest.raises(PlatformError, match="do not apply to a fat_tree"):
        platform(network={"topology": {"kind": "fat_tree", "down": [8, 2], "up": [2],
                                       "leaf_nodes": 2}})
    with pytest.raises(PlatformError, match="'down' must list at least 2"):
        platform(network={"topology": {"kind": "fat_tree", "down": [8], "up": []}})
    with pytest.raises(PlatformError, match="holds 6 nodes, the platform has 8"):
        platform(network={"topology": {"kind": "torus", "dims": [2, 3]}})
    with pytest.raises(PlatformError, match="routing"):
        platform(network={"topology": {"kind": "dragonfly", "groups": 2, "routers": 2,
                                       "nodes_per_router": 2, "routing": "adaptive"}})
    with pytest.raises(PlatformError, match="'random' must be >= 0"):
        platform(placement={"random": -1})
    p = platform(network={"topology": {"kind": "fat_tree", "leaf_nodes": 4, "up_links": 2}})
    assert p.contention and p.describe()["topology"]["up_links"] == 2
    assert flows([(0, 2)], p.describe()["topology"]).links is not None


def test_deadlock_is_reported_not_hung():
    B = Builder(3)
    B.op(CALC, 0, [], dur=1e-3)
    B.op(RECV, 0, [(0, False)], peer=1, size=8, tag=7)
    B.op(RECV, 1, [], peer=0, size=8, tag=3)
    with pytest.raises(ScheduleError) as e:
        simulate(B.done(), platform())
    msg = str(e.value)
    assert "2 rank(s) blocked" in msg
    assert "rank 0" in msg and "waits for a message from rank 1, tag 7" in msg
    assert "rank 1" in msg and "from rank 0, tag 3" in msg


def test_goal_round_trip_gives_the_same_prediction(tmp_path):
    s = collective_schedule("allreduce", "rabenseifner", 6, 4096)
    plat = platform(network={"contention": True})
    a = simulate(s, plat).predicted_time
    write_goal(tmp_path / "s.goal", s)
    text = (tmp_path / "s.goal").read_text()
    assert text.startswith("num_ranks 6") and "requires" in text
    b = simulate(read_goal(str(tmp_path / "s.goal")), plat).predicted_time
    assert a == pytest.approx(b, rel=1e-9)
    (tmp_path / "bad.goal").write_text("num_ranks 2\nrank 0 {\nl1: send 8b to 5 tag 0\n}\n")
    with pytest.raises(ScheduleError, match=r"bad.goal:3: peer 5 out of range"):
        read_goal(str(tmp_path / "bad.goal"))


def test_receives_posted_together_wait_together(tmp_path):
    # rank 0 posts two receives at once; both senders compute 100 us
    # first: rank 0 waited about 100 us, not 200 (the sum of the two)
    (tmp_path / "w.goal").write_text(
        "num_ranks 3\nrank 0 {\nl1: recv 8b from 1 tag 0\nl2: recv 8b from 2 tag 0\n}\n"
        "rank 1 {\nl1: calc 100000\nl2: send 8b to 0 tag 0\nl2 requires l1\n}\n"
        "rank 2 {\nl1: calc 100000\nl2: send 8b to 0 tag 0\nl2 requires l1\n}\n")
    res = simulate(read_goal(str(tmp_path / "w.goal")), platform())
    waited, finish = res.ranks["waiting"][0], res.ranks["finish"][0]
    assert 99e-6 < waited < 101e-6 and waited <= finish


def test_platform_validation_names_the_key(tmp_path):
    with pytest.raises(PlatformError, match="network.levels must be a non-empty list"):
        from_dict({"nodes": 1, "cores_per_node": 1, "network": {"levels": []}}, "p.yaml")
    with pytest.raises(PlatformError, match=r"levels\[1\]: span 4 must exceed"):
        from_dict({"nodes": 1, "cores_per_node": 1, "network": {"levels": [
            {"span": 4, "latency": 0, "byte_time": 0}, {"span": 4, "latency": 0,
                                                        "byte_time": 0}, {"latency": 0,
                                                                          "byte_time": 0}]}})
    with pytest.raises(PlatformError, match="unknown algorithm 'bogus'"):
        from_dict(dict(ONE_NODE, collectives={"allreduce": "bogus"}))
    with pytest.raises(PlatformError, match="'latency' must be >= 0"):
        from_dict({"nodes": 1, "cores_per_node": 1,
                   "network": {"levels": [{"latency": -1, "byte_time": 0}]}})
    (tmp_path / "p.yaml").write_text("nodes: [\n")
    with pytest.raises(PlatformError, match="not valid YAML"):
        load_platform(str(tmp_path / "p.yaml"))
    for f in ("ib-cluster", "fat-node", "this-machine"):
        load_platform(f"config/platforms/{f}.yaml")


def test_damaged_platform_values_are_refused_not_simulated(tmp_path):
    """A key given twice (YAML keeps the last without a word: nodes 256
    became 3), a time of 1e308 (the simulation overflowed and netsim wrote
    an infinite prediction that its own reader refused), cores_per_node
    1e308 (a numba typing error): each a clear refusal naming the key."""
    good = (ROOT / "config" / "platforms" / "ib-cluster.yaml").read_text()
    (tmp_path / "twice.yaml").write_text(good + "nodes: 3\n")
    with pytest.raises(PlatformError, match="the key 'nodes' is given twice"):
        load_platform(str(tmp_path / "twice.yaml"))
    with pytest.raises(PlatformError, match="gap"):
        from_dict({"nodes": 1, "cores_per_node": 1, "network": {
            "levels": [{"latency": 0, "byte_time": 0}], "gap": 1e308}})
    with pytest.raises(PlatformError, match="cores_per_node"):
        from_dict({"nodes": 1, "cores_per_node": 1e308,
                   "network": {"levels": [{"latency": 0, "byte_time": 0}]}})
    # what the platform's ranges cannot catch, the simulation does
    B = Builder(1)
    a = B.op(CALC, 0, [], dur=1e308)
    B.op(CALC, 0, [(a, False)], dur=1e308)
    with pytest.raises(ScheduleError, match="overflowed"):
        simulate(B.done(), platform())


@pytest.mark.parametrize("coll", ["analytic", "recursive_doubling"])
def test_prediction_on_a_real_trace(jacobi_trace, tmp_path, coll):
    plat = tmp_path / "p.yaml"
    plat.write_text(open("config/platforms/ib-cluster.yaml").read()
                    .replace("{default: analytic}", f"{{default: {coll}}}"))
    p = run([sys.executable, "-m", "netsim", str(jacobi_trace), "--platform", str(plat),
             "-o", str(tmp_path / "pred.json"), "--timeline", str(tmp_path / "tl.json")])
    assert "predicted time" in p.stdout
    pred = json.loads((tmp_path / "pred.json").read_text())
    ranks = pred["ranks"]
    assert len(ranks) == 4
    from contracts.trace import load_trace
    ev = load_trace(str(jacobi_trace)).events
    comp = ev[ev.op != "init"].groupby("rank")["cpu"].sum()
    for r in ranks:
        assert r["computation"] == pytest.approx(comp[r["rank"]], rel=1e-9)
        assert r["finish"] >= r["computation"]
    # a 4-rank jacobi on one fast node: communication is a small share
    assert max(comp) <= pred["predicted_time"] < 1.5 * max(comp) + 1e-3
    tl = json.loads((tmp_path / "tl.json").read_text())
    names = {e["cat"] for e in tl["traceEvents"] if e["ph"] == "X"}
    assert {"compute", "send", "recv"} <= names
    # twice as fast a target node halves the computation
    run([sys.executable, "-m", "netsim", str(jacobi_trace), "--platform", str(plat),
         "--compute-scale", "0.5", "-o", str(tmp_path / "half.json")])
    half = json.loads((tmp_path / "half.json").read_text())
    assert half["summary"]["computation"]["max"] == pytest.approx(
        pred["summary"]["computation"]["max"] / 2, rel=1e-9)


def test_cli_errors_are_clear(jacobi_trace, tmp_path):
    p = run([sys.executable, "-m", "netsim", str(jacobi_trace), "--platform",
             "config/platforms/this-machine.yaml", "-o", str(tmp_path / "x.json")], check=False)
    assert p.returncode == 2 and "4 ranks do not fit on 1 nodes x 2 cores" in p.stderr
    assert not (tmp_path / "x.json").exists()
    p = run([sys.executable, "-m", "netsim", str(tmp_path / "none"), "--platform",
             "config/platforms/ib-cluster.yaml", "-o", str(tmp_path / "x.json")], check=False)
    assert p.returncode == 2 and "no such trace directory" in p.stderr


def test_loggopsim_semantics_hand_computed(tmp_path):
    # LogGOPSim's own numbers for this ping-pong (L=2500, o=1500, g=1000, G=6 ns):
    # rank 0 sends at 0, message at 4000, handled until 4000+1500+99*6 = 6094;
    # rank 1 replies at 6094, its message handled at rank 0 until 12188
    (tmp_path / "pp.goal").write_text(
        "num_ranks 2\nrank 0 {\nl1: send 100b to 1 tag 0\nl2: recv 100b from 1 tag 0\n"
        "l2 requires l1\n}\nrank 1 {\nl1: recv 100b from 0 tag 0\nl2: send 100b to 0 tag 0\n"
        "l2 requires l1\n}\n")
    out = tmp_path / "o.json"
    run([sys.executable, "-m", "netsim", str(tmp_path / "pp.goal"), "--goal-in", "--loggops",
         "2500e-9,1500e-9,1000e-9,6e-9,0,65535", "-o", str(out)])
    ranks = json.loads(out.read_text())["ranks"]
    assert ranks[0]["finish"] == pytest.approx(12188e-9, rel=1e-12)
    assert ranks[1]["finish"] == pytest.approx(7594e-9, rel=1e-12)
    # --loggops's numbers are checked by the command (no schema on that path)
    bad = run([sys.executable, "-m", "netsim", str(tmp_path / "pp.goal"), "--goal-in",
               "--loggops", "2500e-9,-1,1000e-9,6e-9,0,65535", "-o", str(tmp_path / "b.json")],
              check=False)
    assert bad.returncode == 2 and not (tmp_path / "b.json").exists()
    assert "--loggops: o must be a finite number >= 0, not -1.0" in bad.stderr
    # analytic collectives have no place in LogGOPSim's model
    with pytest.raises(ScheduleError, match="loggopsim semantics have no analytic"):
        B = Builder(2)
        c = B.new_coll(2)
        B.op(4 - 1, 0, [], coll=c, dur=1e-6)
        B.op(4 - 1, 1, [], coll=c, dur=1e-6)
        simulate(B.done(), from_dict({"nodes": 2, "cores_per_node": 1, "network": {
            "levels": [{"latency": 1e-6, "byte_time": 0}], "semantics": "loggopsim"}}))
    # nor a second per-byte time: LogGOPSim has one G
    with pytest.raises(ScheduleError, match="loggopsim semantics take one G"):
        simulate(pingpong(0, 1, 10, nranks=2), from_dict({
            "nodes": 2, "cores_per_node": 1, "network": {
                "levels": [{"latency": 1e-6, "byte_time": 1e-9, "rendezvous_byte_time": 5e-10}],
                "semantics": "loggopsim"}}))


def test_yaml_exponents_without_a_dot_are_numbers(tmp_path):
    (tmp_path / "p.yaml").write_text("nodes: 1\ncores_per_node: 1\nnetwork:\n  levels:\n"
                                     "    - {latency: 2e-6, byte_time: 6e-9}\n")
    assert load_platform(str(tmp_path / "p.yaml")).levels[0].byte_time == 6e-9


def _prediction(trace_dir, tmp_path, name, nodes=None, collectives=None, **net) -> dict:
    """The prediction JSON of a trace on this-machine.yaml with ``net`` keys
    set (and ``nodes`` nodes, ``collectives`` algorithms)."""
    base = yaml.safe_load((ROOT / "config" / "platforms" / "this-machine.yaml").read_text())
    base["network"].update(net)
    if collectives is not None:
        base["collectives"] = collectives
    if nodes is not None:
        base["nodes"] = nodes
    plat = tmp_path / f"{name}.yaml"
    plat.write_text(yaml.safe_dump(base))
    run([sys.executable, "-m", "netsim", str(trace_dir), "--platform", str(plat),
         "-o", str(tmp_path / f"{name}.json")])
    return json.loads((tmp_path / f"{name}.json").read_text())


def _predict(trace_dir, tmp_path, name, **net) -> float:
    """Predicted seconds of a trace on this-machine.yaml with ``net`` keys set."""
    return _prediction(trace_dir, tmp_path, name, **net)["predicted_time"]


def test_non_contiguous_datatypes_cost_their_packing(tmp_path):
    """mpi4py-fft's Alltoallw moves subarrays: the trace flags those calls
    (flags bit 16) and the platform's pack_byte_time charges every byte
    packed and unpacked to the rank's CPU; contiguous calls pay nothing."""
    trace(2, tmp_path / "t", [APPS / "alltoallw_subarray.py"])
    from contracts.trace import load_trace
    ev = load_trace(str(tmp_path / "t")).events
    w, a = ev[ev["op"] == "alltoallw"], ev[ev["op"] == "alltoall"]
    assert len(w) == 10 and ((w["flags"] & 16) != 0).all()
    assert len(a) == 2 and ((a["flags"] & 16) == 0).all()
    preds = {pbt: _prediction(tmp_path / "t", tmp_path, f"p{pbt}", pack_byte_time=pbt)
             for pbt in (0.0, 1e-9)}
    packed = w[w["rank"] == 0][["sbytes", "rbytes"]].to_numpy().sum()
    extra = [b["computation"] - a_["computation"] for a_, b in
             zip(preds[0.0]["ranks"], preds[1e-9]["ranks"])]
    assert extra[0] == pytest.approx(packed * 1e-9, rel=1e-6)
    assert preds[1e-9]["predicted_time"] > preds[0.0]["predicted_time"]


def test_call_overhead_is_charged_once_per_call(jacobi_trace, tmp_path):
    """The binding's own cost (mpi4py: ~0.4 us) is per call: a collective or
    a window of Isends pays it once per call, not once per message."""
    from contracts.trace import load_trace
    ev = load_trace(str(jacobi_trace)).events
    preds = {co: _prediction(jacobi_trace, tmp_path, f"p{co}", nodes=2, call_overhead=co)
             for co in (0.0, 1e-6)}
    for a, b in zip(preds[0.0]["ranks"], preds[1e-6]["ranks"]):
        calls = int(((ev["rank"] == a["rank"]) & (ev["op"] != "init")).sum())
        assert b["computation"] - a["computation"] == pytest.approx(calls * 1e-6, rel=1e-6)
    assert preds[1e-6]["predicted_time"] > preds[0.0]["predicted_time"]


def test_intercommunicator_collectives_simulate(tmp_path):
    """mpi4py.futures reduces over an intercommunicator: the simulator runs
    such collectives over both groups (it failed with a KeyError)."""
    trace(4, tmp_path / "t", [APPS / "groups.py"])
    p = run([sys.executable, "-m", "netsim", str(tmp_path / "t"), "--platform",
             str(ROOT / "config" / "platforms" / "ib-cluster.yaml"),
             "-o", str(tmp_path / "p.json")])
    pred = json.loads((tmp_path / "p.json").read_text())
    assert pred["predicted_time"] > 0 and len(pred["ranks"]) == 4, p.stderr


@pytest.fixture(scope="module")
def local_trace(tmp_path_factory):
    out = tmp_path_factory.mktemp("local") / "t"
    trace(2, out, [APPS / "collective_local.py"])
    return out




def test_zero_byte_collectives_do_not_synchronise(local_trace, tmp_path):
    """osu_alltoall's 0-byte round: MPICH returns from a collective that moves
    no data at once (1.3 us), the simulator made every rank wait for all."""
    from contracts.trace import load_trace
    ev = load_trace(str(local_trace)).events
    first = ev[ev.op.isin(["alltoall", "allgather", "bcast", "allreduce"])].groupby("rank").head(4)
    assert (first.sbytes + first.rbytes == 0).all()
    busy = ev[ev.op != "init"].groupby("rank")["cpu"].sum().max()
    # each rank spun 0.2 s of CPU, rank 0 before the 0-byte collectives and
    # rank 1 after them: made to wait for rank 0, rank 1 would end >= 0.2 s
    # after its own busy time
    spin0 = ev[(ev["rank"] == 0) & (ev.op == "alltoall")]["cpu"].iloc[0]
    spin1 = ev[(ev["rank"] == 1) & (ev.op == "barrier")]["cpu"].iloc[0]
    assert spin0 >= 0.2 and spin1 >= 0.2, (spin0, spin1)
    pred = _predict(local_trace, tmp_path, "plain", copy_byte_time=0.0, copy_overhead=0.0,
                     collective_overhead={})
    # the two spins overlap
    assert pred < busy + 0.05, (pred, busy)


def test_own_block_copy_and_collective_overhead_are_charged_per_call(local_trace, tmp_path):
    """MPICH copies the own block of an alltoall or allgather before
    exchanging (osu_alltoall at 1 MiB: ~100 us beyond the model; at 8 bytes
    ~1.2 us, which an allgather in place saves), except in place; an
    alltoall costs more CPU than its messages (+1-1.2 us at 2 ranks)."""
    plain = _predict(local_trace, tmp_path, "plain", copy_byte_time=0.0, copy_overhead=0.0,
                     collective_overhead={})
    copy = _predict(local_trace, tmp_path, "copy", copy_byte_time=1e-9, copy_overhead=0.0,
                    collective_overhead={})
    # 40 alltoalls (64 KiB own block) + 40 allgathers (64 KiB); in place: none
    assert copy - plain == pytest.approx(80 * 65536 * 1e-9, rel=0.02)
    fixed = _predict(local_trace, tmp_path, "fixed", copy_byte_time=0.0, copy_overhead=1e-4,
                     collective_overhead={})
    assert fixed - plain == pytest.approx(80 * 1e-4, rel=0.02)
    over = _predict(local_trace, tmp_path, "over", copy_byte_time=0.0, copy_overhead=0.0,
                    collective_overhead={"alltoall": 1e-4})
    assert over - plain == pytest.approx(40 * 1e-4, rel=0.02)
    # MPICH's scattered alltoall (blocks up to its medium size) sends the
    # own block to itself: a one-way trip (here 13 us at 64 KiB, off the
    # curve) less the binding's call, in place of the copy
    curve = [[0, 3 * US], [131072, 23 * US]]
    level = [{"name": "node", "latency": 1 * US, "byte_time": 1e-10, "one_way": curve}]
    base = dict(copy_byte_time=1e-9, copy_overhead=0.0, collective_overhead={}, levels=level,
                call_overhead=0.4 * US)
    copied = _predict(local_trace, tmp_path, "copied", **base)
    sent = _predict(local_trace, tmp_path, "sent", alltoall_self_limit=65536, **base)
    assert sent - copied == pytest.approx(40 * (13 * US - 0.4 * US - 65536 * 1e-9), rel=0.02)
    with pytest.raises(PlatformError, match="collective_overhead.alltoal: not a collective"):
        from_dict({"nodes": 1, "cores_per_node": 2, "network": {
            "levels": [{"name": "n", "latency": 1e-6, "byte_time": 1e-10}],
            "collective_overhead": {"alltoal": 1e-6}}}, "x.yaml")


def test_analytic_collectives_move_their_blocks_as_point_to_point_messages(local_trace,
                                                                           tmp_path):
    """A level's byte_time is its eager line, fitted to small messages; over
    TCP (the emulated cluster) it said 0.4 GB/s where 1 MiB moved at 0.07,
    and a bandwidth-bound alltoall code was predicted 63 % fast.  An
    analytic collective's block now costs what a point-to-point message of
    its size costs: here the measured curve, 500 us more at 64 KiB."""
    fast = [[0, 3 * US], [131072, 23 * US]]
    slow = [[0, 3 * US], [131072, 1023 * US]]

    def level(curve):
        return [{"name": "node", "latency": 1 * US, "byte_time": 1e-10, "one_way": curve}]
    base = dict(copy_byte_time=0.0, copy_overhead=0.0, collective_overhead={},
                collectives={"default": "analytic"})
    quick = _predict(local_trace, tmp_path, "quick", levels=level(fast), **base)
    slowed = _predict(local_trace, tmp_path, "slowed", levels=level(slow), **base)
    # 40 alltoalls and 40 allgathers move one 64 KiB block each (the 40 in
    # place may or may not); each 500 us slower on the slow curve
    assert 80 * 500 * US * 0.98 < slowed - quick < 120 * 500 * US * 1.02, (quick, slowed)


def ping_pongs(a, b, size, k, nranks=4):
    """k ping-pongs of ``size`` bytes between ranks a < b, one after the other."""
    B = Builder(nranks)
    prev = []
    for _ in range(k):
        s = B.op(SEND, a, prev, peer=b, size=size, tag=0)
        prev = [(B.op(RECV, a, [(s, False)], peer=b, size=size, tag=0), False)]
    prev = []
    for _ in range(k):
        x = B.op(RECV, b, prev, peer=a, size=size, tag=0)
        prev = [(B.op(SEND, b, [(x, False)], peer=a, size=size, tag=0), False)]
    return B.done()


def test_a_new_connection_pays_its_warm_up_once_per_direction():
    """MPICH over TCP moved its first 1 MiB messages to a new peer 3-7 ms
    slower each than later ones at 1 Gbit/s (the emulated cluster): fft2d
    was predicted 16 % fast.  A level's warm-up is paid once by each
    connection (each direction of each pair), spread over its first bytes,
    and never by a level without one."""
    warm = {"warmup": {"bytes": 2000, "seconds": 1e-3}}
    cold = platform()
    net = cold.levels[1]
    hot = platform(network={"levels": [
        {"name": "node", "span": 2, "latency": 1 * US, "byte_time": 1e-9},
        {"name": "net", "latency": net.latency, "byte_time": net.byte_time, **warm}]})
    for k, paid in ((1, 900 / 2000), (2, 1800 / 2000), (6, 1.0)):
        extra = (simulate(ping_pongs(0, 2, 900, k), hot).predicted_time
                 - simulate(ping_pongs(0, 2, 900, k), cold).predicted_time)
        assert extra == pytest.approx(2 * paid * 1e-3, rel=1e-9), k   # both directions
    # opening the connection: its first message pays ``first`` whatever its size
    opened = platform(network={"levels": [
        {"name": "node", "span": 2, "latency": 1 * US, "byte_time": 1e-9},
        {"name": "net", "latency": net.latency, "byte_time": net.byte_time,
         "warmup": dict(warm["warmup"], first=5e-3)}]})
    for k, paid in ((1, 900 / 2000), (6, 1.0)):
        extra = (simulate(ping_pongs(0, 2, 900, k), opened).predicted_time
                 - simulate(ping_pongs(0, 2, 900, k), cold).predicted_time)
        assert extra == pytest.approx(2 * (paid * 1e-3 + 5e-3), rel=1e-9), k
    # within a node (no warm-up on that level): nothing
    assert simulate(ping_pongs(0, 1, 900, 6), hot).predicted_time == \
        pytest.approx(simulate(ping_pongs(0, 1, 900, 6), cold).predicted_time, rel=1e-12)
    with pytest.raises(PlatformError, match="warmup"):
        from_dict({"nodes": 2, "cores_per_node": 1, "network": {
            "levels": [{"name": "n", "latency": 1e-6, "byte_time": 1e-9,
                        "warmup": {"bytes": 0, "seconds": 1e-3}}]}}, "x.yaml")


@pytest.mark.parametrize("spread", [1, 4])
def test_an_analytic_collective_pays_its_connections_warm_up(local_trace, tmp_path, spread):
    """The same warm-up on an analytic collective's blocks: 40 Alltoalls and
    80 Allgathers of 64 KiB blocks at 2 ranks pay it once, whether the
    first block or the first four carry it."""
    levels = yaml.safe_load((ROOT / "config" / "platforms" / "this-machine.yaml")
                            .read_text())["network"]["levels"]
    base = dict(collectives={"default": "analytic"})
    plain = _predict(local_trace, tmp_path, "plain", levels=levels, **base)
    warm = [dict(lv, warmup={"bytes": spread * 65536, "seconds": 1e-3}) for lv in levels]
    paid = _predict(local_trace, tmp_path, "warm", levels=warm, **base)
    assert paid - plain == pytest.approx(1e-3, rel=0.02), (plain, paid)
    # and the connection's opening once, by the first collective over it
    opened = [dict(lv, warmup={"bytes": spread * 65536, "seconds": 1e-3, "first": 2e-3})
              for lv in levels]
    paid = _predict(local_trace, tmp_path, "opened", levels=opened, **base)
    assert paid - plain == pytest.approx(3e-3, rel=0.02), (plain, paid)


@pytest.mark.parametrize("call", ["send", "ssend", "issend"])
def test_a_synchronous_send_completes_only_once_matched(tmp_path, call):
    """futures-julia's workers return each result with issend and poll its
    Test: a synchronous send completes when the receiver has matched it,
    whatever its size; a small standard send is eager and returns at once.
    Both in the traced run and in the prediction of its rank 0."""
    p = trace(2, tmp_path / "t", [APPS / "ssend_late.py", call])
    took = float(host_lines(p.stdout, "rank 0")[0].split()[-2])
    worked = float(host_lines(p.stdout, "rank 1")[1].split()[-2])
    pred = _prediction(tmp_path / "t", tmp_path, call)
    finish0, comp1 = pred["ranks"][0]["finish"], pred["ranks"][1]["computation"]
    # rank 0's own work is its start-up; rank 1 computes 0.3 s of CPU first
    # (compared with what this run measured: a busy machine stretches both)
    if call == "send":
        assert took < 0.5 * worked and finish0 < 0.6 * comp1, (took, worked, finish0, comp1)
    else:
        assert took > 0.5 * worked and finish0 > 0.9 * comp1, (took, worked, finish0, comp1)


def test_successor_rows_keep_the_dependency_order():
    """The engine's successor rows, per op and in dependency-list order,
    against a stable sort of the same list."""
    rng = np.random.default_rng(7)
    n, m = 500, 4000
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    isstart = rng.random(m) < 0.3
    none = np.full(n, -1)
    s = Schedule(kind=np.zeros(n), rank=np.zeros(n), peer=none, size=np.zeros(n), tag=none,
                 ctx=np.zeros(n), dur=np.ones(n), coll=none, event=none, sync=np.zeros(n, bool),
                 dep_src=src, dep_dst=dst, dep_start=isstart, coll_need=np.zeros(0), nranks=1)
    ndeps, sp, si, ip, ii = s.graph()
    assert list(ndeps) == list(np.bincount(dst, minlength=n))
    for ptr, idx, mask in ((sp, si, ~isstart), (ip, ii, isstart)):
        order = np.argsort(src[mask], kind="stable")
        assert list(idx) == list(dst[mask][order])
        assert list(np.diff(ptr)) == list(np.bincount(src[mask], minlength=n))


def burst(k: int, chained: bool, to: int = 1, size: int = 8):
    """Rank 0 computes, then sends k messages of ``size`` bytes to rank
    ``to``, which receives them one after the other: all k sends at once
    (chained=False), or each once the previous one started (the CPU
    serialises them either way)."""
    B = Builder(to + 1)
    c = B.op(CALC, 0, [], dur=1e-6)
    prev = (c, False)
    for _ in range(k):
        x = B.op(SEND, 0, [prev if chained else (c, False)], peer=to, size=size, tag=0)
        prev = (x, True)
    after = []
    for _ in range(k):
        after = [(B.op(RECV, to, after, peer=0, size=size, tag=0), False)]
    return B.done()


@pytest.mark.parametrize("semantics", ["default", "loggopsim"])
def test_a_heap_that_outgrows_its_first_room_gives_the_same_times(semantics):
    """The engine's heap starts with room for a few entries per rank; a burst
    of 5,000 ready sends overflows it, and the run is repeated with more
    room: the times are those of the same sends issued one by one."""
    from netsim.engine import heap_room
    k = 5000
    s = burst(k, chained=False)
    assert heap_room(s.graph(), s.nranks, 10 ** 9) < k      # it does overflow
    net = {"levels": [{"latency": 1 * US, "byte_time": 1e-9}], "gap": 0.3 * US}
    if semantics == "loggopsim":
        net["semantics"] = "loggopsim"
    plat = from_dict({"nodes": 2, "cores_per_node": 1, "network": net})
    a, b = simulate(s, plat), simulate(burst(k, chained=True), plat)
    assert list(a.end) == list(b.end)
    assert a.predicted_time == b.predicted_time > k * 0.3 * US


def test_schedule_columns_are_narrow_and_refuse_what_they_cannot_hold():
    s = pingpong(0, 1, 8)
    assert (s.kind.dtype, s.rank.dtype, s.peer.dtype, s.tag.dtype, s.size.dtype,
            s.dep_src.dtype) == (np.int8, np.int32, np.int32, np.int32, np.int64, np.int32)
    cols = {k: getattr(s, k) for k in ("kind", "rank", "peer", "size", "ctx", "dur", "coll",
                                      "event", "sync", "dep_src", "dep_dst", "dep_start",
                                      "coll_need")}
    with pytest.raises(ScheduleError, match=r"column tag: values 0\.\.1099511627776 do not "
                                            r"fit in int32"):
        Schedule(**cols, tag=np.array([0, 0, 0, 2**40]), nranks=4)


@pytest.mark.parametrize("coll, n, latency, byte_time, extra", [
    ("recursive_doubling", 1, 1e-2, 1e-15, 2 * 1e-2),
    ("analytic", 131072, 1e-9, 1e-8, (4 - 1.5) * 8 * 131072 * 1e-8)],
    ids=["latency", "bandwidth"])
def test_an_allreduce_of_objects_costs_what_mpi4py_makes_of_it(tmp_path, coll, n, latency,
                                                                byte_time, extra):
    """comm.allreduce(obj) is no MPI_Allreduce: mpi4py reduces the pickles
    along a binomial tree to rank 0 and broadcasts the result.  At 4 ranks
    (c = 2 rounds each way), 10 of them against 10 Allreduce of the same
    bytes: where latency rules, recursive doubling takes c rounds and
    mpi4py's 2 c (10 ms more a call, at 10 ms a round); where bandwidth
    rules, the analytic allreduce moves 2 n (p - 1) / p bytes and the
    reduce and broadcast c n each.  The differences (0.2 s) dwarf what the
    two programs' computation may differ by."""
    code = ("import sys\nimport numpy as np\nfrom mpi4py import MPI\nw = MPI.COMM_WORLD\n"
            f"x, y = np.ones({n}), np.empty({n})\n"
            "for i in range(10):\n"
            "    w.allreduce(x) if sys.argv[1] == 'o' else w.Allreduce(x, y)\n")
    level = [{"name": "net", "latency": latency, "byte_time": byte_time}]
    net = dict(levels=level, overhead={"send": 0.0, "recv": 0.0}, call_overhead=0.0,
               copy_byte_time=0.0, copy_overhead=0.0, collective_overhead={})
    pred = {}
    for form in ("o", "b"):
        trace(4, tmp_path / form, ["-c", code, form])
        pred[form] = _predict(tmp_path / form, tmp_path, form, nodes=4,
                              collectives={"default": coll}, **net)
    assert pred["o"] - pred["b"] == pytest.approx(10 * extra, rel=0.05), pred


@pytest.mark.parametrize("ranks, short, long_", [(4, 2, 4), (3, 3, 4)])
def test_a_short_analytic_allreduce_is_recursive_doubling(tmp_path, ranks, short, long_):
    """MPICH's allreduce of at most 2 KiB is recursive doubling: log2 p
    exchanges of the whole buffer (two more where p is no power of two),
    where the analytic cost beyond that limit (reduce-scatter, allgather)
    pays 2 ceil(log2 p) latencies.  20 Allreduces of 8 bytes on a network
    of 10 ms latency, with the limit at MPICH's default and at 0."""
    code = ("import numpy as np\nfrom mpi4py import MPI\nw = MPI.COMM_WORLD\n"
            "x, y = np.ones(1), np.empty(1)\n"
            "for i in range(20):\n    w.Allreduce(x, y)\n")
    trace(ranks, tmp_path / "t", ["-c", code])
    net = dict(levels=[{"name": "net", "latency": 1e-2, "byte_time": 1e-15}],
               overhead={"send": 0.0, "recv": 0.0}, call_overhead=0.0)
    pred = {limit: _predict(tmp_path / "t", tmp_path, f"l{limit}", nodes=ranks,
                            collectives={"default": "analytic"}, allreduce_short_limit=limit,
                            **net) for limit in (2048, 0)}
    assert pred[0] - pred[2048] == pytest.approx(20 * (long_ - short) * 1e-2, rel=0.05), pred


def test_the_roots_reducing_in_an_object_allreduce_delays_the_broadcast(tmp_path):
    """Rank 0 of mpi4py's allreduce of objects unpickles and reduces every
    partial result, then pickles the sum, before it broadcasts it: the
    replay measures that work as the call's ``inside`` (compute.csv), and
    the simulator runs it between the reduce and the broadcast, so every
    rank waits for it.  10 calls on 4 ranks with 10 ms inside each of rank
    0's: every rank ends 0.1 s later; a table without the column (an
    older expand) reads as none.  The SimGrid export runs it there too."""
    code = ("from mpi4py import MPI\nw = MPI.COMM_WORLD\n"
            "for i in range(10):\n    w.allreduce(i)\n")
    trace(4, tmp_path / "t", ["-c", code])
    from contracts.trace import load_trace
    ev = load_trace(str(tmp_path / "t")).events
    table = ev[["rank", "seq"]].assign(comp=ev["cpu"].to_numpy())
    table.to_csv(tmp_path / "plain.csv", index=False)
    root = (ev["rank"] == 0) & (ev["op"] == "allreduce")
    assert root.sum() == 10
    table.assign(inside=np.where(root, 0.01, 0.0)).to_csv(tmp_path / "inside.csv",
                                                          index=False)
    preds = {}
    for name in ("plain", "inside"):
        run([sys.executable, "-m", "netsim", str(tmp_path / "t"), "--platform",
             "config/platforms/ib-cluster.yaml", "--compute", str(tmp_path / f"{name}.csv"),
             "-o", str(tmp_path / f"{name}.json"), "--simgrid-out", str(tmp_path / name)])
        preds[name] = json.loads((tmp_path / f"{name}.json").read_text())
    plain, inside = (pd.DataFrame(preds[k]["ranks"]).set_index("rank")
                     for k in ("plain", "inside"))
    assert (inside["finish"] - plain["finish"]).to_numpy() == pytest.approx([0.1] * 4,
                                                                            abs=1e-3)
    assert inside.loc[0, "computation"] - plain.loc[0, "computation"] == pytest.approx(0.1)
    assert (inside.loc[1:, "waiting"] - plain.loc[1:, "waiting"]).min() > 0.099
    for name, between in (("plain", 0), ("inside", 10)):
        acts = [line.split()[1] for line in (tmp_path / name / "rank0.txt").read_text()
                .splitlines()]
        steps = "".join({"reduce": "r", "bcast": "b", "compute": "c"}.get(x, "") for x in acts)
        assert steps.count("rcb") == between, steps


def test_a_task_pool_it_cannot_deal_is_said_to_keep_its_traced_schedule(tmp_path):
    """A master taking results from any source with two workers (a task
    pool): where the simulator can deal it anew (blocking receives and
    answers: examples/master_worker.py) it says so in a note; where it
    cannot (the master's receives are nonblocking), the prediction keeps
    who did which task as traced, which a real run on unequal cores does
    not (bench/RESULTS.md, Larger N), and says so with the reason.  A code
    whose receives name their source gets neither."""
    plat = str(ROOT / "config" / "platforms" / "ib-cluster.yaml")
    said, notes = {}, {}
    for name, app in (("pool", [EXAMPLES / "master_worker.py", "--tasks", "12", "--size", "60"]),
                      ("kept", [APPS / "pool_irecv.py", "--tasks", "12"]),
                      ("fixed", [EXAMPLES / "jacobi.py", "--n", "64", "--iters", "5"])):
        trace(3, tmp_path / name, app)
        p = run([sys.executable, "-m", "netsim", str(tmp_path / name), "--platform", plat,
                 "-o", str(tmp_path / f"{name}.json")])
        said[name] = json.loads((tmp_path / f"{name}.json").read_text())["warnings"]
        notes[name] = p.stderr
        assert all(w in p.stderr for w in said[name])
    assert not any("task pool" in w for w in said["pool"]), said
    assert "a task pool: rank 0 deals 12 tasks to 2 workers by arrival" in notes["pool"]
    kept = [w for w in said["kept"] if "task pool" in w]
    assert len(kept) == 1 and kept[0].startswith("rank 0 took ") and "from 2 ranks" in kept[0]
    assert "since rank 0 takes its results with nonblocking receives" in kept[0]
    assert not any("task pool" in w for w in said["fixed"]), said
    assert "a task pool" not in notes["fixed"]


def test_a_sender_that_polls_holds_its_rendezvous_over_an_intercommunicator(tmp_path):
    """Over an intercommunicator MPICH moves a rendezvous message about
    8 KiB per call its sender makes (bench/probes/intercomm_progress_probe.py):
    mpi4py.futures' workers, sleeping 1 ms between the Tests of their
    results, held each 16 KB result 2 ms, which the simulator did not
    see.  With ``intercomm_poll_bytes`` the transfer takes ceil(bytes /
    it) of the sender's polling intervals; without it, none."""
    trace(2, tmp_path / "t", [APPS / "intercomm_poll.py"])
    from contracts.trace import load_trace
    ev = load_trace(str(tmp_path / "t")).events
    test = ev[(ev["rank"] == 1) & (ev["op"] == "test")]
    assert len(test) == 1 and test["polls"].iat[0] > 0
    gap = float(test["poll_gap"].iat[0])
    assert gap >= 0.002
    plat = yaml.safe_load((ROOT / "config" / "platforms" / "this-machine.yaml").read_text())
    times = {}
    for per_poll in (0, 8192):
        plat["network"]["intercomm_poll_bytes"] = per_poll
        (tmp_path / f"p{per_poll}.yaml").write_text(yaml.safe_dump(plat))
        run([sys.executable, "-m", "netsim", str(tmp_path / "t"), "--platform",
             str(tmp_path / f"p{per_poll}.yaml"), "-o", str(tmp_path / f"p{per_poll}.json")])
        times[per_poll] = json.loads((tmp_path / f"p{per_poll}.json").read_text())[
            "predicted_time"]
    # 20,000 bytes: three pieces of 8 KiB, three polling intervals
    assert times[8192] - times[0] == pytest.approx(3 * gap, rel=1e-6)
    assert load_platform(str(tmp_path / "p8192.yaml")).intercomm_poll_bytes == 8192


def test_simulator_start_up_skips_only_numbas_blas_check():
    # python -m netsim loads numba without its scipy.linalg import; SciPy
    # stays importable afterwards, and the compiled loop still runs
    code = ("import sys, numpy as np\n"
            "from netsim.__main__ import _load_compiler_without_blas_check as f\n"
            "f()\n"
            "import numba.np.arraymath as am\n"
            "assert not am._HAVE_BLAS and 'scipy.linalg' not in sys.modules\n"
            "import scipy.linalg\n"
            "assert scipy.linalg.solve(np.eye(2), np.ones(2)).tolist() == [1.0, 1.0]\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def _random_flows(rng, trial):
    """Random flows over random links of random speeds for netsim.flows'
    tests: weighted on odd trials, NICs on two trials of three.  Returns
    the flow count, the links' count with the NICs, the arguments every
    function of netsim.flows takes about the flows (``fixed``) and those
    that say where they are (``where``)."""
    nlinks, nnodes, nf = rng.integers(3, 12), rng.integers(2, 6), rng.integers(4, 40)
    routes = [rng.choice(nlinks, size=rng.integers(0, 4), replace=False) for _ in range(nf)]
    ptr = np.concatenate([[0], np.cumsum([len(r) for r in routes])]).astype(np.int64)
    links = np.concatenate(routes + [np.zeros(0)]).astype(np.int64)
    route = np.arange(nf, dtype=np.int64)
    link_bt = np.where(rng.random(nlinks) < 0.5, 0.0, rng.uniform(0.5, 2, nlinks))
    unit = rng.uniform(0.5, 2, nf)
    phi = rng.uniform(0.2, 3, nf) if trial % 2 else np.ones(nf)
    out_nic = nlinks + rng.integers(0, nnodes, nf)
    in_nic = nlinks + nnodes + rng.integers(0, nnodes, nf)
    nic = bool(trial % 3)
    return (nf, nlinks + 2 * nnodes, (unit, phi, route, ptr, links, link_bt, nic, out_nic, in_nic),
            (route, ptr, links, nic, out_nic, in_nic))


def _holds(op, where):
    """The links flow ``op`` holds (``where`` as ``_random_flows``')."""
    _, ptr, links, nic, out_nic, in_nic = where
    return list(links[ptr[op]:ptr[op + 1]]) + ([out_nic[op], in_nic[op]] if nic else [])


def _churn(rng, nf, fixed, where, ntotal, reach):
    """Flows of ``_random_flows`` starting and ending a few at a time, each
    change solved again with ``affected`` (``reach``) and ``reshare``.
    Yields after each change: the flows in flight, every flow's rate, the
    flows solved again, what they take of each link (``load``) and their
    weight on it (``held``), the links' lists (per, head, next), and
    ``before``: the flows that started or ended, the change's level, the
    rates and levels before it, and the flows the exact walk (reach 0)
    would solve again."""
    import netsim.flows as fl
    cap, weight, count, first, used, load, held = fl.workspace(ntotal)
    per, head, nxt, prv, seen_link, seen_op = fl.lists(ntotal, nf, where[1], where[3])
    waiting = list(rng.permutation(nf))
    act, na = np.empty(nf, np.int64), 0
    rate, level = np.zeros(nf), np.zeros(nf)
    while waiting or na > 1:
        above = np.inf
        gone = rng.choice(na, size=rng.integers(0, min(3, na) + 1), replace=False) if na else []
        for g in gone:
            above = min(above, level[act[g]])
            fl.release(act[g], level, *fixed, load, held, per, head, nxt, prv)
        seeds = [act[g] for g in gone]
        keep = [act[a] for a in range(na) if a not in gone]
        new = np.array([waiting.pop() for _ in range(min(len(waiting), rng.integers(0, 4)))],
                       np.int64)
        for op in new:
            fl.enter(op, level, *fixed, held, per, head, nxt, prv)
        na = len(keep) + len(new)
        act[:na] = keep + list(new)
        if len(new):
            above = min(above, fl.quiet_below(new, len(new), *fixed, weight, load, held))
        walk = (np.array(list(new) + seeds, np.int64), len(new) + len(seeds), len(new), above,
                na, level, *where, per, head, nxt, seen_link, seen_op)
        exact, nexact = fl.affected(*walk, 0)
        before = (list(new) + seeds, above * (1 - 1e-9), rate.copy(), level.copy(),
                  set(exact[:nexact].tolist()))
        sub, ns = fl.affected(*walk, reach)
        fl.reshare(sub, ns, rate, level, *fixed, cap, weight, count, first, used, load)
        assert not seen_link.any() and not seen_op.any()
        yield act[:na], rate, sub[:ns], before, load, held, (per, head, nxt)


def test_flows_solved_again_only_where_starts_and_ends_can_change_them():
    """netsim.flows: after flows end (``release``d) and start (``enter``ed),
    solving again only the flows ``affected`` finds (linked to them
    through links, frozen at or above the ends' lowest level and the
    starts' ``quiet_below``) gives every flow the rate a whole new solve
    gives it: random flows over random links of random speeds, weighted
    and not, with and without NICs, a few ending and starting at a time;
    what they take of each link agrees, and so do the links' lists."""
    import netsim.flows as fl
    rng = np.random.default_rng(7)
    solved_again = solved_whole = 0
    for trial in range(400):
        nf, ntotal, fixed, where = _random_flows(rng, trial)
        for act, rate, sub, _, load, held, (per, head, nxt) in _churn(rng, nf, fixed, where,
                                                                      ntotal, 0):
            solved_again += len(sub)
            solved_whole += len(act)
            whole, whole_level, fresh = np.zeros(nf), np.zeros(nf), fl.workspace(ntotal)
            fl.share(act, len(act), whole, whole_level, *fixed, *fresh)
            assert rate[act] == pytest.approx(whole[act], abs=1e-12), trial
            assert load == pytest.approx(fresh[5], abs=1e-12), trial
            assert held == pytest.approx(fresh[6], abs=1e-12), trial
            for i in range(ntotal):                     # the lists hold the flows
                on, s = [], head[i]
                while s >= 0:
                    on.append(s // per)
                    s = nxt[s]
                assert sorted(on) == sorted(op for op in act if i in _holds(op, where)), trial
    assert solved_again < 0.8 * solved_whole       # fewer than all, on these random flows


def test_flows_within_reach_solved_again_and_no_link_overfull():
    """netsim.flows with a reach of 1 or 2 links: every flow on the
    changed flows' links (frozen at or above the change's level) is solved
    again, the flows beyond the reach keep their rates, no link carries
    more than its capacity, and every flow in flight moves (rate > 0),
    over the same random flows and changes as the exact solve's test; and
    the reach leaves out flows that the exact walk takes in."""
    from netsim.flows import FULL
    rng = np.random.default_rng(11)
    fewer = 0
    for trial in range(300):
        nf, ntotal, fixed, where = _random_flows(rng, trial)
        unit, link_bt = fixed[0], fixed[5]
        for act, rate, sub, before, *_ in _churn(rng, nf, fixed, where, ntotal,
                                                 1 + trial % 2):
            solved = set(sub.tolist())
            changed, above, was, was_level, exact = before
            assert solved <= exact, trial
            fewer += len(solved) < len(exact)
            near = {i for op in changed for i in _holds(op, where)}
            used = np.zeros(ntotal)
            for op in act:
                assert 0.0 < rate[op] <= FULL, trial
                if was_level[op] >= above and near & set(_holds(op, where)):
                    assert op in solved, trial
                if op not in solved:
                    assert rate[op] == was[op], trial
                for i in _holds(op, where):
                    bt = link_bt[i] if i < len(link_bt) else 0.0
                    used[i] += rate[op] * (bt / unit[op] if bt > 0 else 1.0)
            assert (used <= 1.0 + 1e-9).all(), trial
    assert fewer > 0


def test_flows_share_many_links_as_a_plain_progressive_filling_does():
    """netsim.flows.share on solves of up to 200 links and 160 flows
    against a plain, independent progressive filling written here: random
    routes, link speeds and weights, NICs on; every flow's rate and fill
    level agree."""
    import netsim.flows as fl
    rng = np.random.default_rng(5)
    for trial in range(60):
        nlinks, nnodes, nf = rng.integers(20, 80), rng.integers(10, 60), rng.integers(20, 160)
        routes = [rng.choice(nlinks, size=rng.integers(0, 6), replace=False) for _ in range(nf)]
        ptr = np.concatenate([[0], np.cumsum([len(r) for r in routes])]).astype(np.int64)
        links = np.concatenate(routes + [np.zeros(0)]).astype(np.int64)
        link_bt = np.where(rng.random(nlinks) < 0.5, 0.0, rng.uniform(0.5, 2, nlinks))
        unit = rng.uniform(0.5, 2, nf)
        phi = rng.uniform(0.2, 3, nf) if trial % 2 else np.ones(nf)
        out_nic = nlinks + rng.integers(0, nnodes, nf)
        in_nic = nlinks + nnodes + rng.integers(0, nnodes, nf)
        rate, level = np.zeros(nf), np.zeros(nf)
        fl.share(np.arange(nf, dtype=np.int64), nf, rate, level, unit, phi,
                 np.arange(nf, dtype=np.int64), ptr, links, link_bt, True, out_nic, in_nic,
                 *fl.workspace(nlinks + 2 * nnodes))
        held = [list(r) + [out_nic[f], in_nic[f]] for f, r in enumerate(routes)]
        use = [[link_bt[i] / unit[f] if i < nlinks and link_bt[i] > 0 else 1.0 for i in h]
               for f, h in enumerate(held)]
        cap = {i: 1.0 for h in held for i in h}
        want, want_level, active = np.zeros(nf), np.zeros(nf), set(range(nf))
        while active:
            weight = {}
            for f in active:
                for i, u in zip(held[f], use[f]):
                    weight[i] = weight.get(i, 0.0) + u * phi[f]
            lv = min(cap[i] / w for i, w in weight.items())
            full = [i for i, w in weight.items() if cap[i] / w <= lv * (1 + 1e-12)]
            for f in [f for f in active if set(held[f]) & set(full)]:
                want[f], want_level[f] = min(lv * phi[f], 1.0), lv
                active.remove(f)
                for i, u in zip(held[f], use[f]):
                    cap[i] -= lv * u * phi[f]
        assert rate == pytest.approx(want, rel=1e-9), trial
        assert level == pytest.approx(want_level, rel=1e-9), trial
