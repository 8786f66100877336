"""Human-readable summary of a trace (``python -m instrument show``)."""
from __future__ import annotations

import pandas as pd

from contracts.merge import trace_warnings
from contracts.trace import load_trace


def summary(trace) -> dict[str, pd.DataFrame]:
    """Tables behind ``show``: per op and per rank."""
    # byte sums in floating point: an int64 sum wraps around silently
    ev = trace.events.astype({"sbytes": float, "rbytes": float})
    per_op = ev.groupby("op", observed=True).agg(
        events=("seq", "size"), ranks=("rank", "nunique"),
        sbytes=("sbytes", "sum"), rbytes=("rbytes", "sum"),
        time=("t_end", "sum"))
    per_op["time"] = (ev["t_end"] - ev["t_start"]).groupby(ev["op"]).sum()
    per_op = per_op.sort_values("events", ascending=False)
    g = ev.groupby("rank")
    per_rank = pd.DataFrame({
        "events": g.size(),
        "comp": g["comp"].sum(),
        "cpu": g["cpu"].sum(),
        "mpi": (ev["t_end"] - ev["t_start"]).groupby(ev["rank"]).sum(),
        "wall": g["t_end"].max(),
        "sbytes": g["sbytes"].sum(),
        # -1: not counted (below Python, an older trace): left out of the sum
        "faults": ev["faults"].clip(lower=0).groupby(ev["rank"]).sum(),
        "counted": (ev["faults"] >= 0).groupby(ev["rank"]).any(),
    })
    per_rank["comp_share"] = per_rank["comp"] / per_rank["wall"].where(per_rank["wall"] > 0)
    return {"per_op": per_op, "per_rank": per_rank}


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} PB"


def show(path: str, max_ranks: int = 32) -> str:
    t = load_trace(path)
    m = t.meta
    lines = [f"trace {path}",
             f"  application : {' '.join(m.get('argv', []))}",
             f"  ranks       : {m['size']} on {', '.join(m.get('hosts', [])) or '?'}",
             f"  MPI         : {m.get('mpi_library', '?')}, mpi4py {m.get('mpi4py_version', '?')}",
             f"  events      : {len(t.events)}",
             f"  comms       : {len(t.comms)}"]
    inc = t.incomplete_ranks
    if inc:
        status = {r["rank"]: r.get("status") for r in m.get("ranks", [])}
        lines.append(f"  INCOMPLETE  : {len(inc)} rank(s): " + ", ".join(
            f"{r} ({status.get(r)})" for r in inc[:20]) + (" ..." if len(inc) > 20 else ""))
    else:
        lines.append("  complete    : yes, every rank")
    warn = trace_warnings(m)
    if "unmodelled" in warn:
        lines.append("  UNMODELLED  : " + warn["unmodelled"])
    if "below_python" in warn:
        lines.append("  below Python: " + warn["below_python"])
    if "invisible" in warn:
        lines.append("  INVISIBLE   : " + warn["invisible"])
    elif "below_python" in warn:
        pass
    elif m.get("c_calls_counted_ranks", 0) >= int(m["size"]):
        lines.append("  C-level     : every MPI call went through mpi4py (counted with "
                     "--c-calls)")
    elif "c_calls_counted_ranks" in m:
        lines.append(f"  C-level     : counted on {m['c_calls_counted_ranks']} of {m['size']} "
                     f"ranks only; none below Python there")
    w = m.get("waits")
    if w:
        lines.append(f"  waits       : {'yielding the core' if w['yield'] else 'spinning'} "
                     f"in MPI ({w['why']})")
    polls = t.events["polls"]
    if polls.any():
        waits = t.events[polls > 0]
        lines.append(f"  polling     : {int(polls.sum())} polls that found nothing, folded into "
                     f"the {len(waits)} calls that ended their waits "
                     f"({(waits['t_end'] - waits['t_start']).sum():.4g} s waited, "
                     f"{waits['poll_cpu'].sum():.4g} s of CPU)")
    s = summary(t)
    lines.append("")
    lines.append("events per op:")
    lines.append(f"  {'op':<22}{'events':>9}{'ranks':>7}{'sent':>12}{'received':>12}"
                 f"{'time in call':>14}")
    for r in s["per_op"].itertuples():
        op = r.Index
        lines.append(f"  {op:<22}{r.events:>9}{r.ranks:>7}{_fmt_bytes(r.sbytes):>12}"
                     f"{_fmt_bytes(r.rbytes):>12}{r.time:>13.4f}s")
    pr = s["per_rank"]
    lines.append("")
    lines.append("computation per rank (comp = wall seconds between calls, cpu = CPU seconds, "
                 "faults = page faults in them):")
    lines.append(f"  {'rank':>6}{'events':>9}{'comp s':>10}{'cpu s':>10}{'in MPI s':>10}"
                 f"{'wall s':>10}{'comp share':>12}{'faults':>10}")
    show_ranks = pr if len(pr) <= max_ranks else pd.concat(
        [pr.nlargest(max_ranks // 2, "comp"), pr.nsmallest(max_ranks // 2, "comp")])
    for r in show_ranks.sort_index().itertuples():
        rank = r.Index
        lines.append(f"  {rank:>6}{r.events:>9}{r.comp:>10.4f}{r.cpu:>10.4f}{r.mpi:>10.4f}"
                     f"{r.wall:>10.4f}{r.comp_share:>11.1%}{r.faults if r.counted else '-':>10}")
    if len(pr) > max_ranks:
        lines.append(f"  ({len(pr)} ranks; the {max_ranks // 2} with most and least "
                     f"computation shown)")
    lines.append(f"  comp share: min {pr.comp_share.min():.1%}, mean {pr.comp_share.mean():.1%}, "
                 f"max {pr.comp_share.max():.1%}")
    return "\n".join(lines)
