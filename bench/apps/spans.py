"""Where replayed computation differs from the traced run's, span by span.

    python bench/apps/spans.py OUT/APP [--top 8]

Reads an application's directory written by bench/apps/run.py (its trace,
representatives and replays) and, per representative, compares each
computation span (the time between two MPI calls, named by the call that
ends it and that call's source line) traced and replayed (the replay the
workflow keeps: the least disturbed of the rounds, replay/run.py; its
computation as replay/expand.py counts it): totals, per call site, and the
spans that differ most.  The traced run is the real run's computation
(the tracer leaves the application's heap and waits as they are), so a
site whose replay is longer is where a prediction would run high.

The span before the first call (MPI initialisation to the first call:
imports and setup) is shown apart: the traced run is the first to read the
application's files, and this machine's file cache is cold for it.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from contracts.replayed import target_seconds  # noqa: E402
from contracts.trace import load_trace  # noqa: E402


def spans(d: Path, rank: int, trace) -> pd.DataFrame:
    """Rank ``rank``'s spans: seq, op, where, traced, replayed (seconds)."""
    ev = trace.events
    mine = ev[ev["rank"] == rank][["seq", "op", "comp", "site"]]
    kept = d / "replay" / f"rank{rank}.csv"      # replay/run.py's keep_least_disturbed
    if not kept.exists():
        raise SystemExit(f"{kept}: no replay of rank {rank}")
    rp = pd.read_csv(kept)
    rp = rp.assign(replayed=target_seconds(rp))[["seq", "replayed"]]
    t = mine.merge(rp, on="seq", how="inner").rename(columns={"comp": "traced"})
    sites = trace.sites.set_index("site")
    t["where"] = [f"{os.path.basename(sites.at[s, 'file'])}:{sites.at[s, 'line']}"
                  if s in sites.index else "?" for s in t["site"]]
    return t[t["seq"] > 0]                    # before MPI initialisation: in no prediction


def report(d: Path, top: int) -> str:
    trace = load_trace(str(d / "trace"))
    reps = sorted(pd.read_csv(d / "reps.csv")["representative"].unique())
    out = [f"{d.name}: traced against replayed computation (seconds)"]
    for r in reps:
        s = spans(d, int(r), trace)
        first = s[s["seq"] == s["seq"].min()]
        rest = s[s["seq"] > s["seq"].min()]
        out.append(f"rank {r}: setup span {first['traced'].sum():.3f} traced, "
                   f"{first['replayed'].sum():.3f} replayed; the other {len(rest)} spans "
                   f"{rest['traced'].sum():.3f} traced, {rest['replayed'].sum():.3f} replayed "
                   f"({rest['replayed'].sum() / max(rest['traced'].sum(), 1e-12) - 1:+.1%})")
        by = (rest.groupby(["op", "where"], as_index=False)[["traced", "replayed"]].sum()
              .assign(diff=lambda x: x["replayed"] - x["traced"]))
        by["ratio"] = by["replayed"] / by["traced"].where(by["traced"] > 0)
        by = by.reindex(by["diff"].abs().sort_values(ascending=False).index).head(top)
        out.append("  per call site, largest differences first:")
        out += ["    " + line for line in by.round(4).to_string(index=False).splitlines()]
        worst = rest.assign(diff=rest["replayed"] - rest["traced"])
        worst = worst.reindex(worst["diff"].abs().sort_values(ascending=False).index).head(top)
        out.append("  single spans, largest differences first:")
        out += ["    " + line for line in worst[["seq", "op", "where", "traced", "replayed",
                                                 "diff"]].round(4).to_string(index=False)
                .splitlines()]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("app_dir", help="OUT/APP from bench/apps/run.py")
    ap.add_argument("--top", type=int, default=8, help="rows per table (default 8)")
    a = ap.parse_args()
    print(report(Path(a.app_dir), a.top))


if __name__ == "__main__":
    main()
