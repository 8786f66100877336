"""python -m cluster TRACE_DIR -o REPS.csv: choose representative ranks."""
from __future__ import annotations

import argparse
import os
import sys

from contracts.output import write_atomic
from contracts.representatives import write_representatives

from .select import (
    AUTO_MAX,
    AUTO_MIN,
    DEFAULT_THRESHOLD,
    LINKAGES,
    METRICS,
    MIN_JOINED,
    NOISE_FACTOR,
    auto_threshold,
    select,
    summary,
)
from .vectors import PEER_MODES, ROLE_BYTES, ClusterError, read_rank_vectors


def _threshold(text: str):
    """--threshold: 'auto' or a fraction > 0."""
    if text == "auto":
        return text
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'auto' or a number, not {text!r}") from None
    if not v > 0 or v != v:
        raise argparse.ArgumentTypeError(f"must be > 0, not {text}")
    return v


def _role_bytes(text: str) -> float:
    """--object-roles: 'off' or a whole number of bytes >= 0."""
    if text == "off":
        return float("inf")
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"'off' or a number of bytes, not {text!r}")
    return float(text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m cluster",
        description="Group ranks with identical communication sequences, cluster their "
                    "computation vectors hierarchically and pick one representative per "
                    "cluster (the member closest to the centroid).")
    ap.add_argument("trace", help="trace directory (from `python -m instrument trace`)")
    ap.add_argument("-o", "--output", required=True,
                    help="CSV: rank, group, cluster, representative, total, rep_total, error")
    ap.add_argument("--summary", help="per-cluster CSV (default: OUTPUT with _summary)")
    ap.add_argument("--metric", default="manhattan", choices=sorted(METRICS),
                    help="distance between computation vectors (default manhattan, as PHANTOM)")
    ap.add_argument("--linkage", default="complete", choices=LINKAGES,
                    help="agglomerative linkage (default complete, as PHANTOM)")
    ap.add_argument("--threshold", type=_threshold, default="auto",
                    help="cut distance as a fraction of the mean total computation time "
                         "per rank: with manhattan+complete, members' totals differ from "
                         "their representative's by at most this much of the mean; 'auto' "
                         f"(default): {NOISE_FACTOR:g} times the host's noise measured in the "
                         f"trace (how much the same code region's spans vary within a rank), "
                         f"between {AUTO_MIN:g} and {AUTO_MAX:g} ({DEFAULT_THRESHOLD:g} when "
                         f"nothing repeats), raised into the dendrogram's clearest gap above "
                         f"it; what that joins stays apart unless each cluster holds "
                         f"{MIN_JOINED} ranks or more whose totals are within {AUTO_MAX:g} of "
                         f"the mean of their representative's; and no cluster keeps totals "
                         f"more than {1 + AUTO_MAX:g}x apart, whatever other classes weigh")
    ap.add_argument("--vector", default="cpu", choices=["cpu", "comp"],
                    help="cpu: CPU seconds between calls (default; right on an "
                         "oversubscribed host); comp: wall seconds")
    ap.add_argument("--peers", default="relative", choices=PEER_MODES,
                    help="how partners enter the communication signature (default "
                         "relative: rank offsets, for SPMD codes)")
    ap.add_argument("--startup", action="store_true",
                    help="keep the start-up spans (up to the first MPI call after init: "
                         "imports) in the vectors; by default they are zeroed, being the same "
                         "work on every rank and noisy on a loaded host")
    ap.add_argument("--object-roles", type=_role_bytes, default=float(ROLE_BYTES),
                    metavar="BYTES|off",
                    help="in a collective of Python objects, a rank whose place in mpi4py's "
                         "algorithm means this many extra pickled bytes in the call (a "
                         "gather's root, the ranks that reduce) is grouped apart, so that "
                         f"its work is replayed (default {ROLE_BYTES}; off: never, fewer "
                         "representatives)")
    ap.add_argument("--plot", help="write a dendrogram PNG here")
    ap.add_argument("--allow-incomplete", action="store_true",
                    help="cluster a trace whose ranks did not all finish")
    a = ap.parse_args(argv)
    try:
        if os.path.exists(a.output) and os.path.isdir(a.output):
            raise ClusterError(f"{a.output}: is a directory")
        rv = read_rank_vectors(a.trace, a.vector, a.peers, a.allow_incomplete, a.startup,
                               a.object_roles)
        reps = select(rv.table, rv.vectors, a.metric, a.linkage, a.threshold,
                      noise=rv.noise)
        threshold = float(reps["cut"].max())
    except ClusterError as e:
        print(f"cluster: error: {e}", file=sys.stderr)
        return 2
    summ = summary(reps, rv.vectors, a.metric)
    out_dir = os.path.dirname(os.path.abspath(a.output))
    spath = a.summary or os.path.splitext(a.output)[0] + "_summary.csv"
    try:
        os.makedirs(out_dir, exist_ok=True)
        write_representatives(reps, a.output)
        write_atomic(spath, lambda tmp: summ.to_csv(tmp, index=False))
    except OSError as e:                   # contracts.output.OutputError among them
        print(f"cluster: error: {e}", file=sys.stderr)
        return 2
    n, k, groups = len(reps), len(summ), reps["group"].nunique()
    cut = threshold * float(reps["total"].mean())
    how = (f"auto: in the clearest gap of the dendrogram above {NOISE_FACTOR:g} x the "
           f"measured noise {rv.noise:.3g} = {auto_threshold(rv.noise):.3g}, joining there "
           f"clusters of {MIN_JOINED} ranks or more within {AUTO_MAX:g} of the mean of their "
           f"representative, none with totals more than {1 + AUTO_MAX:g}x apart"
           if a.threshold == "auto" else "fixed")
    print(f"{n} ranks, {groups} group(s) of identical communication, {k} cluster(s); "
          f"cut at {cut:.4g} s ({threshold:.3g} of the mean total {reps['total'].mean():.4g} s; "
          f"{how})")
    placed = rv.table.loc[rv.table["roles"] > 0, "rank"].tolist()
    if placed:
        print(f"{len(placed)} rank(s) grouped by their place in mpi4py's collectives of Python "
              f"objects too (a gather's root, the ranks that reduce: their unpickling is "
              f"their own), e.g. {placed[:8]}")
    print(f"{'cluster':>7}{'group':>6}{'size':>6}{'rep':>6}{'mean total s':>14}"
          f"{'spread':>9}{'max error':>11}")
    for r in summ.itertuples():
        print(f"{r.cluster:>7}{r.group:>6}{r.size:>6}{r.representative:>6}{r.mean_total:>14.4g}"
              f"{r.spread:>9.2%}{r.max_error:>11.2%}")
    worst = reps["error"].max()
    print(f"clustering error (member total vs its representative's): mean "
          f"{reps['error'].mean():.2%}, max {worst:.2%} "
          f"(rank {int(reps.loc[reps['error'].idxmax(), 'rank'])})")
    if worst > 2 * threshold * float(reps['total'].mean()) / max(reps['rep_total'].min(), 1e-300):
        print("warning: some members differ from their representative by more than the "
              "threshold implies; lower --threshold", file=sys.stderr)
    if a.plot:
        from .plot import dendrogram_png
        try:
            write_atomic(a.plot, lambda tmp: dendrogram_png(tmp, reps, rv.vectors, a.metric,
                                                            a.linkage, cut))
        except OSError as e:
            print(f"cluster: error: {e}", file=sys.stderr)
            return 2
    print(f"wrote {a.output} and {spath}" + (f" and {a.plot}" if a.plot else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
