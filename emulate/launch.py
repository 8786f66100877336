"""Start an MPI job on an emulated cluster (``python -m emulate mpiexec``).

Takes what a plain ``mpiexec -n N command ...`` takes and places the ranks
block-wise on the cluster's nodes (``cores_per_node`` each, node after
node), each started inside its node's namespace by hydra's MPMD form::

    mpiexec -genv ... -n C ip netns exec rr-NAME-n0 command : \\
            -n C ip netns exec rr-NAME-n1 command ...

MPICH must then talk over the emulated network, not shared memory: with
ranks of one mpiexec it would take every peer for a neighbour on the same
node (hydra starts them all from one proxy) and copy through memory, and
the links' shaping would do nothing.  ``MPIR_CVAR_NOLOCAL=1`` and the
libfabric TCP provider on ``eth0`` force every message onto the node's
interface: ranks on one node talk through that node's loopback (unshaped),
ranks on different nodes through the links.

On a cluster with virtual cores (emulate.cores) each rank starts through
the cluster's ``core`` script, before entering its node's namespace, so
that it runs on its node's virtual core: ``-n C -env EMULATE_RANK0 R
-env EMULATE_CORE0 K core - ip netns exec ... command``, where R is the
node's first rank and K its first core.
"""
from __future__ import annotations

import os
import sys

from .cluster import Cluster, EmulateError

# MPICH over TCP on the node's interface, never shared memory (see above)
TRANSPORT = {"MPIR_CVAR_NOLOCAL": "1", "MPIR_CVAR_CH4_NETMOD": "ofi",
             "FI_PROVIDER": "tcp", "FI_TCP_IFACE": "eth0"}


def placement(c: Cluster, ranks: int, per_node: int | None = None) -> list[int]:
    """Ranks per node, block-wise (node 0 first), ``per_node`` on each
    (default: all its cores); an error if they do not fit."""
    per_node = per_node or c.cores_per_node
    if ranks < 1:
        raise EmulateError(f"-n {ranks}: at least one rank")
    if not 1 <= per_node <= c.cores_per_node:
        raise EmulateError(f"-ppn {per_node}: between 1 and the {c.cores_per_node} cores "
                           f"of a node of cluster {c.name}")
    if ranks > c.nodes * per_node:
        what = "cores" if per_node == c.cores_per_node else "ranks per node"
        raise EmulateError(f"-n {ranks}: cluster {c.name} has {c.nodes} nodes x "
                           f"{per_node} {what} = {c.nodes * per_node} ranks")
    full, rest = divmod(ranks, per_node)
    return [per_node] * full + ([rest] if rest else [])


def command(c: Cluster, ranks: int, argv: list[str], mpiexec: str | None = None,
            per_node: int | None = None) -> list[str]:
    """The hydra command line that runs ``argv`` at ``ranks`` ranks on ``c``."""
    mpiexec = mpiexec or os.path.join(os.path.dirname(sys.executable), "mpiexec")
    cmd = [mpiexec]
    for name, v in TRANSPORT.items():
        cmd += ["-genv", name, v]
    first = 0
    for k, count in enumerate(placement(c, ranks, per_node)):
        if k:
            cmd.append(":")
        cmd += ["-n", str(count)]
        if c.core_share is not None:
            cmd += ["-env", "EMULATE_RANK0", str(first), "-env", "EMULATE_CORE0",
                    str(k * c.cores_per_node), c.core, "-"]
        cmd += ["ip", "netns", "exec", c.namespace(k)] + list(argv)
        first += count
    return cmd


def split_mpiexec_args(argv: list[str]) -> tuple[int, int | None, list[str]]:
    """``-n N`` (or ``-np N``), an optional ``-ppn P`` (ranks per node)
    and the command after them, as mpiexec takes them."""
    ranks = per_node = None
    rest = list(argv)
    while len(rest) >= 2 and rest[0] in ("-n", "-np", "-ppn"):
        try:
            value = int(rest[1])
        except ValueError:
            break
        if rest[0] == "-ppn":
            per_node = value
        else:
            ranks = value
        rest = rest[2:]
    if ranks is None or not rest:
        raise EmulateError("expected -n N [-ppn P] COMMAND [ARGS...] (as mpiexec takes them), "
                           "got " + " ".join(argv[:3]))
    return ranks, per_node, rest
