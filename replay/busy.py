"""Was the replay's node busy?  Wall time against CPU time, span by span.

A replayed span is the application computing alone: nothing is received
from anyone, so wall time above CPU time is the node taking the core away
(another process, an oversubscribed host), or the application sleeping or
reading files.  A span is *disturbed* when its wall time exceeds its CPU
time by more than ``TOLERANCE`` of it and by more than ``FLOOR`` seconds
(timers and the scheduler's tick blur shorter differences).  Polling that
found nothing is folded into the next call's row (``polls``, ``poll_cpu``:
CPU time only), so it is never taken for disturbance.

What the replay, expand, netsim and the report make of it:

* the *disturbed share*: the wall time above CPU time in disturbed spans,
  over the replay's total; above ``WARN_SHARE`` every stage says so;
* the computation's *band*: per span, the low end takes a disturbed span
  at its CPU time, the high end at its wall time (with ``--repeats``, the
  least and the most each span took over the repeats); netsim simulates
  both ends, and the prediction carries them as its band.
"""
from __future__ import annotations

import numpy as np

TOLERANCE = 0.10
FLOOR = 50e-6
WARN_SHARE = 0.05


def disturbed(comp: np.ndarray, cpu: np.ndarray) -> np.ndarray:
    """Mask of the spans whose wall time ``comp`` exceeds their CPU time
    ``cpu`` by more than the tolerance."""
    comp, cpu = np.asarray(comp, float), np.asarray(cpu, float)
    return (comp - cpu) > np.maximum(FLOOR, TOLERANCE * cpu)


def disturbed_share(comp: np.ndarray, cpu: np.ndarray) -> float:
    """Wall time above CPU time in disturbed spans, over the total wall time."""
    comp, cpu = np.asarray(comp, float), np.asarray(cpu, float)
    m = disturbed(comp, cpu)
    total = comp.sum()
    return float((comp[m] - cpu[m]).sum() / total) if total > 0 else 0.0


def describe(rank: int, comp, cpu) -> str | None:
    """A warning for a replay whose node was busy, or None."""
    share = disturbed_share(comp, cpu)
    if share <= WARN_SHARE:
        return None
    n = int(disturbed(comp, cpu).sum())
    return (f"rank {rank}: the node was busy during its replay: {n} of {len(comp)} spans "
            f"took longer than their CPU time, {100 * share:.0f} % of the replayed "
            f"computation; replay on an idle node, or with --repeats")
