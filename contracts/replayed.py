"""A representative's replay: written by ``python -m replay``, read here only.

``replay/rank<R>.csv`` (docs/FILES.md), one row per MPI call the replayed
rank made, in call order:

=====  =====  ===========================================================
column unit   meaning
=====  =====  ===========================================================
rank   -      the replayed world rank R (the same on every row)
seq    -      the call's index, 0, 1, 2, ... (the trace's ``seq``)
op     -      the call's canonical op name (mpimodel/ops.py)
comp   s      wall seconds of computation before the call, on this node,
              less the replay's own per-call cost
cpu    s      CPU seconds of the same span
polls  -      empty polls folded into the call: Iprobe, Improbe, Test*
              answered "nothing" just before it (the recorded run found
              nothing there either); ``comp`` and ``cpu`` are then the
              span before the first of them
poll_cpu s    CPU seconds from the first folded poll to the call: the
              work the application did between them (sleeps excluded)
inside s      seconds of the call's own work between its messages, which
              delays what it sends later: mpi4py's unpickling and reducing
              in an allreduce of Python objects, before the broadcast of
              the result (replay/objects.py); 0 for other calls
faults -      minor page faults in the span (from the previous call's
              exit, folded polls included, as the tracer counts them);
              -1 where not counted (calls answered below Python)
fault_s s     this node's seconds per page fault, in the spans' clock
              (replay.run.fault_seconds; the same on every row)
=====  =====  ===========================================================

``faults`` and ``fault_s`` are read as -1 and 0 from a replay that lacks
both (written before they were kept; ``attrs["faults_counted"]`` False):
no fault is charged then.  One without the other is damage.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd

from contracts.tables import read_table

COLUMNS = ("rank", "seq", "op", "comp", "cpu", "polls", "poll_cpu", "inside")
# kept since; a replay written before lacks them
LATER = {"faults": -1, "fault_s": 0.0}


class ReplayedError(ValueError):
    """A replay CSV that is missing, damaged or inconsistent."""


def read_replayed(path: str, rank: int | None = None) -> pd.DataFrame:
    """The checked replay of one rank (columns COLUMNS).

    Checks: every column, one rank (``rank`` when given), seq 0..n-1 in
    order, known op names, the last call finalize (a replay that did not
    finish never writes its file; a file without it was cut), comp, cpu,
    poll_cpu and inside finite and >= 0, polls >= 0."""
    df = read_table(path, COLUMNS, ReplayedError, "replay", "python -m replay",
                    integers=("rank", "seq", "polls"),
                    seconds=("comp", "cpu", "poll_cpu", "inside", "fault_s"))
    have = [c for c in LATER if c in df.columns]
    if len(have) == 1:
        raise ReplayedError(f"{path}: has column {have[0]} but not "
                            f"{' '.join(c for c in LATER if c not in have)} (a replay writes "
                            f"both): the file is damaged")
    df.attrs["faults_counted"] = bool(have)
    for c, nil in LATER.items():
        if c not in df.columns:
            df[c] = nil
    if not pd.api.types.is_integer_dtype(df["faults"]):
        raise ReplayedError(f"{path}: column faults must hold integers")
    ranks = df["rank"].unique()
    if len(ranks) != 1 or (rank is not None and ranks[0] != rank):
        raise ReplayedError(f"{path}: must hold rank {rank if rank is not None else ranks[0]} "
                            f"only (found {sorted(ranks.tolist())[:5]})")
    bad = np.nonzero(df["seq"].to_numpy() != np.arange(len(df)))[0]
    if len(bad):
        raise ReplayedError(f"{path}: rank {ranks[0]}: row {bad[0]} has seq "
                            f"{df['seq'].iloc[bad[0]]}, expected {bad[0]} (truncated or "
                            f"edited?)")
    if (df["polls"] < 0).any():
        raise ReplayedError(f"{path}: column polls must be >= 0")
    if (df["faults"] < -1).any():
        raise ReplayedError(f"{path}: column faults must be >= -1 (-1: not counted)")
    from mpimodel import ops
    unknown = ~df["op"].isin(set(ops.NAMES))
    if unknown.any():
        i = int(np.argmax(unknown.to_numpy()))
        raise ReplayedError(f"{path}: rank {ranks[0]}, seq {i}: unknown op {df['op'].iat[i]!r}")
    if df["op"].iat[-1] != "finalize" and read_partial_replay(path).get("rows") != len(df):
        raise ReplayedError(f"{path}: rank {ranks[0]}: the last call is "
                            f"{df['op'].iat[-1]!r}, not finalize: the file was cut")
    return df


def partial_path(path: str) -> str:
    """``rank<R>.partial.json`` beside the replay ``rank<R>.csv``."""
    return os.path.splitext(path)[0] + ".partial.json"


def read_partial_replay(path: str) -> dict:
    """What the replay at ``path`` says of its stop, where it stopped at its
    cut on purpose (partial replay, replay/loops.py): ``rank``, ``rows``
    (the rows it wrote), and its loop from the plan (``events``, ``start``,
    ``period``, ``iterations``, ``warmup``, ``replayed``, ``cut``); {} for a whole
    replay.  Checked: integers, the loop inside the events, at least one
    iteration of it replayed."""
    side = partial_path(path)
    if not os.path.exists(side):
        return {}
    try:
        with open(side) as f:
            d = json.load(f)
    except (OSError, ValueError, UnicodeDecodeError) as e:
        raise ReplayedError(f"{side}: cannot read ({e})") from None
    keys = ("rank", "rows", "events", "start", "period", "iterations", "warmup", "replayed",
            "cut")
    if not isinstance(d, dict) or any(type(d.get(k)) is not int for k in keys):
        raise ReplayedError(f"{side}: must hold the integers {', '.join(keys)}")
    if not (0 <= d["start"] and d["period"] >= 1 and d["start"] + d["period"] <= d["rows"]
            <= d["events"] and d["iterations"] >= 1):
        raise ReplayedError(f"{side}: its loop (from event {d['start']}, {d['period']} calls "
                            f"per iteration) does not fit its {d['rows']} rows of "
                            f"{d['events']} events")
    return d


def target_seconds(rp: pd.DataFrame) -> np.ndarray:
    """The computation seconds of a replay: each span's wall time, plus
    the CPU time between the empty polls folded into its call."""
    return rp["comp"].to_numpy(dtype=float) + rp["poll_cpu"].to_numpy(dtype=float)
