"""python -m replay run-bundle: on the target node, check the unpacked
bundle, replay its representatives, measure the node, and write the
results archive to carry back (``bundle/run.sh`` runs this in the virtual
environment it makes).

Refused before anything runs, each in one line that names the file and
what to do: a file changed or lost on the way (its digest), another
version of this project than the one that recorded the log, a
requirement installed at another version than the recorded one (unless
``--any-version``), another byte order, and another MPI library where a
representative made MPI calls below Python (the PMPI shim that answers
them is built here against this node's MPI and reads handles of the
recorded one's ABI).
"""
from __future__ import annotations

import glob
import importlib.metadata as md
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
    RESULTS_KIND,
    BundleError,
    check_files,
    digests,
    manifest_digest,
    project_digest,
    project_root,
    read_manifest,
    write_archive,
)
from .node import describe


def version_mismatches(reqs: list[str]) -> list[str]:
    """The pinned requirements (``name==version``) installed here at another
    version or not at all, one phrase each."""
    out = []
    for r in reqs:
        if "==" not in r:
            continue
        name, want = (x.strip() for x in r.split("==", 1))
        try:
            have = md.version(name)
        except md.PackageNotFoundError:
            out.append(f"{name} is not installed (recorded with {want})")
            continue
        if have != want:
            out.append(f"{name} {have} is installed, the log was recorded with {want}")
    return out


def check_node(bundle: str, man: dict, any_version: bool) -> list[str]:
    """Refuse what would make the replay wrong or fail late; returns notes
    about what differs and does not matter (another architecture is what
    a porting study is for)."""
    if man["project"] != project_digest(project_root()):
        raise BundleError(f"{os.path.join(bundle, MANIFEST)}: packed by another version of "
                          f"repreplay than this one ({project_root()}); run the bundle's "
                          f"run.sh, which runs the bundle's own copy")
    bad = version_mismatches(man.get("requirements", []))
    if bad and not any_version:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise BundleError(f"{os.path.join(bundle, 'requirements.txt')}: {bad[0]}{more}; "
                          f"run.sh installs the pinned versions in its own venv (or pass "
                          f"--any-version to replay anyway: a changed library may change "
                          f"the application's calls, and the replay then stops at the "
                          f"first that differs)")
    host, here = man.get("host", {}), describe(probe=False)
    notes = [f"requirement: {b}" for b in bad]
    if host.get("byteorder") and host["byteorder"] != here["byteorder"]:
        raise BundleError(f"{os.path.join(bundle, MANIFEST)}: recorded on a {host['byteorder']}-"
                          f"endian host, this node is {here['byteorder']}-endian: the logged "
                          f"message buffers cannot be answered here")
    clogs = glob.glob(os.path.join(bundle, "msglog", "rank*.clog"))
    vendor, mine = host.get("mpi", {}).get("vendor"), here["mpi"]["vendor"]
    if vendor and vendor != mine:
        if clogs:
            raise BundleError(f"{clogs[0]}: recorded below Python with {vendor}'s MPI, this "
                              f"node's mpi4py uses {mine}'s (another ABI); install the "
                              f"recorded MPI wheel (requirements.txt) or build mpi4py "
                              f"against a {vendor} MPI")
        notes.append(f"MPI library: {mine} here, {vendor} where recorded")
    if host.get("machine") and host["machine"] != here["machine"]:
        notes.append(f"architecture: {here['machine']} here, {host['machine']} where recorded")
    if host.get("python") and host["python"] != here["python"]:
        notes.append(f"Python {here['python']} here, {host['python']} where recorded (its "
                     f"speed is part of the computation the replay measures)")
    if clogs:
        from pmpishim.build import ShimError, build
        try:
            build()
        except ShimError as e:
            raise BundleError(f"{clogs[0]}: the PMPI shim that answers the calls made below "
                              f"Python cannot be built here: {e}") from None
    return notes


def run_bundle(bundle: str, out: str, repeats: int | None = None, load: int | None = None,
               bind: str | None = None, any_version: bool = False,
               watchdog: float | None = None) -> dict:
    """Replay the bundle's representatives on this node into the results
    archive ``out``; returns the results' manifest."""
    bundle, out = os.path.abspath(bundle), os.path.abspath(out)
    man = read_manifest(bundle, BUNDLE_KIND)
    check_files(bundle, man)
    notes = check_node(bundle, man, any_version)
    for n in notes:
        print(f"run-bundle: note: {n}", file=sys.stderr)
    opts = dict(man.get("replay", {}))
    if repeats is not None:
        opts["repeats"] = repeats
    if load is not None:
        opts["load"] = load
    app = man["app"]
    target = ({"module": ["-m"], "command": ["-c"]}.get(app["mode"], []) + list(app["argv"]))
    stage = tempfile.mkdtemp(prefix="run-bundle.",
                             dir=os.path.dirname(os.path.abspath(out)) or ".")
    try:
        res = os.path.join(stage, "results")
        replay_dir = os.path.join(res, "replay")
        cmd = [sys.executable, "-m", "replay", "--ranks", ",".join(map(str, man["ranks"])),
               "--size", str(man["size"]), "--log", os.path.join(bundle, "msglog"),
               "-o", replay_dir, "--repeats", str(opts.get("repeats", 1)),
               "--load", str(opts.get("load", 0))]
        if bind:
            cmd += ["--bind-command", bind]
        if watchdog is not None:
            cmd += ["--watchdog", repr(watchdog)]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [project_root()] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        print(f"run-bundle: replaying rank(s) {man['ranks']} of N={man['size']} "
              f"({opts.get('repeats', 1)} round(s), {opts.get('load', 0)} copies)",
              file=sys.stderr)
        t0 = time.time()
        r = subprocess.run(cmd + target, cwd=os.path.join(bundle, "app"), env=env)
        if r.returncode:
            raise BundleError(f"{bundle}: the replay failed (exit {r.returncode}; its error "
                              f"is above); nothing was written to {out}")
        from contracts.output import write_json
        node = describe(probe=True)
        result = {"kind": RESULTS_KIND, "format": FORMAT,
                  "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                  "bundle": manifest_digest(bundle), "project": man["project"],
                  "size": man["size"], "ranks": man["ranks"], "replay": opts,
                  "seconds": round(time.time() - t0, 3), "node": node, "notes": notes,
                  "files": digests(res)}
        write_json(os.path.join(res, MANIFEST), result)
        write_archive(res, out, "results")
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    print(f"run-bundle: {os.path.normpath(out)}: carry it back and run python -m replay unpack",
          file=sys.stderr)
    return result
