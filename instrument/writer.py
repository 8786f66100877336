"""Per-rank streaming trace writer (raw files, merged later by ``merge.py``).

Each rank appends fixed-size binary records to ``raw/rNNNNNN.ev`` and
everything of variable size (request lists, per-peer counts, call sites,
communicators, completion fix-ups of receives) as pickled chunks to
``raw/rNNNNNN.side``.  Both are flushed every ``CHUNK`` events or every
second, so a rank that is killed loses at most its last second of events,
and a truncated last record is simply dropped when reading.

The hot path (``Recorder.enter`` / ``Recorder.leave``) is kept to a few
hundred nanoseconds: one ``struct.pack`` per event, CPU-time system calls
only around spans longer than ``SHORT`` seconds (a shorter span is taken as
all-CPU, which is what a polling MPI call or a tight compute gap is).
"""
from __future__ import annotations

import json
import os
import pickle
import socket
import struct
import sys
import time

RECORD = struct.Struct("<12q4d")
# Field order of RECORD; merge.py reads the file with the same layout.
FIELDS = ["op", "comm", "peer", "tag", "sbytes", "rbytes", "req", "site",
          "rpeer", "rtag", "newcomm", "flags",
          "t_start", "t_end", "cpu_start", "cpu_end"]
FLAG_ANY_SOURCE = 1
FLAG_ANY_TAG = 2
FLAG_FAILED = 4          # the MPI call raised an exception

CHUNK = 8192
FLUSH_SECONDS = 1.0
SHORT = 20e-6            # spans shorter than this are taken as all-CPU


def rank_path(trace_dir: str, rank: int, ext: str) -> str:
    return os.path.join(trace_dir, "raw", "r%06d.%s" % (rank, ext))


class Recorder:
    """Collects one rank's events and streams them to its raw files."""

    def __init__(self, trace_dir: str, rank: int, size: int, origin: float):
        self.trace_dir = trace_dir
        self.rank = rank
        self.size = size
        self.origin = origin
        os.makedirs(os.path.join(trace_dir, "raw"), exist_ok=True)
        self._ev = open(rank_path(trace_dir, rank, "ev"), "wb")
        self._side = open(rank_path(trace_dir, rank, "side"), "wb")
        self.parts: list[bytes] = []
        self.side: list[tuple] = []
        self.n = 0
        self.last_end = origin
        self.last_cpu = time.process_time()
        self.last_flush = origin
        self.sites: dict = {}
        self.next_req = 0
        self.unmodelled: dict[str, int] = {}
        self.closed = False
        self.info = {"rank": rank, "host": socket.gethostname(), "pid": os.getpid(),
                     "complete": False, "status": "running"}
        self._write_info()

    # -- hot path -------------------------------------------------------
    def enter(self):
        """Time stamp at entry of an MPI call: (wall, cpu)."""
        t = time.perf_counter()
        if t - self.last_end < SHORT:
            return t, self.last_cpu + (t - self.last_end)
        return t, time.process_time()

    def leave(self, op, comm, peer, tag, sbytes, rbytes, req, t0, c0,
              rpeer=-1, rtag=-1, newcomm=-1, flags=0, extra=None, depth=2):
        """Record one event at the exit of an MPI call."""
        t = time.perf_counter()
        c = c0 + (t - t0) if t - t0 < SHORT else time.process_time()
        self.last_end = t
        self.last_cpu = c
        f = sys._getframe(depth)
        key = (f.f_code, f.f_lasti)
        site = self.sites.get(key)
        if site is None:
            site = self._new_site(key, f)
        o = self.origin
        self.parts.append(RECORD.pack(op, comm, peer, tag, sbytes, rbytes, req, site,
                                      rpeer, rtag, newcomm, flags,
                                      t0 - o, t - o, c0, c))
        if extra is not None:
            self.side.append(("x", self.n, extra))
        self.n += 1
        if len(self.parts) >= CHUNK or t - self.last_flush > FLUSH_SECONDS:
            self.flush()

    def new_req(self) -> int:
        self.next_req += 1
        return self.next_req - 1

    def fixup(self, req: int, source: int, tag: int, nbytes: int):
        """A receive request completed: its matched source, tag and size."""
        self.side.append(("f", req, source, tag, nbytes))

    # -- rare path --------------------------------------------------------
    def _new_site(self, key, frame) -> int:
        site = len(self.sites)
        self.sites[key] = site
        code = key[0]
        self.side.append(("s", site, code.co_filename, frame.f_lineno, code.co_name))
        return site

    def note(self, kind: str, *payload):
        """Side record of a rare kind (communicator, op name, ...)."""
        self.side.append((kind,) + payload)

    def flush(self):
        if self.closed:
            return
        if self.side:
            # Side records first: an event never refers to a site, comm or
            # op name that a crash could leave unwritten.
            self._side.write(pickle.dumps(self.side, protocol=pickle.HIGHEST_PROTOCOL))
            self._side.flush()
            self.side = []
        if self.parts:
            self._ev.write(b"".join(self.parts))
            self._ev.flush()
            self.parts = []
        self.last_flush = time.perf_counter()

    def close(self, status: str = "complete"):
        """Flush everything and mark this rank's trace complete (or not)."""
        if self.closed:
            return
        self.flush()
        self._ev.close()
        self._side.close()
        self.closed = True
        self.info.update(status=status, complete=(status == "complete"),
                         events=self.n, unmodelled=self.unmodelled)
        self._write_info()

    def _write_info(self):
        path = rank_path(self.trace_dir, self.rank, "json")
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.info, f)
        os.replace(tmp, path)
