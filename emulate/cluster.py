"""Bring an emulated cluster up and down: nodes as network namespaces.

Each node is a network namespace (``rr-NAME-n<k>``) whose one interface,
``eth0`` (address 10.200.0.<k+1>/24), is one end of a veth pair; the other
end is a port of a bridge in a hub namespace (``rr-NAME-hub``): a
non-blocking switch.  Both ends of every pair are shaped by a token bucket
(``tc tbf``) at the node's link rate, so each node has a full-duplex NIC of
that rate and a queue of ``queue`` seconds at it.  Nothing is created in
the namespace ``up`` runs in: the pairs are made directly inside the node
and hub namespaces, so the machine's own interfaces are never touched, and
deleting the namespaces removes everything (``down``).  ``tc`` here has no
``netem``: a link's latency is the stack's own, not set.

The cluster's description is kept in ``STATE/NAME/cluster.json`` (STATE is
``/run/repreplay-emulate``), beside ``STATE/NAME/mpiexec``, the launcher
that places ranks on its nodes (:mod:`emulate.launch`).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass

from . import cores

STATE = "/run/repreplay-emulate"
SUBNET = "10.200.0"                  # private to the namespaces: never routed from the host
MAX_NODES = 250                      # addresses .1 .. .250 of SUBNET
NAME = re.compile(r"^[a-z0-9]{1,8}$")  # namespace and interface names stay short


class EmulateError(RuntimeError):
    """A cluster that cannot be brought up, used or brought down; says why."""


@dataclass
class Cluster:
    """An emulated cluster: ``nodes`` namespaces of ``cores_per_node`` ranks
    each, joined by links of ``rate`` bits per second with ``queue`` seconds
    of buffering."""
    name: str
    nodes: int
    cores_per_node: int
    rate: float                      # bits per second of each node's link, each way
    queue: float = 0.05              # seconds of data a link's queue holds
    core_share: float | None = None  # virtual cores: each a share of a real CPU (emulate.cores)
    core_period: int | None = None   # their quota period, microseconds
    cpus: list[int] | None = None    # the real CPUs the virtual cores are pinned to, in turn

    def namespace(self, k: int) -> str:
        """The network namespace of node ``k``."""
        return f"rr-{self.name}-n{k}"

    @property
    def hub(self) -> str:
        """The namespace of the switch joining the nodes."""
        return f"rr-{self.name}-hub"

    def address(self, k: int) -> str:
        return f"{SUBNET}.{k + 1}"

    @property
    def state_dir(self) -> str:
        return os.path.join(STATE, self.name)

    @property
    def core(self) -> str:
        """The script that runs a command on one virtual core: ``core C cmd ...``."""
        return os.path.join(self.state_dir, "core")

    @property
    def mpiexec(self) -> str:
        """The launcher script: ``mpiexec -n N cmd ...`` on this cluster."""
        return os.path.join(self.state_dir, "mpiexec")

    def check(self) -> None:
        if not NAME.match(self.name):
            raise EmulateError(f"cluster name {self.name!r}: 1 to 8 lower-case letters or "
                               "digits (it becomes part of namespace names)")
        if not 1 <= self.nodes <= MAX_NODES:
            raise EmulateError(f"nodes {self.nodes}: between 1 and {MAX_NODES}")
        if self.cores_per_node < 1:
            raise EmulateError(f"cores per node {self.cores_per_node}: at least 1")
        if not self.rate > 0 or not self.queue > 0:
            raise EmulateError(f"rate {self.rate} bit/s and queue {self.queue} s must be > 0")
        if self.core_share is not None:
            try:
                cores.check_fits(self.nodes * self.cores_per_node, self.core_share,
                                 len(self.cpus or os.sched_getaffinity(0)))
                cores.period_us(self.core_share, self.core_period)
            except cores.CoreError as e:
                raise EmulateError(str(e)) from None


def _ip(*args: str) -> None:
    """Run one ``ip``/``tc`` command; a failure says which and why."""
    p = subprocess.run(list(args), capture_output=True, text=True)
    if p.returncode:
        raise EmulateError(f"{' '.join(args)}: {p.stderr.strip() or 'exit ' + str(p.returncode)}")


BURST_PACKETS = 2                    # Ethernet frames (1514 bytes) the bucket holds, at least


def _shape(c: Cluster, namespace: str, dev: str) -> None:
    """A token bucket at the link rate on ``dev``'s way out.  A NIC puts
    every byte on the wire at its rate, however long the link was idle;
    a bucket lets what it holds pass at once.  So it holds little: two
    frames, or 100 us of the rate on a fast link (the kernel's timers do
    not release frames more often: with 20 us, a 10 Gbit/s link moved
    1 MiB at 3 Gbit/s here; with 100 us at 9.6).  A bucket of 16 KiB let a
    halo exchange's 8 KiB through a 0.1 Gbit/s link without delay when
    the application computed between messages (the bucket refilled).  The
    kernel hands veth segments of up to 64 KiB; tbf cuts them into frames
    that fit."""
    burst = max(BURST_PACKETS * 1514, int(c.rate / 8 * 100e-6))
    limit = max(4 * burst, int(c.rate / 8 * c.queue))
    _ip("ip", "netns", "exec", namespace, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
        "rate", f"{int(c.rate)}bit", "burst", str(burst), "limit", str(limit))


def existing(name: str) -> list[str]:
    """The namespaces of cluster ``name`` that exist now."""
    p = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    return [line.split()[0] for line in p.stdout.splitlines()
            if line.split() and line.split()[0].startswith(f"rr-{name}-")]


def up(c: Cluster, log=print, owner: str = "up") -> Cluster:
    """Create cluster ``c`` (its namespaces, links, shaping, virtual cores
    where it has a core share, launcher and state file).  On any failure
    everything created so far is removed and the error says which command
    failed.  ``owner``: the process id of an isolated run whose end makes
    the virtual cores stale (emulate.cores), or ``up``."""
    if c.core_share is not None:
        c.cpus = c.cpus or sorted(os.sched_getaffinity(0))
    c.check()
    if c.core_share is not None:
        c.core_period = cores.period_us(c.core_share, c.core_period)
    if os.geteuid() != 0:
        raise EmulateError("an emulated cluster needs root (network namespaces, tc)")
    if shutil.which("ip") is None or shutil.which("tc") is None:
        raise EmulateError("needs the ip and tc commands (Debian: iproute2)")
    if existing(c.name) or os.path.exists(c.state_dir):
        raise EmulateError(f"cluster {c.name!r} exists already; `python -m emulate down "
                           f"--name {c.name}` first")
    try:
        _ip("ip", "netns", "add", c.hub)
        _ip("ip", "-n", c.hub, "link", "set", "lo", "up")
        _ip("ip", "-n", c.hub, "link", "add", "br0", "type", "bridge")
        _ip("ip", "-n", c.hub, "link", "set", "br0", "up")
        for k in range(c.nodes):
            ns, port = c.namespace(k), f"p{k}"
            _ip("ip", "netns", "add", ns)
            _ip("ip", "-n", ns, "link", "set", "lo", "up")
            # both ends made where they live: the calling namespace never has them
            _ip("ip", "link", "add", "eth0", "netns", ns, "type", "veth",
                "peer", "name", port, "netns", c.hub)
            _ip("ip", "-n", ns, "addr", "add", f"{c.address(k)}/24", "dev", "eth0")
            _ip("ip", "-n", ns, "link", "set", "eth0", "up")
            _ip("ip", "-n", c.hub, "link", "set", port, "master", "br0")
            _ip("ip", "-n", c.hub, "link", "set", port, "up")
            _shape(c, ns, "eth0")
            _shape(c, c.hub, port)
        os.makedirs(c.state_dir)
        if c.core_share is not None:
            try:
                top = cores.make(c.name, c.nodes * c.cores_per_node, c.core_share,
                                 c.core_period or 0, owner)
            except (cores.CoreError, OSError) as e:
                raise EmulateError(str(e)) from None
            with open(c.core, "w") as f:
                f.write(cores.core_script(c.name, top, c.nodes * c.cores_per_node,
                                          c.core_share, c.core_period or 0, c.cpus or [0]))
            os.chmod(c.core, 0o755)
        with open(os.path.join(c.state_dir, "cluster.json"), "w") as f:
            json.dump(asdict(c), f, indent=1)
        with open(c.mpiexec, "w") as f:
            f.write(f"#!/bin/sh\n# mpiexec on the emulated cluster {c.name}\n"
                    f"exec {sys.executable} -m emulate mpiexec --name {c.name} \"$@\"\n")
        os.chmod(c.mpiexec, 0o755)
    except BaseException:
        down(c.name, log=lambda s: None)
        raise
    log(f"cluster {c.name}: {c.nodes} nodes x {c.cores_per_node} cores{describe_cores(c)}, "
        f"links of {c.rate / 1e9:g} Gbit/s each way; launcher {c.mpiexec}")
    return c


def describe_cores(c: Cluster) -> str:
    """`` (virtual: 0.1 of a CPU each, ...)`` for a cluster with virtual cores, else ''."""
    if c.core_share is None:
        return ""
    return (f" (virtual: {c.core_share:g} of a CPU each, quota period "
            f"{(c.core_period or 0) / 1000:g} ms, on CPUs {','.join(map(str, c.cpus or []))}; "
            f"one core: {c.core} C COMMAND)")


def load(name: str) -> Cluster:
    """The cluster ``name`` as ``up`` described it."""
    path = os.path.join(STATE, name, "cluster.json")
    try:
        with open(path) as f:
            c = Cluster(**json.load(f))
    except FileNotFoundError:
        raise EmulateError(f"no emulated cluster {name!r} ({path} missing); "
                           "`python -m emulate up` first") from None
    except (ValueError, TypeError) as e:
        raise EmulateError(f"{path}: not a cluster description ({e})") from None
    present = set(existing(name))                 # one `ip netns list`, not one per node
    missing = [c.namespace(k) for k in range(c.nodes) if c.namespace(k) not in present]
    if missing:
        raise EmulateError(f"cluster {name!r}: namespaces {', '.join(missing)} are gone; "
                           "`python -m emulate down` and up again")
    return c


def down(name: str, log=print) -> int:
    """Remove every namespace of cluster ``name`` (their links and queues go
    with them) and its state; returns how many namespaces were removed."""
    if not NAME.match(name):
        raise EmulateError(f"cluster name {name!r}: 1 to 8 lower-case letters or digits")
    gone = existing(name)
    for ns in gone:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    shutil.rmtree(os.path.join(STATE, name), ignore_errors=True)
    groups = []
    if cores.unavailable() is None:
        try:
            groups = cores.remove(name)
        except OSError as e:
            raise EmulateError(f"could not remove the virtual cores of {name}: {e}") from None
    left = existing(name)
    if left:
        raise EmulateError(f"could not remove {', '.join(left)}")
    log(f"cluster {name}: removed {len(gone)} namespaces"
        + (f" and the virtual cores {', '.join(groups)}" if groups else ""))
    return len(gone)
