"""Per-rank streaming trace writer (raw files, merged later by ``contracts/merge.py``).

Each rank appends fixed-size binary records to ``raw/rNNNNNN.ev`` and
everything of variable size (request lists, per-peer counts, call sites,
communicators, completion fix-ups of receives) as JSON lines to
``raw/rNNNNNN.side`` (one line per flush, a list of records: plain data
that every later stage can read without running anything in it).  Both are
flushed every ``CHUNK`` events or every ``FLUSH_SECONDS``, and by a
watcher thread as soon as the rank waits inside an MPI call
(instrument/run.py), so that a rank killed outright while busy loses at
most its last quarter second of events, and one killed while blocked in
MPI none; a truncated last record is simply dropped when reading.

The hot path (``enter``/``leave`` in ``_hotpath.c``) costs a few hundred
nanoseconds per call: CPU-time system calls only around spans longer than
20 us (a shorter span is taken as all-CPU, which is what a polling MPI call
or a tight compute gap is), call sites looked up in a C hash table.
"""
from __future__ import annotations

import json
import os
import resource
import socket
import threading

from contracts.output import json_default, write_json
from contracts.raw_trace import rank_path

CHUNK = 8192
FLUSH_SECONDS = 0.25      # a busy rank writes at least this often


def threads_cpu() -> dict:
    """The process's CPU seconds so far (``cpu``, ended threads included) and how
    many of them ran on threads other than the main one
    (``other_threads_cpu``: a threaded BLAS, OpenMP, the tracer's own
    watcher); empty where /proc does not say.  The trace's CPU seconds are
    the process's: where those threads outnumber the cores they spin for a
    turn, and that counts too."""
    try:
        with open(f"/proc/self/task/{os.getpid()}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        main = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    except (OSError, ValueError, IndexError):
        return {}
    use = resource.getrusage(resource.RUSAGE_SELF)
    total = use.ru_utime + use.ru_stime
    return {"cpu": round(total, 3), "other_threads_cpu": round(max(total - main, 0.0), 3)}


class Recorder:
    """One rank's trace: the C hot path buffers events, this class writes them
    and everything of variable size (``side`` records) to the raw files."""

    def __init__(self, trace_dir: str, rank: int, size: int, origin: float):
        from . import _hotpath
        self._hot = _hotpath
        self.trace_dir = trace_dir
        self.rank = rank
        self.size = size
        os.makedirs(os.path.join(trace_dir, "raw"), exist_ok=True)
        self._ev = open(rank_path(trace_dir, rank, "ev"), "wb", buffering=0)
        self._side = open(rank_path(trace_dir, rank, "side"), "wb")
        self.side: list[tuple] = []
        self._side_lock = threading.Lock()
        self.nsites = 0
        self.unmodelled: dict[str, int] = {}
        self.closed = False
        self.below = None        # the tracer of calls below Python (pmpishim.control.BelowPython)
        self.info = {"rank": rank, "host": socket.gethostname(), "pid": os.getpid(),
                     "complete": False, "status": "running"}
        # from here on: the tool's own set-up (imports in a thread of its
        # own) is not the application's
        self._threads0 = threads_cpu()
        self._write_info()
        _hotpath.start(self._ev.fileno(), origin, CHUNK, FLUSH_SECONDS,
                       self._flush_side, self._new_site, self.side)

    def note(self, kind: str, *payload):
        """Side record of a rare kind (communicator, op name, ...)."""
        self.side.append((kind,) + payload)

    # -- callbacks of the C hot path --------------------------------------
    def _new_site(self, code, lineno) -> int:
        site = self.nsites
        self.nsites += 1
        self.side.append(("s", site, code.co_filename, lineno, code.co_name))
        return site

    def _flush_side(self):
        # Two threads flush: the application's (by size and time, inside
        # its calls) and the watcher (while the application waits in
        # MPI).  The file write releases the GIL, so the other thread can
        # append records or start a flush of its own meanwhile: under the
        # lock, take what is here and remove exactly that, in place (the
        # tracer holds self.side.append).  Without it, one flush removed
        # records another had not yet written: a waitall lost its
        # completed requests.
        with self._side_lock:
            batch = self.side[:]
            if not batch:
                return
            del self.side[:len(batch)]
            try:
                self._side.write(json.dumps(batch, separators=(",", ":"),
                                            default=json_default).encode() + b"\n")
                self._side.flush()
            except OSError as e:
                raise self._hot.WriteError(f"{self._side.name}: cannot write the trace's side "
                                           f"records: {e.strerror}") from None

    @property
    def n(self) -> int:
        """Events recorded, from Python and below it."""
        return self._hot.count() + (self.below.n if self.below is not None else 0)

    def held_in_call(self) -> bool:
        """Whether events wait in the buffer while the rank is inside a call."""
        return not self.closed and self._hot.held_in_call()

    def flush(self):
        if not self.closed:
            if self.below is not None:
                self.below.flush()
            try:
                self._hot.flush()
            except self._hot.WriteError as e:
                raise self._hot.WriteError(self.named(e)) from None

    def named(self, e) -> str:
        """A write error with the file it concerns (the side file names itself)."""
        return str(e) if str(e).startswith(os.sep) else f"{self.path()}: {e}"

    def close(self, status: str = "complete"):
        """Flush everything and mark this rank's trace complete (or not).
        A write that fails here (disk full) marks it incomplete; it never
        raises, so that the rank still ends and aborts the job."""
        if self.closed:
            return
        self.closed = True
        if self.below is not None:
            failed = self.below.stop()
            if failed:
                status = f"failed: {self.path('cev')}: {failed}"
        try:
            self._hot.stop()
            self._flush_side()
            self._ev.close()
            self._side.close()
        except (OSError, self._hot.WriteError) as e:
            status = f"failed: {e}"
        try:
            self._finish_info(status)
        except OSError:
            pass                   # the disk is full: merge reports the rank incomplete

    def _finish_info(self, status: str):
        self.info.update(status=status, complete=(status == "complete"),
                         events=self.n, unmodelled=self.unmodelled)
        overlapped = self._hot.overlapped()
        if overlapped:
            self.info["overlapped_calls"] = overlapped
        now = threads_cpu()
        if now and self._threads0:
            self.info.update({k: round(max(now[k] - self._threads0[k], 0.0), 3) for k in now})
        self._write_info()

    def path(self, ext: str = "ev") -> str:
        """This rank's raw file (for messages)."""
        return rank_path(self.trace_dir, self.rank, ext)

    def _write_info(self):
        write_json(rank_path(self.trace_dir, self.rank, "json"), self.info, indent=None)

