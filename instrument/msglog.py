"""The message log: everything that flows into a recorded rank from MPI.

Private to ``instrument record`` (writer) and ``replay`` (reader).  One
file per recorded rank, ``LOG_DIR/rank<R>.log``, streamed:

    header  b"RRMSGLOG" + u32 version + u32 len + JSON (rank, size, argv, ...)
    record  u32 len(meta) + meta (pickle of a small tuple)
            u32 count + count x payload
            u32 crc32 of everything above in this record
    payload u64 len + raw bytes, or, for a payload of at least DEDUP_MIN
            bytes identical to an earlier one, u64 (len | REPEAT) + u64 file
            offset of the earlier bytes (benchmarks send the same buffer
            thousands of times: the OSU bandwidth test logged 72 GB without)
    end     a record whose meta is ("end", status)

A record's meta is ``(index, op, peer, tag, size, result)``: the call's
canonical op name and arguments as the application passed them (for the
divergence check) and what MPI answered (statuses, flags, indices,
communicator descriptions).  Payloads are received bytes, copied raw from
the receive buffers, or pickles of returned objects.  Every record is
checksummed; a damaged, truncated or wrong-version log fails loudly.
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import struct
import zlib

MAGIC = b"RRMSGLOG"
VERSION = 2
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
REPEAT = 1 << 63
DEDUP_MIN = 4096


class LogError(Exception):
    """A message log that cannot be used (file and record named)."""


def log_path(log_dir: str, rank: int) -> str:
    return os.path.join(log_dir, f"rank{rank}.log")


class LogWriter:
    """Append records for one rank; flushed every ``flush_bytes``."""

    def __init__(self, path: str, header: dict, flush_bytes: int = 1 << 22):
        self.path = path
        self.f = open(path, "wb")
        h = json.dumps(header).encode()
        self.f.write(MAGIC + _U32.pack(VERSION) + _U32.pack(len(h)) + h)
        self.pos = 16 + len(h)           # file offset of the next byte written
        self.index = 0
        self.pending = 0
        self.flush_bytes = flush_bytes
        self.seen: dict[bytes, int] = {}   # digest of a large payload -> its offset

    def write(self, op: str, peer: int, tag: int, size: int, result, payloads=()) -> None:
        meta = pickle.dumps((self.index, op, peer, tag, size, result), protocol=5)
        parts = [_U32.pack(len(meta)), meta, _U32.pack(len(payloads))]
        offset = self.pos + sum(len(p) for p in parts)
        new = {}
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
            raise LogError(f"{self.path}: cannot write record {self.index} ({op}): "
                           f"{e.strerror}; the records before it are kept") from None
        self.seen.update(new)
        written = offset + 4 - self.pos
        self.pos += written
        self.pending += written
        self.index += 1
        if self.pending >= self.flush_bytes:
            self.f.flush()
            self.pending = 0

    def close(self, status: str = "complete") -> None:
        if self.f.closed:
            return
        self.write("end", -1, -1, 0, status)
        self.f.close()


class LogReader:
    """Read one rank's records in order (``next()``), checking each."""

    def __init__(self, path: str):
        self.path = path
        try:
            self.f = open(path, "rb")
        except OSError as e:
            raise LogError(f"{path}: cannot open message log: {e.strerror}") from None
        head = self.f.read(16)
        if len(head) < 16 or head[:8] != MAGIC:
            raise LogError(f"{path}: not a message log (bad magic)")
        version = _U32.unpack(head[8:12])[0]
        if version != VERSION:
            raise LogError(f"{path}: message log version {version}, this replay reads "
                           f"version {VERSION}; record again with this version")
        n = _U32.unpack(head[12:16])[0]
        try:
            self.header = json.loads(self.f.read(n))
        except ValueError:
            raise LogError(f"{path}: damaged header") from None
        self.index = 0

    def _read(self, n: int) -> bytes:
        b = self.f.read(n)
        if len(b) != n:
            raise LogError(f"{self.path}: truncated at record {self.index} (the recording "
                           f"run did not finish, or the file was cut)")
        return b

    def _earlier(self, offset: int, n: int) -> bytes:
        """A repeated payload: the bytes an earlier record stored at ``offset``."""
        here = self.f.tell()
        if offset + n > here:
            raise LogError(f"{self.path}: record {self.index} repeats bytes that are not "
                           f"earlier in the file: the log is damaged")
        self.f.seek(offset)
        data = self.f.read(n)
        self.f.seek(here)
        return data

    def next(self):
        """(op, peer, tag, size, result, payloads) of the next record."""
        raw = self._read(4)
        n = _U32.unpack(raw)[0]
        meta_b = self._read(n)
        cnt_b = self._read(4)
        crc = zlib.crc32(cnt_b, zlib.crc32(meta_b, zlib.crc32(raw)))
        payloads = []
        for _ in range(_U32.unpack(cnt_b)[0]):
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
            idx, op, peer, tag, size, result = pickle.loads(meta_b)
        except Exception:
            raise LogError(f"{self.path}: undecodable record {self.index}") from None
        if idx != self.index:
            raise LogError(f"{self.path}: record {self.index} carries index {idx}")
        self.index += 1
        return op, peer, tag, size, result, payloads
