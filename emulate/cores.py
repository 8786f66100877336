"""Virtual cores: every core of an emulated cluster a fixed share of a real one.

A cluster brought up with a core share F (``python -m emulate up
--core-share F``) gives each of its cores a CPU-quota group of its own:
the cgroup v1 ``cpu`` controller's bandwidth limit, ``cpu.cfs_quota_us``
= F x ``cpu.cfs_period_us``.  A process in the group runs at most F of
every period whatever its neighbours do, so it computes 1/F times slower
than on a free core: a slow core of its own, and N of them fit on this
machine's few while N x F stays below its CPUs.  Each group's processes
are also pinned to one of this machine's CPUs (round-robin, as MPICH's
``-bind-to core`` would), so that a rank keeps its caches.

Why these quotas: they are per group (a rank and whatever it starts),
inherited across fork and exec, and need nothing from the application.
SCHED_DEADLINE can fork only with its reset-on-fork flag (the children
then run unthrottled), cannot be pinned, and is enforced at the
scheduler's tick like the quota, so it quantises no finer here
(bench/probes/deadline_probe.py); cgroup v2's ``cpu.max`` is the same
mechanism as the quota, not mounted for writing here.

The groups live under ``/sys/fs/cgroup/cpu/repreplay-emulate/``, one
folder per cluster, ``NAME-OWNER``: OWNER is the process id of an
isolated ``emulate run`` (the groups are stale once it is gone and are
removed by the next ``up``, ``run`` or ``down``), or ``up`` for a cluster
that lives until ``down``.  Inside it, ``core<C>`` for C = 0 ... nodes x
cores - 1, node k's cores being k x cores ... (k + 1) x cores - 1.

A process enters its core through the cluster's ``core`` script
(``STATE/NAME/core C COMMAND...``; ``-`` for C: the rank's own core, from
hydra's ``PMI_RANK``), which joins the group, pins itself and execs
COMMAND with ``REPREPLAY_CORE_SHARE=F`` and ``REPREPLAY_CORE_PERIOD``
(seconds) set: replay reports a span of such a core as its CPU seconds
divided by F, the core's own clock (replay.run.on_core_share).

What it cannot emulate, measured in bench/virtual_cores.py: the quota is
handed out in periods (at least 1 ms of quota), so a rank that runs out
of quota just before its message arrives waits up to the rest of the
period; the virtual cores time-share the real cores' caches and memory
bandwidth; and the kernel's own work for a process (its TCP stack) is
charged to whichever process the kernel runs it for.
"""
from __future__ import annotations

import math
import os
import re
import shutil

CPU_CONTROLLER = "/sys/fs/cgroup/cpu"
ROOT = os.path.join(CPU_CONTROLLER, "repreplay-emulate")
MIN_QUOTA_US = 1000                   # the kernel refuses a smaller quota
DEFAULT_PERIOD_US = 10000
MAX_LOAD = 0.9                        # of the real CPUs: room for hydra, the kernel


# what the ``core`` script tells the processes it starts: their core's share
# of a real CPU and its quota period (seconds)
SHARE_ENV = "REPREPLAY_CORE_SHARE"
PERIOD_ENV = "REPREPLAY_CORE_PERIOD"


def own_core() -> tuple[float, float]:
    """This process's core: (share F, quota period in seconds); (1.0, 0.0)
    outside a virtual core."""
    return (float(os.environ.get(SHARE_ENV) or 1.0),
            float(os.environ.get(PERIOD_ENV) or 0.0))


class CoreError(RuntimeError):
    """Virtual cores that cannot be made or removed here; says why."""


def period_us(share: float, asked: int | None = None) -> int:
    """The quota period for cores of ``share``: ``asked`` if given, else
    10 ms, longer where F x 10 ms would be under the kernel's 1 ms least
    quota.  A shorter period quantises finer: what a synchronisation can
    lose is about one quota of the core's own time."""
    least = math.ceil(MIN_QUOTA_US / share)
    if asked is not None:
        if asked < least:
            raise CoreError(f"period {asked} us: a share of {share:g} needs at least "
                            f"{least} us (a quota is at least {MIN_QUOTA_US} us)")
        return asked
    return max(DEFAULT_PERIOD_US, least)


def unavailable() -> str | None:
    """None if virtual cores can be made here, else why not."""
    if os.geteuid() != 0:
        return "virtual cores need root (CPU-quota groups)"
    if not os.path.exists(os.path.join(CPU_CONTROLLER, "cpu.cfs_quota_us")):
        return (f"no cgroup v1 cpu controller at {CPU_CONTROLLER} (cpu.cfs_quota_us): "
                "virtual cores need CPU-quota groups")
    if not os.access(CPU_CONTROLLER, os.W_OK):
        return f"{CPU_CONTROLLER} is not writable"
    if shutil.which("taskset") is None:
        return "virtual cores need the taskset command (Debian: util-linux)"
    return None


def check_fits(cores: int, share: float, cpus: int) -> None:
    """Refuse cores that this machine's CPUs cannot all give their share."""
    if not 0 < share <= 1:
        raise CoreError(f"core share {share:g}: between 0 and 1 (a fraction of a core)")
    if cores * share > MAX_LOAD * cpus + 1e-9:
        raise CoreError(f"{cores} virtual cores at {share:g} of a core need "
                        f"{cores * share:g} CPUs; this machine lends {cpus} (at most "
                        f"{MAX_LOAD:.0%} of them: hydra and the kernel need the rest): "
                        f"a share of at most {MAX_LOAD * cpus / cores:.3g}")


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, killed and not yet reaped by
    whoever inherited it, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def _folders() -> list[str]:
    try:
        return sorted(f for f in os.listdir(ROOT) if os.path.isdir(os.path.join(ROOT, f)))
    except FileNotFoundError:
        return []


def _release(folder: str) -> None:
    """Move whatever still runs in a cluster's groups back to the root
    group, then remove the groups (a group with a process cannot go)."""
    top = os.path.join(ROOT, folder)
    for core in sorted(os.listdir(top)):
        path = os.path.join(top, core)
        if not os.path.isdir(path):
            continue
        try:
            with open(os.path.join(path, "cgroup.procs")) as f:
                pids = f.read().split()
        except FileNotFoundError:
            continue
        for pid in pids:
            try:
                with open(os.path.join(CPU_CONTROLLER, "cgroup.procs"), "w") as f:
                    f.write(pid)
            except OSError:
                pass                  # ended meanwhile
        os.rmdir(path)
    os.rmdir(top)


def prune() -> list[str]:
    """Remove the groups of isolated runs that are gone; their names."""
    gone = []
    for folder in _folders():
        owner = folder.rsplit("-", 1)[-1]
        if owner.isdigit() and not _alive(int(owner)):
            _release(folder)
            gone.append(folder)
    return gone


def make(name: str, cores: int, share: float, period: int, owner: str) -> str:
    """Create cluster ``name``'s groups (``cores`` of ``share``, quota
    period ``period`` us); returns their folder.  Refuses while another
    cluster has virtual cores: both would take the same real CPUs."""
    why = unavailable()
    if why:
        raise CoreError(why)
    prune()
    others = _folders()
    if others:
        raise CoreError(f"another emulated cluster has virtual cores ({', '.join(others)} in "
                        f"{ROOT}): they would share this machine's CPUs; `python -m emulate "
                        f"down --name NAME` it first")
    top = os.path.join(ROOT, f"{name}-{owner}")
    os.makedirs(top)
    try:
        quota = max(MIN_QUOTA_US, round(share * period))
        for c in range(cores):
            path = os.path.join(top, f"core{c}")
            os.mkdir(path)
            # the period first: a quota longer than the old period is refused
            _write(path, "cpu.cfs_period_us", period)
            _write(path, "cpu.cfs_quota_us", quota)
            if os.path.exists(os.path.join(path, "cpu.cfs_burst_us")):
                _write(path, "cpu.cfs_burst_us", 0)      # no saved-up quota spent at once
    except BaseException:
        _release(f"{name}-{owner}")
        raise
    return top


def _write(group: str, knob: str, value: int) -> None:
    try:
        with open(os.path.join(group, knob), "w") as f:
            f.write(str(value))
    except OSError as e:
        raise CoreError(f"{os.path.join(group, knob)} = {value}: {e.strerror}") from None


def remove(name: str) -> list[str]:
    """Remove cluster ``name``'s groups, whoever made them; their folders."""
    gone = [f for f in _folders() if re.fullmatch(rf"{re.escape(name)}-(up|\d+)", f)]
    for folder in gone:
        _release(folder)
    prune()
    if not _folders():
        try:
            os.rmdir(ROOT)
        except OSError:
            pass
    return gone


def core_script(name: str, top: str, cores: int, share: float, period: int,
                cpus: list[int]) -> str:
    """The text of the cluster's ``core`` script (see the module's text)."""
    return f"""#!/bin/sh
# core C COMMAND...: COMMAND on virtual core C of the emulated cluster {name}
# (- for C: this rank's core, node's first core + PMI_RANK - node's first rank)
c=$1; shift
if [ "$c" = - ]; then c=$((EMULATE_CORE0 + PMI_RANK - EMULATE_RANK0)); fi
case "$c" in ''|*[!0-9]*) echo "core: '$c' is not a core number" >&2; exit 2;; esac
if [ "$c" -ge {cores} ]; then
    echo "core: no core $c: cluster {name} has {cores} (0-{cores - 1})" >&2; exit 2
fi
if [ $# -eq 0 ]; then echo "usage: core C COMMAND [ARGS...]" >&2; exit 2; fi
echo $$ > {top}/core$c/cgroup.procs || exit 1
cpu=$(echo "{' '.join(map(str, cpus))}" | cut -d' ' -f$((c % {len(cpus)} + 1)))
export {SHARE_ENV}={share!r} {PERIOD_ENV}={period / 1e6!r}
exec taskset -c "$cpu" "$@"
"""
