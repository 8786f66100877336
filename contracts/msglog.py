"""The message log: everything that flows into a recorded rank from MPI.

Private to ``instrument record`` (writer) and ``replay`` (reader).  One
file per recorded rank, ``LOG_DIR/rank<R>.log``, streamed:

    header  b"RRMSGLOG" + u32 version + u32 len + JSON (rank, size, argv, ...)
    record  u32 len(meta) + meta (JSON list)
            u32 count + count x payload
            u32 crc32 of everything above in this record
    payload u64 len + raw bytes, or, for a payload of at least DEDUP_MIN
            bytes identical to an earlier one, u64 (len | REPEAT) + u64 file
            offset of the earlier bytes (benchmarks send the same buffer
            thousands of times: the OSU bandwidth test logged 72 GB without)
    end     a record whose op is "end" and result the run's status

The calls a rank made below Python (compiled code calling MPI itself) are
logged apart, by the PMPI shim, in ``LOG_DIR/rank<R>.clog``
(pmpishim/creplay.c), and answered from there by the same shim.

Beside it, ``LOG_DIR/rank<R>.json`` is written when the rank's log is
closed: ``{"rank", "status", "records", "bytes"}``.  Without it (the
recording run was killed), or with a status other than ``complete``, the
log is refused before anything runs.

A record's meta is ``[index, op, peer, tag, nbytes, comm, result]``: the
call's canonical op name and arguments as the application passed them (the
size of what it passed, the record that created its communicator: for the
divergence check) and what MPI answered (statuses, flags, indices,
communicator descriptions), all plain JSON.  Payloads are received bytes,
copied raw from the receive buffers, or pickles of returned objects.
Every record is checksummed and its meta checked before any payload is
used; a damaged, truncated or wrong-version log fails loudly.  The
checksum finds damage, not forgery: the payloads of the object API are the
application's own pickles, which replay unpickles, so a log is trusted
input (replay only logs you recorded).
"""
from __future__ import annotations

import hashlib
import json
import mmap
import os
import struct
import threading
import time
import zlib

from .output import OutputError, json_default, write_json

MAGIC = b"RRMSGLOG"
VERSION = 4
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
REPEAT = 1 << 63
DEDUP_MIN = 4096
FLUSH_SECONDS = 0.25      # a busy recorded rank writes at least this often


class LogError(BaseException):
    """A message log that cannot be written or used (file and record named).

    Raised inside the application's MPI calls (a full disk while recording,
    a damaged record while replaying): a BaseException, so that an
    application's own ``except Exception`` cannot swallow it."""


def _record_digest(rec: dict) -> str:
    """SHA-256 of a record.json's keys but ``digest``, in a canonical form."""
    body = {k: v for k, v in rec.items() if k != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"),
                                     default=json_default).encode()).hexdigest()


def write_record(log_dir: str, rec: dict) -> None:
    """Write the log directory's record.json with its digest."""
    write_json(os.path.join(log_dir, "record.json"), dict(rec, digest=_record_digest(rec)))


def read_record(log_dir: str) -> dict:
    """The log directory's record.json, checked: a message log of ``size``
    ranks that recorded ``ranks``, whose digest matches its content (a
    changed size or rank list would mislead every replay from it).  A
    directory without it is no complete log (a replay from it once ran
    anyway)."""
    path = os.path.join(log_dir, "record.json")
    try:
        with open(path, "rb") as f:
            rec = json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        raise LogError(f"{path}: missing; {log_dir} is not a message log directory "
                       f"(written by `instrument record`), or lost its record") from None
    except (OSError, ValueError, UnicodeDecodeError) as e:
        raise LogError(f"{path}: cannot read ({e})") from None
    if not (isinstance(rec, dict) and rec.get("kind") == "message-log"
            and type(rec.get("size")) is int and rec["size"] >= 1
            and isinstance(rec.get("ranks"), list)
            and all(type(r) is int and 0 <= r < rec["size"] for r in rec["ranks"])):
        raise LogError(f"{path}: not a message log's record (kind message-log, size, the "
                       f"ranks recorded)")
    if rec.get("digest") != _record_digest(rec):
        raise LogError(f"{path}: its digest does not match its content (changed or damaged "
                       f"since `instrument record` wrote it, or written by an older version); "
                       f"record the run again")
    return rec


def script_digest(target: list[str], mode: str) -> str | None:
    """SHA-256 of the application's script, so that replay can tell when
    the script changed since it was recorded."""
    if mode != "path":
        return None
    import hashlib
    try:
        with open(target[0], "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def log_path(log_dir: str, rank: int) -> str:
    return os.path.join(log_dir, f"rank{rank}.log")


def clog_path(log_dir: str, rank: int) -> str:
    """The rank's C log: what its calls made below Python received
    (written and read by the PMPI shim, pmpishim/creplay.c, which
    documents it); absent when the rank made none."""
    return os.path.join(log_dir, f"rank{rank}.clog")


def status_path(path: str) -> str:
    """The completion status written beside a rank's log when it is closed."""
    return os.path.splitext(path)[0] + ".json"




class LogWriter:
    """Append records for one rank; flushed every ``flush_bytes`` or
    ``FLUSH_SECONDS``, and by the rank's watcher when it is idle."""

    def __init__(self, path: str, header: dict, flush_bytes: int = 1 << 22, modules=None):
        """``header["partial"]``, where present, cuts the log: after its
        ``cut`` records the log is closed as complete, and the calls after
        go to MPI unlogged (replay/loops.py).  ``modules``: a function that
        lists the modules the application loaded, written into the
        completion status when the log closes."""
        self.path = path
        self.modules = modules
        partial = header.get("partial")
        self.limit = partial["cut"] if partial else None
        self.rank = header.get("rank")
        self.f = open(path, "wb")
        h = json.dumps(header).encode()
        self.f.write(MAGIC + _U32.pack(VERSION) + _U32.pack(len(h)) + h)
        self.pos = 16 + len(h)           # file offset of the next byte written
        self.index = 0
        self.pending = 0
        self.flushed = time.monotonic()
        self.flush_bytes = flush_bytes
        self.seen: dict[bytes, int] = {}   # digest of a large payload -> its offset
        self.late = 0                      # calls after the log was closed (atexit handlers)
        # threads of the rank call MPI at once (a task pool's result
        # threads): one record at a time, or two interleave their bytes
        # and share an index
        self._lock = threading.RLock()

    def write(self, op: str, peer: int, tag: int, result=None, payloads=(), nbytes: int = 0,
              comm: int = -1) -> None:
        """Append one record (``op`` with its peer, tag, result and payloads)."""
        with self._lock:
            self._write(op, peer, tag, result, payloads, nbytes, comm)

    def _write(self, op: str, peer: int, tag: int, result, payloads, nbytes: int,
               comm: int) -> None:
        if self.f.closed:
            if self.limit is None:
                self.late += 1             # the call went to MPI as usual, unlogged
            return
        if self.limit is not None and self.index >= self.limit and op != "end":
            self.close()                   # the replay stops here: the rest is not needed
            return
        meta = json.dumps([self.index, op, peer, tag, nbytes, comm, result],
                          separators=(",", ":"), default=json_default).encode()
        parts: list[bytes | memoryview] = [_U32.pack(len(meta)), meta,
                                           _U32.pack(len(payloads))]
        offset = self.pos + sum(len(p) for p in parts)
        new: dict[bytes, int] = {}
        for p in payloads:
            mv = memoryview(p).cast("B")
            n = mv.nbytes
            if n >= DEDUP_MIN:
                digest = hashlib.blake2b(mv, digest_size=16).digest()
                earlier = self.seen.get(digest, new.get(digest))
                if earlier is not None:
                    parts += [_U64.pack(n | REPEAT), _U64.pack(earlier)]
                    offset += 16
                    continue
                new[digest] = offset + 8
            parts += [_U64.pack(n), mv]
            offset += 8 + n
        crc = 0
        for p in parts:
            crc = zlib.crc32(p, crc)
        parts.append(_U32.pack(crc))
        try:
            for p in parts:
                self.f.write(p)
        except OSError as e:
            self.failed = True
            raise LogError(f"{self.path}: cannot write record {self.index} ({op}): "
                           f"{e.strerror}; the records before it are kept") from None
        self.seen.update(new)
        written = offset + 4 - self.pos
        self.pos += written
        self.pending += written
        self.index += 1
        now = time.monotonic()
        if self.pending >= self.flush_bytes or now - self.flushed > FLUSH_SECONDS:
            self.f.flush()
            self.pending, self.flushed = 0, now

    failed = False              # a write failed: said once, by the call that met it

    def flush(self) -> None:
        # the watcher thread, after the log was closed or a write failed
        with self._lock:
            if self.f.closed or self.failed:
                return
            self.f.flush()
            self.pending, self.flushed = 0, time.monotonic()

    def close(self, status: str = "complete") -> None:
        """Write the end record and, beside the log, its completion status."""
        with self._lock:
            if self.f.closed:
                return
            try:
                self._write("end", -1, -1, status, (), 0, -1)
                self.f.close()
            except (OSError, LogError):
                status = "the log could not be completed (disk full?)"
        # what a replay elsewhere must install (python -m replay pack)
        modules = self.modules() if self.modules else []
        done = {"rank": self.rank, "status": status, "records": self.index,
                "bytes": self.pos, "modules": modules}
        try:
            write_json(status_path(self.path), done, indent=None)
        except OutputError as e:
            raise LogError(f"cannot write the log's completion status: {e}") from None


class LogReader:
    """Read one rank's records in order (``next()``), checking each.

    The file is mapped into memory and payloads are views of the mapping:
    reading the log allocates nothing on the replayed application's heap
    (a payload read into a fresh bytes object per message is malloc'd
    and freed beside the application's own arrays, and changes when glibc
    trims the heap and so how long the application's next spans take).

    ``complete``: refuse a log whose recording did not finish (no
    completion status beside it, another status, or another length) before
    anything is read from it."""

    def __init__(self, path: str, complete: bool = True):
        self.path = path
        try:
            self.f = open(path, "rb")
        except OSError as e:
            raise LogError(f"{path}: cannot open message log: {e.strerror}") from None
        self.end = os.fstat(self.f.fileno()).st_size
        self.index = 0
        self.pos = 0
        if complete:
            self._check_complete()
        if self.end < 16:
            raise LogError(f"{path}: not a message log (bad magic)")
        try:
            self._view = memoryview(mmap.mmap(self.f.fileno(), 0, access=mmap.ACCESS_READ))
        except (OSError, ValueError) as e:
            raise LogError(f"{path}: cannot map message log: {e}") from None
        head = bytes(self._read(16))
        if head[:8] != MAGIC:
            raise LogError(f"{path}: not a message log (bad magic)")
        version = _U32.unpack(head[8:12])[0]
        if version != VERSION:
            raise LogError(f"{path}: message log version {version}, this replay reads "
                           f"version {VERSION}; record again with this version")
        n = _U32.unpack(head[12:16])[0]
        try:
            self.header = json.loads(bytes(self._read(n, "the header")))
        except (ValueError, LogError):
            raise LogError(f"{path}: damaged header") from None
        if not isinstance(self.header, dict):
            raise LogError(f"{path}: damaged header")
        self.index = 0

    def _check_complete(self) -> None:
        done = status_path(self.path)
        try:
            with open(done) as f:
                st = json.load(f)
            status, nbytes = st["status"], st["bytes"]
        except FileNotFoundError:
            raise LogError(f"{self.path}: its recording did not finish (no {done}: the "
                           f"recording run was killed or is still running); record "
                           f"again") from None
        except (OSError, ValueError, TypeError, KeyError):
            raise LogError(f"{done}: damaged completion status") from None
        if status != "complete":
            raise LogError(f"{self.path}: the recording run ended '{status}', not "
                           f"complete; record again")
        if nbytes != self.end:
            raise LogError(f"{self.path}: {self.end} bytes, but its recording wrote "
                           f"{nbytes}: the file was cut or changed")

    def _read(self, n: int, what: str = "") -> memoryview:
        if n > self.end - self.pos:
            raise LogError(f"{self.path}: truncated at record {self.index}"
                           + (f" ({what})" if what else "") + " (the recording run did not "
                           "finish, or the file was cut or damaged)")
        self.pos += n
        return self._view[self.pos - n:self.pos]

    def _earlier(self, offset: int, n: int) -> memoryview:
        """A repeated payload: the bytes an earlier record stored at ``offset``."""
        if offset + n > self.pos:
            raise LogError(f"{self.path}: record {self.index} repeats bytes that are not "
                           f"earlier in the file: the log is damaged")
        return self._view[offset:offset + n]

    _peeked = None
    _peeked_at = _last_at = None

    def peek(self):
        """The next record, as next() gives it, left to be read again by
        next(); None at the end of the file."""
        if self._peeked is None and self.pos < self.end:
            self._peeked = self._next()
            self._peeked_at = self._at
        return self._peeked

    def next(self):
        """``(op, peer, tag, nbytes, comm, result, payloads)`` of the next record."""
        rec, self._peeked = self._peeked, None
        if rec is not None:
            self._last_at = self._peeked_at
            return rec
        rec = self._next()
        self._last_at = self._at
        return rec

    def again(self):
        """The record next() gave last, read and checked once more, the log
        left where it was (the replay's overhead probe repeats a call with
        it: the same work as reading it the first time); None before the
        first."""
        if self._last_at is None:
            return None
        pos, index = self.pos, self.index
        self.pos, self.index = self._last_at
        try:
            return self._next()
        finally:
            self.pos, self.index = pos, index

    def _next(self):
        self._at = (self.pos, self.index)
        raw = self._read(4)
        n = _U32.unpack(raw)[0]
        meta_b = self._read(n)
        cnt_b = self._read(4)
        crc = zlib.crc32(cnt_b, zlib.crc32(meta_b, zlib.crc32(raw)))
        count = _U32.unpack(cnt_b)[0]
        if 8 * count > self.end - self.pos:
            raise LogError(f"{self.path}: record {self.index} claims {count} payloads: the "
                           f"log is damaged")
        payloads = []
        for _ in range(count):
            lb = self._read(8)
            n = _U64.unpack(lb)[0]
            if n & REPEAT:
                ob = self._read(8)
                crc = zlib.crc32(ob, zlib.crc32(lb, crc))
                payloads.append(self._earlier(_U64.unpack(ob)[0], n & ~REPEAT))
                continue
            data = self._read(n)
            crc = zlib.crc32(data, zlib.crc32(lb, crc))
            payloads.append(data)
        if _U32.unpack(self._read(4))[0] != crc:
            raise LogError(f"{self.path}: checksum mismatch in record {self.index}: "
                           f"the log is damaged")
        try:
            meta = json.loads(bytes(meta_b))
        except ValueError:
            meta = None
        if not (isinstance(meta, list) and len(meta) == 7 and isinstance(meta[1], str)
                and all(type(v) is int for i, v in enumerate(meta[:6]) if i != 1)):
            raise LogError(f"{self.path}: undecodable record {self.index}")
        idx, op, peer, tag, nbytes, comm, result = meta
        if idx != self.index:
            raise LogError(f"{self.path}: record {self.index} carries index {idx}")
        self.index += 1
        return op, peer, tag, nbytes, comm, result, payloads
