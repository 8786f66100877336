"""The workflow's report: one self-contained HTML page plus PNG figures.

    python -m report --predictions P1.json [P2.json ...] --reps reps.csv
        --summary reps_summary.csv --dendrogram dendro.png [--timelines T1.json ...]
        [--trace-summary trace_summary.txt] [--validate validate.json]
        [--calibrated platform.yaml] [--scaling STUDY_DIR] [--partial partial.csv]
        [--nodes nodes.json]
        -o report.html

Sections: the scalability study when there is one (time against N per
platform with the extrapolation's band, the scalability metric), the
answer (the fastest platform, its band, platforms whose bands overlap and
so cannot be told apart, warnings), predicted vs
measured when validate ran, the prediction per platform (ranked, fastest
first: the what-if sweep), where the time goes on the fastest platform
(computation / communication / waiting per rank, ranges of ranks beyond
64, the slowest ranks named), a timeline excerpt, the representatives and
dendrogram, what each representative's partial replay kept (or why it
was replayed whole), and the platforms' parameters side by side.  Figures are
embedded (base64) and also written beside the report as PNG files.
"""
from __future__ import annotations

import argparse
import sys

from .page import build


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m report",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--predictions", nargs="+", required=True,
                    help="prediction JSON files (python -m netsim), one per platform")
    ap.add_argument("--timelines", nargs="*", default=[],
                    help="their timelines (netsim --timeline), in the same order")
    ap.add_argument("--reps", required=True, help="representatives CSV (python -m cluster)")
    ap.add_argument("--summary", required=True,
                    help="the clusters' summary CSV (python -m cluster --summary)")
    ap.add_argument("--dendrogram", required=True, help="dendrogram PNG (cluster --plot)")
    ap.add_argument("--trace-summary", help="text of python -m instrument show")
    ap.add_argument("--validate", help="comparison JSON (python -m validate)")
    ap.add_argument("--calibrated", help="the calibrated platform YAML (calibrate fit)")
    ap.add_argument("--scaling", help="a scalability study's directory (python -m scaling "
                    "study): its plot, extrapolation and metric come first")
    ap.add_argument("--partial", help="the partial-replay plan (python -m replay.loops): "
                    "what each representative's replay kept, and why")
    ap.add_argument("--nodes", help="the host and the target node of a replay carried "
                    "elsewhere (nodes.json, written by python -m replay unpack)")
    ap.add_argument("-o", "--output", required=True,
                    help="the HTML report (figures go beside it, into NAME_figures/)")
    a = ap.parse_args(argv)
    try:
        build(a.output, a.predictions, a.reps, a.summary, a.dendrogram, a.timelines,
              a.trace_summary, a.validate, a.calibrated, a.scaling, a.partial, a.nodes)
    except (OSError, KeyError, ValueError) as e:
        print(f"report: error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
