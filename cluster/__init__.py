"""Selecting representative processes (docs/METHODS.md: the cluster step).

Python API::

    from cluster import select_representatives
    reps = select_representatives("trace_dir")     # DataFrame, one row per rank

Command line: ``python -m cluster TRACE_DIR -o reps.csv [options]``.
"""
from __future__ import annotations

from contracts.representatives import (
    RepresentativesError,
    read_representatives,
    write_representatives,
)

from .select import DEFAULT_THRESHOLD, LINKAGES, METRICS, cluster_group, select, summary
from .vectors import PEER_MODES, ClusterError, RankVectors, read_rank_vectors

__all__ = ["select_representatives", "select", "summary", "cluster_group",
           "read_rank_vectors", "ClusterError", "RankVectors",
           "read_representatives", "write_representatives", "RepresentativesError",
           "METRICS", "LINKAGES", "PEER_MODES", "DEFAULT_THRESHOLD"]


def select_representatives(trace_dir: str, metric: str = "manhattan",
                           linkage: str = "complete", threshold: float | str = "auto",
                           column: str = "cpu", peer_mode: str = "relative",
                           allow_incomplete: bool = False, startup: bool = False):
    """Rank -> group, cluster, representative (plus totals and error) for a trace.

    ``threshold``: a fraction of the mean total, or "auto" (default: the
    cut adapts to the noise measured in the trace; cluster.select.select).

    ``column`` chooses the computation vector: ``cpu`` (default: CPU seconds,
    right even when the host ran more ranks than cores) or ``comp`` (wall
    seconds between calls, right on a dedicated host).  ``startup`` keeps
    the start-up spans (imports) in the vectors; see read_rank_vectors."""
    rv = read_rank_vectors(trace_dir, column, peer_mode, allow_incomplete, startup)
    return select(rv.table, rv.vectors, metric, linkage, threshold, noise=rv.noise)
