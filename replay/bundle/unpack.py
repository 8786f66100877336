"""python -m replay unpack: check a results archive carried back from the
target node and put its replays where ``replay.expand`` reads them.

Refused in one line: a truncated or altered archive (the file named),
results of another bundle than the one given, and results replayed by
another version of this project than the one here (the replay's files
would be read under another contract).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import tempfile

from . import (
    RESULTS_KIND,
    BundleError,
    check_files,
    extract,
    project_digest,
    read_manifest,
    read_member,
)

# where the log was recorded and where it was replayed, beside the replays
# (the report's "Replayed on a node elsewhere")
NODES = "nodes.json"


def rank_files(replay_dir: str, rank: int | None) -> list[str]:
    """The files of ``rank``'s replay (every rank's where None), relative
    to ``replay_dir``: its rows, side files, rounds and copies."""
    pat = re.compile(r"^(?:rank|variability_rank|repeats_rank)(\d+)\.")
    out = []
    for d, dirs, files in os.walk(replay_dir):
        dirs.sort()
        for f in sorted(files):
            m = pat.match(f)
            if rank is None or (m and int(m.group(1)) == rank):
                out.append(os.path.relpath(os.path.join(d, f), replay_dir))
    return out


def unpack(results: str, out_dir: str, bundle: str | None = None, rank: int | None = None,
           force: bool = False) -> dict:
    """Put the replays in the results archive ``results`` (one rank's, or
    all) into ``out_dir``, with nodes.json (the host's facts from the
    bundle, when given, and the target's); returns the results' manifest."""
    from contracts.output import write_json
    parent = os.path.dirname(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="unpack.", dir=parent)
    try:
        res = extract(results, tmp, "results")
        man = read_manifest(res, RESULTS_KIND)
        check_files(res, man)
        host = None
        if bundle is not None:
            packed = read_member(bundle, "bundle/manifest.json")
            mine = hashlib.sha256(packed).hexdigest()
            host = json.loads(packed).get("host")
            if man.get("bundle") != mine:
                raise BundleError(f"{results}: replayed from another bundle than {bundle}; "
                                  f"bring back the results of that bundle's run.sh")
        if man.get("project") != project_digest():
            raise BundleError(f"{results}: replayed by another version of repreplay than "
                              f"this one (its source changed since the bundle was packed); "
                              f"pack again, replay that bundle, and unpack its results")
        if rank is not None and rank not in man.get("ranks", []):
            raise BundleError(f"{results}: holds the replays of rank(s) {man.get('ranks')}, "
                              f"not of rank {rank}")
        src = os.path.join(res, "replay")
        files = rank_files(src, rank)
        wanted = [f"rank{r}.csv" for r in ([rank] if rank is not None else man["ranks"])]
        missing = [w for w in wanted if w not in files]
        if missing:
            raise BundleError(f"{results}: has no replay/{missing[0]}; the replay on the "
                              f"target did not finish")
        there = [w for w in wanted if os.path.exists(os.path.join(out_dir, w))]
        if there and not force:
            raise BundleError(f"{out_dir}: already holds {there[0]}; pass --force to replace "
                              f"it, or choose another directory")
        for rel in files:
            dst = os.path.join(out_dir, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(os.path.join(src, rel), dst)
        write_json(os.path.join(out_dir, NODES), {"host": host, "target": man.get("node")})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    node = man.get("node", {})
    print(f"unpack: {len(files)} file(s) into {out_dir}, replayed on {node.get('hostname')} "
          f"({node.get('machine')}, {node.get('cpu')})", file=sys.stderr)
    return man
