"""Writing a stage's output files: whole or not at all.

Standard library only: replayed ranks use it, and they import nothing the
application would not (their start-up is measured).
"""
from __future__ import annotations

import json
import os


class OutputError(OSError):
    """A stage's output could not be written (disk full, no permission):
    the file named, nothing half-written left behind.  An OSError, as the
    failed write it reports."""


def write_atomic(path: str, write) -> None:
    """``write(tmp)`` to a temporary name beside ``path``, then rename: a
    reader never sees half a file, and a failed write (disk full) leaves
    the old file, removes the temporary one and raises OutputError."""
    base, ext = os.path.splitext(path)
    tmp = f"{base}.tmp{os.getpid()}{ext}"     # the extension kept: it says the format
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as e:
        raise OutputError(f"{path}: cannot write ({e.strerror or e}); nothing was "
                          f"written") from None
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def json_default(x):
    """JSON for what the tools write besides Python's own types: numpy
    integers and arrays (per-peer counts, statuses), as plain numbers."""
    if hasattr(x, "tolist"):
        return x.tolist()
    raise TypeError(f"cannot write {type(x).__name__} as JSON")


def write_json(path: str, obj, indent: int | None = 1) -> None:
    """Write ``obj`` as JSON to ``path``, atomically (:func:`write_atomic`)."""
    def write(tmp):
        with open(tmp, "w") as f:
            json.dump(obj, f, indent=indent, default=json_default)
    write_atomic(path, write)
