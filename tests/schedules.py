"""Hand-built schedules and a small two-level platform, shared by the
simulator's tests and the interop tests."""
from netsim import Builder, from_dict
from netsim.collectives import steps
from netsim.engine import RECV, SEND

US = 1e-6


def platform(**over):
    """8 nodes of 2 cores, two levels (node, net), eager up to 1000 bytes;
    ``over`` replaces top-level keys and merges into ``network``."""
    d = {"nodes": 8, "cores_per_node": 2,
         "network": {"levels": [{"name": "node", "span": 2, "latency": 1 * US, "byte_time": 1e-9},
                                {"name": "net", "latency": 7 * US, "byte_time": 4e-9}],
                     "overhead": {"send": 0.5 * US, "recv": 0.5 * US},
                     "eager_limit": 1000}}
    net = over.pop("network", {})
    d["network"].update(net)
    d.update(over)
    return from_dict(d, "test-platform")


def collective_schedule(family, alg, p, n, root=0):
    """One collective of ``family`` by algorithm ``alg`` over ``p`` ranks,
    ``n`` bytes, as the point-to-point steps it decomposes into."""
    B = Builder(p)
    for i in range(p):
        prev = []
        for sends, recvs in steps(family, alg, i, p, root, n):
            step = [B.op(SEND, i, prev, peer=j, size=int(b), tag=0, ctx=1) for j, b in sends]
            step += [B.op(RECV, i, prev, peer=j, size=int(b), tag=0, ctx=1) for j, b in recvs]
            prev = [(x, False) for x in step]
    return B.done()
