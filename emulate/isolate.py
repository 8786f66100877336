"""Run a command where the clusters it makes cannot outlive it.

The command is started in a private network namespace and a private mount
namespace (``unshare --net --mount``) with a fresh ``/run``: the
namespaces a cluster names live as mounts in that ``/run``, so when the
command ends, however it ends, the kernel removes every namespace, link
and queue it created, and the machine's own network and ``/run`` are
never touched.  Used by ``python -m emulate run``, the tests and the
porting-study benchmark.
"""
from __future__ import annotations

import os
import shutil
import subprocess

from .cluster import EmulateError

MARK = "EMULATE_ISOLATED"            # set inside: the command is already isolated


def available() -> str | None:
    """None if isolation works here, else why not."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, tc)"
    for tool in ("unshare", "ip", "tc", "mount"):
        if shutil.which(tool) is None:
            return f"needs the {tool} command"
    p = subprocess.run(["unshare", "--net", "--mount", "--propagation", "private", "true"],
                       capture_output=True, text=True)
    if p.returncode:
        return f"unshare --net --mount fails here: {p.stderr.strip()}"
    return None


def isolated(argv: list[str], env: dict | None = None) -> int:
    """Run ``argv`` isolated (see above) and return its exit status; inside,
    :func:`enter` must be called before making a cluster."""
    why = available()
    if why:
        raise EmulateError(f"an emulated cluster {why}")
    env = dict(os.environ if env is None else env, **{MARK: "1"})
    return subprocess.run(["unshare", "--net", "--mount", "--propagation", "private", "--"]
                          + list(argv), env=env).returncode


def enter() -> None:
    """Inside an isolated command: a fresh /run and the loopback up (hydra's
    mpiexec talks to its proxy over it)."""
    if os.environ.get(MARK) != "1":
        raise EmulateError("not inside an isolated command (emulate.isolate.isolated)")
    subprocess.run(["mount", "-t", "tmpfs", "emulate", "/run"], check=True)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
