"""One row stream from two: the calls the Python replay answered and those
the PMPI shim answered below Python (compiled code calling MPI itself).

Each side timed its own calls: the Python replay (replay/fake.py) the span
from its previous call's exit to the next call's entry, the shim
(pmpishim/creplay.c) the entry and exit clocks of each call it answered.
A Python span that has calls below Python inside it holds their time and
the computation before them; here the two streams are put in call order
(by entry time, as the trace's merge puts its two streams in return
order: calls do not nest) and every span is cut at the previous call of
either stream, so that each row's ``comp`` and ``cpu`` are the computation
since the call before it, as in the trace.
"""
from __future__ import annotations

from mpimodel import ops


def interleave(py_rows: list, clocks: list, c_rows: list, inside: dict) -> tuple[list, dict]:
    """The replay's rows in call order with their spans cut.

    ``py_rows``: the Python replay's ``(seq, op, comp, cpu, polls,
    poll_cpu)``, its own overhead already taken out; ``clocks``: per row,
    ``(entry wall, entry CPU, exit wall, exit CPU)``; ``c_rows``: the
    shim's ``(op code, entry wall, exit wall, entry CPU, exit CPU, polls,
    poll CPU)``; ``inside``: Python seq -> seconds of a call's own work.
    Returns the rows (seq renumbered 0, 1, ...) and ``inside`` keyed by the
    new seq."""
    if not c_rows:
        return py_rows, inside
    if len(clocks) != len(py_rows):     # none for a compiled program: its rows are all C
        raise ValueError(f"{len(py_rows)} replayed rows but {len(clocks)} clock readings")
    out: list = []
    new_inside: dict = {}
    i = j = 0
    last = None                 # (exit wall, exit CPU, from the shim)
    py_exit = None              # the previous Python call's exit
    while i < len(py_rows) or j < len(c_rows):
        take_c = j < len(c_rows) and (i >= len(py_rows) or c_rows[j][1] < clocks[i][0])
        seq = len(out)
        if take_c:
            code, t0, t1, c0, c1, polls, poll_cpu = c_rows[j]
            comp = t0 - last[0] if last else 0.0
            cpu = c0 - last[1] if last else 0.0
            out.append((seq, ops.NAMES[code], max(comp, 0.0), max(cpu, 0.0), polls,
                        max(poll_cpu, 0.0)))
            last = (t1, c1, True)
            j += 1
            continue
        _, op, comp, cpu, polls, poll_cpu = py_rows[i]
        if last is not None and last[2] and py_exit is not None:
            # the calls below Python since the previous Python call, and the
            # computation before them, are theirs
            comp -= max(last[0] - py_exit[0], 0.0)
            cpu -= max(last[1] - py_exit[1], 0.0)
        out.append((seq, op, max(comp, 0.0), max(cpu, 0.0), polls, poll_cpu))
        if py_rows[i][0] in inside:
            new_inside[seq] = inside[py_rows[i][0]]
        py_exit = clocks[i][2:]
        last = (*py_exit, False)
        i += 1
    return out, new_inside
