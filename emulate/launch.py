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
"""
from __future__ import annotations

import os
import sys

from .cluster import Cluster, EmulateError

# MPICH over TCP on the node's interface, never shared memory (see above)
TRANSPORT = {"MPIR_CVAR_NOLOCAL": "1", "MPIR_CVAR_CH4_NETMOD": "ofi",
             "FI_PROVIDER": "tcp", "FI_TCP_IFACE": "eth0"}


def placement(c: Cluster, ranks: int) -> list[int]:
    """Ranks per node, block-wise (node 0 first); an error if they do not fit."""
    if ranks < 1:
        raise EmulateError(f"-n {ranks}: at least one rank")
    if ranks > c.nodes * c.cores_per_node:
        raise EmulateError(f"-n {ranks}: cluster {c.name} has {c.nodes} nodes x "
                           f"{c.cores_per_node} cores = {c.nodes * c.cores_per_node} ranks")
    full, rest = divmod(ranks, c.cores_per_node)
    return [c.cores_per_node] * full + ([rest] if rest else [])


def command(c: Cluster, ranks: int, argv: list[str], mpiexec: str | None = None) -> list[str]:
    """The hydra command line that runs ``argv`` at ``ranks`` ranks on ``c``."""
    mpiexec = mpiexec or os.path.join(os.path.dirname(sys.executable), "mpiexec")
    cmd = [mpiexec]
    for name, v in TRANSPORT.items():
        cmd += ["-genv", name, v]
    for k, count in enumerate(placement(c, ranks)):
        if k:
            cmd.append(":")
        cmd += ["-n", str(count), "ip", "netns", "exec", c.namespace(k)] + list(argv)
    return cmd


def split_mpiexec_args(argv: list[str]) -> tuple[int, list[str]]:
    """``-n N`` (or ``-np N``) and the command after it, as mpiexec takes them."""
    if len(argv) >= 2 and argv[0] in ("-n", "-np"):
        try:
            return int(argv[1]), argv[2:]
        except ValueError:
            pass
    raise EmulateError("expected -n N COMMAND [ARGS...] (as mpiexec takes them), got "
                       + " ".join(argv[:3]))
