"""The replay bundle: the replay step carried to a target node elsewhere.

Porting studies and procurement benchmarks replay on a node that is not in
the user's cluster: no shared file system, another login, often another
CPU architecture.  ``python -m replay pack`` puts all that node needs into
one archive (the message logs, the application's files, the pinned
requirements, this project's own source, optionally their wheels, a
``run.sh``); on the target ``bash bundle/run.sh`` makes its own virtual
environment and runs ``python -m replay run-bundle``, which writes a
results archive; ``python -m replay unpack`` puts the replays where
``replay.expand`` reads them.  Both archives carry a manifest with the
SHA-256 of every file, so a file changed or lost on the way is named.

The archives' layout is documented in docs/FILES.md.  This module holds
what pack, run-bundle and unpack share: the manifest, digests and safe
archive reading and writing.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile

FORMAT = 1
BUNDLE_KIND = "replay-bundle"
RESULTS_KIND = "replay-results"
MANIFEST = "manifest.json"
# this project's packages, carried in the bundle and digested as its version
PROJECT_PACKAGES = ("launch", "mpimodel", "contracts", "pmpishim", "instrument", "cluster",
                    "replay", "netsim", "extrapolate", "interop", "calibrate", "validate",
                    "report", "scaling", "emulate")
SOURCE_SUFFIXES = (".py", ".c", ".yaml", ".sh")


class BundleError(Exception):
    """A bundle or results archive that cannot be made, run or unpacked
    (the file named, and what to do)."""


def project_root() -> str:
    """The directory holding this project's packages."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def project_files(root: str | None = None) -> list[str]:
    """This project's source files, relative to ``root``, sorted: what a
    bundle carries of it (no compiled extensions: they are built there)."""
    root = root or project_root()
    out = []
    for pkg in PROJECT_PACKAGES:
        for d, dirs, files in os.walk(os.path.join(root, pkg)):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__")
            out += [os.path.relpath(os.path.join(d, f), root) for f in files
                    if f.endswith(SOURCE_SUFFIXES)]
    return sorted(out)


def project_digest(root: str | None = None) -> str:
    """SHA-256 over this project's source (paths and contents): the version
    that wrote a log must be the version that replays it, and a version
    string that never changes would not tell."""
    root = root or project_root()
    h = hashlib.sha256()
    for rel in project_files(root):
        h.update(rel.encode() + b"\0")
        with open(os.path.join(root, rel), "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def file_digest(path: str) -> str:
    """SHA-256 of one file, read in chunks (logs can be large)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def digests(root: str, skip: tuple[str, ...] = (MANIFEST,)) -> dict[str, str]:
    """``{relative path: SHA-256}`` of every file under ``root``."""
    out = {}
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for f in sorted(files):
            rel = os.path.relpath(os.path.join(d, f), root)
            if rel not in skip:
                out[rel] = file_digest(os.path.join(d, f))
    return out


def read_manifest(root: str, kind: str) -> dict:
    """``root``'s manifest.json, of ``kind`` and this format."""
    path = os.path.join(root, MANIFEST)
    try:
        with open(path, "rb") as f:
            man = json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        raise BundleError(f"{path}: missing; {root} is not an unpacked {kind} "
                          f"(written by python -m replay)") from None
    except (OSError, ValueError, UnicodeDecodeError) as e:
        raise BundleError(f"{path}: cannot read ({e}); copy the archive again") from None
    if not isinstance(man, dict) or man.get("kind") != kind:
        raise BundleError(f"{path}: not a {kind}'s manifest (kind {man.get('kind')!r})"
                          if isinstance(man, dict) else f"{path}: not a manifest")
    if man.get("format") != FORMAT:
        raise BundleError(f"{path}: format {man.get('format')!r}, this version reads format "
                          f"{FORMAT}; pack it again with this version")
    if not isinstance(man.get("files"), dict):
        raise BundleError(f"{path}: no file digests")
    return man


def check_files(root: str, man: dict) -> None:
    """Every file the manifest lists is there with its digest: a file
    changed, lost or truncated on the way is named."""
    bad = []
    for rel, want in man["files"].items():
        p = os.path.join(root, rel)
        if os.path.isabs(rel) or ".." in rel.split(os.sep):
            raise BundleError(f"{os.path.join(root, MANIFEST)}: lists {rel!r}, outside the "
                              f"archive; it was not written by python -m replay")
        if not os.path.isfile(p):
            bad.append(f"{p}: missing")
        elif file_digest(p) != want:
            bad.append(f"{p}: changed (its SHA-256 differs from the manifest's)")
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise BundleError(f"{bad[0]}{more}: the archive was damaged or altered on the way; "
                          f"copy it again from where it was written")


def manifest_digest(root: str) -> str:
    """The identity of a bundle: the SHA-256 of its manifest (which holds
    every other file's)."""
    return file_digest(os.path.join(root, MANIFEST))


def write_archive(src: str, out: str, name: str) -> None:
    """``src`` as ``out`` (.tar.gz) under the top directory ``name``,
    atomically (contracts.output.write_atomic): a failed write leaves no
    half archive."""
    from contracts.output import OutputError, write_atomic

    def write(tmp):
        # level 1: logs of floating-point payloads hardly compress, and level
        # 9 spends minutes on a large one
        with tarfile.open(tmp, "w:gz", compresslevel=1) as tar:
            tar.add(src, arcname=name)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    try:
        write_atomic(out, write)
    except OutputError as e:
        raise BundleError(str(e)) from None


def extract(archive: str, dest: str, name: str) -> str:
    """Unpack ``archive`` into ``dest``; returns the path of its top
    directory ``name``.  A truncated or damaged archive, or a member that
    would land outside ``dest``, is refused in one line."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for m in tar.getmembers():
                parts = m.name.split("/")
                if m.name.startswith("/") or ".." in parts or parts[0] != name:
                    raise BundleError(f"{archive}: holds {m.name!r}, outside {name}/; "
                                      f"it was not written by python -m replay")
                if not (m.isfile() or m.isdir()):
                    raise BundleError(f"{archive}: holds {m.name!r}, neither a file nor a "
                                      f"directory; it was not written by python -m replay")
            tar.extractall(dest)
    except FileNotFoundError:
        raise BundleError(f"{archive}: no such file") from None
    except (tarfile.TarError, EOFError, OSError) as e:
        raise BundleError(f"{archive}: truncated or damaged ({e}); copy it again from "
                          f"where it was written") from None
    return os.path.join(dest, name)


def read_member(archive: str, member: str) -> bytes:
    """One file of an archive, without unpacking the rest."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            f = tar.extractfile(member)
            if f is None:
                raise KeyError(member)
            return f.read()
    except KeyError:
        raise BundleError(f"{archive}: has no {member}; it is not a bundle written by "
                          f"python -m replay pack") from None
    except FileNotFoundError:
        raise BundleError(f"{archive}: no such file") from None
    except (tarfile.TarError, EOFError, OSError) as e:
        raise BundleError(f"{archive}: truncated or damaged ({e}); copy it again") from None


def copy_tree(src: str, dst: str) -> None:
    """Copy a directory, replacing what is at ``dst``."""
    if os.path.exists(dst):
        shutil.rmtree(dst)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
