"""Keep numba's on-disk cache of the simulator's compiled code in step with its sources.

numba (``cache=True``) reuses a function's compiled code while the file
that defines it is unchanged, whatever happened to the functions it calls
in other files: after a ``git pull`` that changed netsim/flows.py but not
netsim/engine.py, the engine would run the old flows code, silently.  So
the package keeps a digest of all its sources beside the cache and drops
the cache when the digest changes; the next run compiles afresh (once,
about a minute).
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = HERE / "__pycache__"
STAMP = CACHE / "numba-sources.sha256"


def sources_digest(folder: Path = HERE) -> str:
    """SHA-256 over the names and bytes of the package's Python files."""
    h = hashlib.sha256()
    for f in sorted(folder.glob("*.py")):
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def drop_if_stale() -> bool:
    """Remove the cached compiled code if the sources changed since it was
    made; True if it was removed.  A cache that cannot be written (a
    read-only install: numba then caches elsewhere, and an upgrade replaces
    every file at once) is left alone."""
    digest = sources_digest()
    try:
        if STAMP.read_text().strip() == digest:
            return False
    except OSError:
        pass
    try:
        CACHE.mkdir(exist_ok=True)
        for f in list(CACHE.glob("*.nbi")) + list(CACHE.glob("*.nbc")):
            f.unlink(missing_ok=True)
        tmp = STAMP.with_name(f"{STAMP.name}.{os.getpid()}")
        tmp.write_text(digest + "\n")
        os.replace(tmp, STAMP)          # whole, for runs starting beside this one
    except OSError:
        return False
    return True
