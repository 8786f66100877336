"""How ranks wait in MPI during a traced or recorded run.

A rank blocked in an MPICH call spins by default.  With more ranks than
cores on a node, a spinning rank steals the core of the rank it waits for,
so there waiting ranks must give their core away
(``MPIR_CVAR_ENABLE_HEAVY_YIELD=1``: they sleep between polls).  With a
core per rank they must not: the real run spins, and a rank that sleeps in
every wait computes more slowly after it (a pseudo-spectral solver's
spans were 8 % longer, and the whole run 4x longer, with sleeping waits),
so its traced computation would not be the real run's.

Decided per node before MPI starts (MPICH reads the variable at
initialisation), unless the user set it.
"""
from __future__ import annotations

import os

YIELD = "MPIR_CVAR_ENABLE_HEAVY_YIELD"
# launchers' per-node rank counts: MPICH's hydra, Open MPI, SLURM's srun
_LOCAL_RANKS = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE")


def local_ranks(env=os.environ) -> int | None:
    """Ranks on this node, as the launcher says; None if it does not."""
    for name in _LOCAL_RANKS:
        try:
            return int(env[name])
        except (KeyError, ValueError):
            continue
    return None


def cores() -> int:
    """Cores this process may run on; the node's when it is bound to one
    (a launcher binding ranks gives each its own)."""
    try:
        mine = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        mine = 0
    return mine if mine > 1 else (os.cpu_count() or 1)


def _sharing(n: int) -> str:
    return f"{n} ranks on this node's {cores()} cores"


def choose_waits(env=os.environ) -> str | None:
    """Set ``MPIR_CVAR_ENABLE_HEAVY_YIELD=1`` in ``env`` when this node has
    more ranks than cores and the user left the variable unset; returns a
    line saying so, or None when nothing was changed."""
    if YIELD in env:
        return None
    n = local_ranks(env)
    if n is None or n <= cores():
        return None
    env[YIELD] = "1"
    return (f"{_sharing(n)}: waiting ranks yield their core "
            f"({YIELD}=1; set it to 0 or 1 to choose)")


def recorded(note: str | None, env=os.environ) -> dict:
    """How this node's ranks wait, for the trace's meta.json: ``yield``
    (bool) and ``why``."""
    value, n = env.get(YIELD), local_ranks(env)
    if value is not None and not note:         # a note: set by choose_waits()
        why = f"{YIELD}={value}, set by the user"
    elif n is None:
        why = "the launcher did not say how many ranks share a node: left spinning"
    else:
        why = _sharing(n)
    return {"yield": value not in (None, "", "0"), "why": why}
