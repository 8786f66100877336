"""Computation variability in the simulation: seeded samples of the run.

A real run waits, at every synchronisation, for the slowest of its ranks,
and its ranks do not compute alike: each runs on a core of its own speed,
each run of it differs a little, and each span differs from the last.  The
replay measures all three on the target node (replay/variability.py: each
representative as K copies, one per core, over several rounds).  Giving
every member its representative's single least disturbed time predicts
the *fastest* run; the expected wait for the slowest of N grows with N.

A sample of the run draws, for every rank:

* its core: per node, the K measured cores dealt to the node's slots in
  a random order (slot s takes the permutation's ``s mod K``-th core), so
  that a node of K ranks has each measured core once and its slowest core
  sets the pace, as in a real run;
* its run: a factor ``exp(sigma_run * z - sigma_run**2 / 2)`` (mean 1);
* each span of its own computation: ``exp(sigma_span * z - sigma_span**2 /
  2)`` (mean 1), independent from span to span and rank to rank;

and multiplies the application's work in every op by core x run x span
(the schedule's ``work``: the spans and the work inside calls, not what
the platform charges per call).  The trace is lowered once; only the
durations change from sample to sample.  Sample m uses the generator
``numpy.random.default_rng([seed, m])``: a prediction is reproduced from
its seed.  The prediction is the median sample (M odd: the middle one),
its band the 5th to 95th percentile of the M samples.  Where nothing was
measured to vary (every factor 1, both sigmas 0) every sample is the
unsampled run, and the prediction is the same to the digit.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:        # annotations only: pandas stays off the simulator's start-up
    import pandas as pd

from .schedule import Schedule, ScheduleError

SAMPLES = 15                     # odd: the median is one of the samples
SEED = 0


def mean_one(sigma, z):
    """The factor of a draw ``z`` (standard normal) of noise ``sigma``:
    ``exp(sigma z - sigma**2 / 2)``, log-normal of mean 1."""
    return np.exp(sigma * z - sigma * sigma / 2)


class Variability:
    """The measured table (replay/variability.py's columns) and its sampling.

    ``fit``-like construction from the table; :meth:`durations` gives
    sample m's op durations for a schedule."""

    def __init__(self, table: pd.DataFrame, samples: int = SAMPLES, seed: int = SEED):
        if samples < 1:
            raise ScheduleError(f"--samples must be >= 1, not {samples}")
        self.samples, self.seed = samples, seed
        self.factor = {int(r): g.sort_values("copy")["factor"].to_numpy(float)
                       for r, g in table.groupby("representative")}
        first = table.groupby("representative").first()
        self.sigma_run = {int(r): float(v) for r, v in first["sigma_run"].items()}
        self.sigma_span = {int(r): float(v) for r, v in first["sigma_span"].items()}
        self.rounds = {int(r): int(v) for r, v in first["rounds"].items()}

    @property
    def nil(self) -> bool:
        """Nothing was measured to vary: sampling would change nothing."""
        return all((f == 1).all() for f in self.factor.values()) and \
            not any(self.sigma_run.values()) and not any(self.sigma_span.values())

    def _per_rank(self, rep_of_rank: np.ndarray, table: dict) -> np.ndarray:
        reps = np.unique(rep_of_rank)
        lost = [int(r) for r in reps if int(r) not in table]
        if lost:
            raise ScheduleError(f"the variability table has no rows for representative(s) "
                                f"{lost[:10]} of the computation table")
        lookup = np.array([table[int(r)] for r in reps], dtype=float)
        return lookup[np.searchsorted(reps, rep_of_rank)]

    def rank_factors(self, m: int, rep_of_rank: np.ndarray, core_of_rank: np.ndarray,
                     cores_per_node: int) -> np.ndarray:
        """Sample m's core x run factor of every rank (the span noise aside)."""
        rng = np.random.default_rng([self.seed, m])
        n = len(rep_of_rank)
        k = max(len(f) for f in self.factor.values())
        node, slot = core_of_rank // cores_per_node, core_of_rank % cores_per_node
        deal = rng.permuted(np.tile(np.arange(k), (int(node.max()) + 1, 1)), axis=1)
        copy = deal[node, slot % k]
        f = np.ones(n)
        for rep, factors in self.factor.items():
            mine = rep_of_rank == rep
            f[mine] = factors[copy[mine] % len(factors)]
        s = self._per_rank(rep_of_rank, self.sigma_run)
        return f * mean_one(s, rng.standard_normal(n))

    def span_noise(self, m: int, events: int) -> np.ndarray:
        """Sample m's standard normal draw per trace event (its span noise
        is ``exp(sigma_span z - sigma_span**2 / 2)``, sigma_span that of
        the rank that runs it): from a stream of its own, so that the rank
        factors stay the same whatever the number of events."""
        return np.random.default_rng([self.seed, m, 1]).standard_normal(events)

    def sigma_span_of(self, rep_of_rank: np.ndarray) -> np.ndarray:
        """sigma_span per rank."""
        return self._per_rank(rep_of_rank, self.sigma_span)

    def durations(self, s: Schedule, factors: np.ndarray, z: np.ndarray,
                  sigma: np.ndarray) -> np.ndarray:
        """The duration of every op of ``s`` (lowered with ``work``) in a
        sample whose ranks run at ``factors`` (per rank), whose events draw
        ``z`` (per trace event of ``s``) and whose ranks' span noise is
        ``sigma`` (per rank)."""
        if s.work is None:
            raise ScheduleError("this schedule does not say which of its time is the "
                                "application's work (a GOAL file): it cannot be sampled")
        at = np.flatnonzero(s.work > 0)
        sig = sigma[s.rank[at]]
        noise = mean_one(sig, z[s.event[at]])
        dur = s.dur.copy()
        dur[at] = np.maximum(dur[at] + s.work[at] * (factors[s.rank[at]] * noise - 1), 0.0)
        return dur

    def describe(self) -> dict:
        """The distribution sampled, for the prediction JSON."""
        return {"samples": self.samples, "seed": self.seed,
                "generator": "numpy.random.default_rng([seed, sample])",
                "representatives": [
                    {"representative": r, "core_factors": [float(v) for v in f],
                     "sigma_run": self.sigma_run[r], "sigma_span": self.sigma_span[r],
                     "rounds": self.rounds[r]} for r, f in sorted(self.factor.items())]}


def run_samples(s: Schedule, platform, var: Variability, rep_of_rank: np.ndarray, run,
                progress=None, lower=None, events: int | None = None):
    """Simulate ``var.samples`` samples of ``s`` with ``run(schedule,
    platform)`` (netsim.predict.run).  ``lower(m, factors, z)``, where
    given, makes each sample's schedule and the draws of its events (a task
    pool dealt anew for the sample's speeds: netsim/pools.py); else every
    sample re-times ``s``.  Returns (the median sample's Result, every
    sample's predicted time in sample order, the median sample's index,
    the median sample's schedule).
    ``events``: the trace's events (default: those ``s`` names); a schedule
    made without a trace (no op names its event) draws per op."""
    core = platform.core_of(s.nranks)
    rep_of_rank = np.asarray(rep_of_rank)
    sigma = var.sigma_span_of(rep_of_rank)
    if len(s) and (s.event < 0).any():
        s = dataclasses.replace(s, event=np.arange(len(s)))
    if events is None:
        events = int(s.event.max()) + 1 if len(s) else 0

    def one(m):
        f = var.rank_factors(m, rep_of_rank, core, platform.cores_per_node)
        z = var.span_noise(m, events)
        sm, zm = lower(m, f, z) if lower else (s, z)
        sm = dataclasses.replace(sm, dur=var.durations(sm, f, zm, sigma))
        return run(sm, platform), sm
    times, secs = [], 0.0
    for m in range(var.samples):
        res, _ = one(m)
        times.append(res.predicted_time)
        secs += res.seconds
        if progress:
            progress(m, res.predicted_time)
    mid = int(np.argsort(times, kind="stable")[(var.samples - 1) // 2])
    res, sm = one(mid)                # again: keeping every sample's arrays costs memory
    res.seconds += secs
    return res, times, mid, sm
