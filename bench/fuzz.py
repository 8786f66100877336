"""Fuzz every file a stage reads: no traceback, no hang, no silent wrong answer.

    python bench/fuzz.py [--mutations 1500] [--seed 1] [--replays 40] [--csv out.csv]

Builds one real pipeline's files (examples/uneven.py, 4 ranks: trace with
its raw files, representatives, message log, replays, computation table,
platform, prediction, ping-pong measurements), then, mutation by mutation,
damages one file and runs a stage that reads it, in this process (the
stages' own ``main``), and sorts the outcome:

- ``error``: the stage refused with exit status 2 and a message;
- ``same``: it accepted the file and its output is the undamaged run's;
- ``warned``: a different output, with a warning saying why;
- ``changed``: a different output and no word about it;
- ``traceback``: an exception escaped the stage (or was printed);
- ``hang``: the stage ran past its time limit.

Two families of mutations.  *invalid*: what the file's contract forbids
(NaN, infinity, a negative time, a repeated or missing row, a rank or peer
that does not exist, an unknown op, a wrong type, a missing key or column,
an empty table, bytes that are not text); a ``changed`` outcome there is a
silent wrong answer.  *damage*: random bytes flipped, cut or inserted; a
flipped digit in a CSV is a valid file with another number, so
``changed`` counts as silent only for files that carry a checksum (the
message log).  Crafted message-log records (valid checksums, wrong
content) are replayed for real, each in its own process (``--replays``).

Goal (bench/RESULTS.md): 0 tracebacks, 0 hangs, 0 silent wrong answers.
``pytest -m fuzz`` runs a smaller, seeded set of the same (tests/test_fuzz.py).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import zlib
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BIN = Path(sys.executable).parent
MPIEXEC = str(BIN / "mpiexec") if (BIN / "mpiexec").exists() else "mpiexec"
APP = ["examples/uneven.py", "--iters", "4", "--work", "20000", "--classes", "2"]
N = 4
TIMEOUT = 60            # seconds a stage may take on one damaged input


def _env() -> dict:
    env = dict(os.environ, MPIR_CVAR_ENABLE_HEAVY_YIELD="1", OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _sh(cmd: list) -> None:
    p = subprocess.run([str(c) for c in cmd], cwd=ROOT, env=_env(), capture_output=True,
                       text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed:\n{p.stderr[-3000:]}")


def build_base(work: Path) -> dict:
    """Run the pipeline once for real; returns the path of every file."""
    py = sys.executable
    t, raw = work / "trace", work / "rawtrace"
    _sh([MPIEXEC, "-n", N, py, "-m", "instrument", "trace", "--keep-raw", "-o", t] + APP)
    # an unmerged copy: what a killed run leaves, read by show through merge
    shutil.copytree(t, raw)
    for f in ("events.parquet", "comms.parquet", "sites.parquet", "topology.parquet"):
        (raw / f).unlink()
    meta = json.loads((raw / "meta.json").read_text())
    for k in ("ranks", "incomplete_ranks", "hosts", "events", "unmodelled"):
        meta.pop(k, None)
    meta["merged"] = False
    (raw / "meta.json").write_text(json.dumps(meta))
    reps = work / "reps.csv"
    _sh([py, "-m", "cluster", t, "-o", reps, "--vector", "cpu"])
    log = work / "log"
    _sh([MPIEXEC, "-n", N, py, "-m", "instrument", "record", "--ranks", "0,1", "-o", log] + APP)
    rep = work / "rep"
    _sh([py, "-m", "replay", "--ranks", "0,1", "--log", log, "-o", rep] + APP)
    # the representatives file names ranks 0 and 1 (both replayed)
    r = pd.read_csv(reps)
    if not set(r["representative"]) <= {0, 1}:
        members = r["cluster"].astype("category").cat.codes % 2
        r["representative"] = members
        r["cluster"] = members
        r.to_csv(reps, index=False)
    compute = work / "compute.csv"
    _sh([py, "-m", "replay.expand", t, reps, rep, "-o", compute])
    platform = work / "platform.yaml"
    shutil.copyfile(ROOT / "config" / "platforms" / "ib-cluster.yaml", platform)
    pred = work / "prediction.json"
    _sh([py, "-m", "netsim", t, "--platform", platform, "--compute", compute, "-o", pred])
    pp = work / "pingpong.csv"
    _sh([MPIEXEC, "-n", "2", py, "-m", "calibrate", "measure", "-o", pp, "--repeats", "1"])
    return {"work": work, "trace": t, "rawtrace": raw, "reps": reps, "log": log, "rep": rep,
            "compute": compute, "platform": platform, "prediction": pred, "pingpong": pp}


# ---- the stages, run in this process -----------------------------------------------
class _Hang(BaseException):
    pass


def _on_alarm(signum, frame):
    raise _Hang()


def _call(fn, *args) -> tuple:
    """(exit status or 'traceback'/'hang', stdout, stderr) of fn(*args)."""
    out, err = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(TIMEOUT)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = fn(*args)
                rc = 0 if rc is None else rc
            except SystemExit as e:
                rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except _Hang:
                rc = "hang"
            except BaseException:
                traceback.print_exc()
                rc = "traceback"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return rc, out.getvalue(), err.getvalue()


def _read(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


def _prediction_digest(path: Path) -> bytes:
    if not path.exists():
        return b""
    d = json.loads(path.read_text())
    return json.dumps([d.get("predicted_time"), d.get("ranks")], sort_keys=True).encode()


def stage_show(p: dict, out: Path, trace_key: str = "trace"):
    from instrument.__main__ import main
    rc, so, se = _call(main, ["show", str(p[trace_key])])
    return rc, so.replace(str(p[trace_key]), "TRACE").encode(), se


def stage_cluster(p: dict, out: Path):
    from cluster.__main__ import main
    o = out / "reps.csv"
    rc, so, se = _call(main, [str(p["trace"]), "-o", str(o), "--vector", "cpu"])
    return rc, _read(o), se


def stage_expand(p: dict, out: Path):
    from replay.expand import main
    o = out / "compute.csv"
    rc, so, se = _call(main, [str(p["trace"]), str(p["reps"]), str(p["rep"]), "-o", str(o)])
    return rc, _read(o), se


def stage_netsim(p: dict, out: Path):
    from netsim.__main__ import main
    o = out / "prediction.json"
    rc, so, se = _call(main, [str(p["trace"]), "--platform", str(p["platform"]),
                              "--compute", str(p["compute"]), "-o", str(o)])
    return rc, _prediction_digest(o), se


def stage_prediction(p: dict, out: Path):
    """The prediction's reader, as validate and the report use it."""
    from contracts.prediction import PredictionError, read_prediction

    def run():
        try:
            d = read_prediction(str(p["prediction"]))
        except PredictionError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(json.dumps([d["predicted_time"], d["ranks"]], sort_keys=True))
        return 0
    rc, so, se = _call(run)
    return rc, so.encode(), se


def stage_fit(p: dict, out: Path):
    from calibrate.__main__ import main
    o = out / "fit.yaml"
    rc, so, se = _call(main, ["fit", str(p["pingpong"]), "--cores-per-node", "2", "-o", str(o)])
    return rc, _read(o), se


def stage_log(p: dict, out: Path):
    """What replay reads before and while running the application: the log
    checked and opened for rank 0, every record read to the end."""
    from contracts.msglog import LogError
    from replay.run import open_log

    def run():
        try:
            log = open_log(0, N, str(p["log"]), [str(ROOT / APP[0])] + APP[1:], "path")
            seen = []
            while True:
                rec = log.next()
                seen.append((rec[:5], [zlib.crc32(x) for x in rec[6]]))
                if rec[0] == "end":
                    break
        except LogError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(repr(seen))
        return 0
    rc, so, se = _call(run)
    return rc, so.encode(), se


# file -> (path key, file name under it or None, stages that read it)
FILES = {
    "meta.json": ("trace", "meta.json", [stage_show, stage_cluster, stage_expand, stage_netsim]),
    "events.parquet": ("trace", "events.parquet",
                       [stage_show, stage_cluster, stage_expand, stage_netsim]),
    "comms.parquet": ("trace", "comms.parquet", [stage_cluster, stage_netsim]),
    "topology.parquet": ("trace", "topology.parquet", [stage_cluster, stage_netsim]),
    "raw .ev": ("rawtrace", "raw/r000001.ev", ["rawshow"]),
    "raw .side": ("rawtrace", "raw/r000001.side", ["rawshow"]),
    "raw .json": ("rawtrace", "raw/r000001.json", ["rawshow"]),
    "reps.csv": ("reps", None, [stage_expand]),
    "replay rank.csv": ("rep", "rank1.csv", [stage_expand]),
    "compute.csv": ("compute", None, [stage_netsim]),
    "platform.yaml": ("platform", None, [stage_netsim]),
    "prediction.json": ("prediction", None, [stage_prediction]),
    "pingpong.csv": ("pingpong", None, [stage_fit]),
    "message log": ("log", "rank0.log", [stage_log]),
    "log status": ("log", "rank0.json", [stage_log]),
    "record.json": ("log", "record.json", [stage_log]),
}
# files whose damage must be found (checksums: the log's records, the merged
# trace's Parquet pages): a changed answer from one is a silent one
CHECKSUMMED = {"message log", "events.parquet", "comms.parquet", "topology.parquet"}
HUGE_INT = 2 ** 62       # fits int64, beyond any count the engine sums safely


# ---- mutations ---------------------------------------------------------------------
def damage(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    """Random bytes flipped, cut, inserted or dropped."""
    if not data:
        return "empty stays empty", data
    how = rng.choice(["flip", "flip", "cut", "insert", "drop", "zero"])
    i = rng.randrange(len(data))
    if how == "flip":
        b = bytearray(data)
        b[i] ^= 1 << rng.randrange(8)
        return f"bit flip at {i}", bytes(b)
    if how == "cut":
        return f"cut at {i}", data[:i]
    if how == "insert":
        return f"insert at {i}", data[:i] + bytes([rng.randrange(256)]) + data[i:]
    if how == "drop":
        return f"drop byte {i}", data[:i] + data[i + 1:]
    n = min(len(data) - i, rng.randrange(1, 64))
    return f"zero {n} bytes at {i}", data[:i] + bytes(n) + data[i + n:]


EDIT = "(valid edit) "      # a mutation that may well be valid input: not counted as silent
_BAD_NUMBERS = [float("nan"), float("inf"), -float("inf"), -1.0, -1e-3, 1e300]
_BAD_VALUES = [None, "x", [], {}, -1, float("nan"), True, 1.5, "", [1, 2]]


def _bad_table(rng: random.Random, df: pd.DataFrame, ids: dict,
               nonneg: tuple, ordered: bool = True,
               optional: tuple = ()) -> tuple[str, pd.DataFrame]:
    """One contract violation of a table.  ``ids``: column -> a value out of
    its range; ``nonneg``: columns that must be finite and >= 0;
    ``ordered``: rows are keyed (a repeated, missing or moved row is wrong;
    in a table of measurements it is just another sample); ``optional``:
    columns the contract lets a table leave out (dropping one is an edit)."""
    df = df.copy()
    choices = ["drop_col", "empty"] + (["dup", "drop_mid", "swap"] if ordered else [])
    choices += ["id"] * 2 if ids else []
    choices += ["number"] * 3 if nonneg else []
    how = rng.choice(choices)
    i = rng.randrange(1, max(2, len(df) - 1)) if len(df) > 2 else 0
    if how == "dup":
        return f"row {i} repeated", pd.concat([df.iloc[:i + 1], df.iloc[i:]], ignore_index=True)
    if how == "drop_mid":
        return f"row {i} dropped", df.drop(index=df.index[i]).reset_index(drop=True)
    if how == "drop_col":
        c = rng.choice(list(df.columns))
        return f"{EDIT if c in optional else ''}column {c} dropped", df.drop(columns=[c])
    if how == "empty":
        return "no rows", df.iloc[:0]
    if how == "swap":
        j = min(i + 1, len(df) - 1)
        idx = list(range(len(df)))
        idx[i], idx[j] = idx[j], idx[i]
        if i == j:
            return "no rows", df.iloc[:0]
        return f"rows {i} and {j} swapped", df.iloc[idx].reset_index(drop=True)
    if how == "id":
        c = rng.choice(list(ids))
        df[c] = df[c].astype("int64")
        df.loc[df.index[i], c] = ids[c]
        return f"{c} = {ids[c]} in row {i}", df
    c = rng.choice(list(nonneg))
    v = rng.choice(_BAD_NUMBERS)
    df[c] = df[c].astype(float)
    df.loc[df.index[i], c] = v
    return f"{c} = {v} in row {i}", df


def invalid(rng: random.Random, name: str, path: Path) -> str:
    """Write one contract violation of the file ``name`` at ``path``."""
    if name == "topology.parquet" or rng.random() < 0.04:
        path.unlink()              # every file here is required
        return "file removed"
    if name in ("events.parquet", "comms.parquet"):
        df = pd.read_parquet(path)
        if name == "events.parquet":
            what, df = _bad_events(rng, df)
        else:
            what, df = _bad_table(rng, df, {"comm": 99}, ())
        df.to_parquet(path, index=False)
        # a wrong table with a valid digest (a tracer's bug, not damage):
        # what the checks behind the digest must find
        from contracts.merge import table_digest
        meta = json.loads((path.parent / "meta.json").read_text())
        meta["digests"][path.name] = table_digest(str(path))
        (path.parent / "meta.json").write_text(json.dumps(meta))
        return what
    if name in ("reps.csv", "replay rank.csv", "compute.csv", "pingpong.csv"):
        if rng.random() < 0.15:
            return _bad_text(rng, path)
        df = pd.read_csv(path)
        spec = {"reps.csv": ({"rank": N + 3, "representative": N + 7, "cluster": -4},
                             ("total", "rep_total", "error")),
                "replay rank.csv": ({"seq": 10 ** 6, "rank": 7}, ("comp", "cpu", "inside")),
                "compute.csv": ({"rank": N, "seq": -2}, ("comp", "inside"), True,
                                ("inside",)),
                "pingpong.csv": ({"bytes": -8, "peer": -9},
                                 tuple(c for c in df.columns if df[c].dtype.kind == "f"),
                                 False)}[name]
        if name == "replay rank.csv" and rng.random() < 0.2:
            what, df = "last rows cut (a replay that did not finish)", df.iloc[:len(df) // 2]
        elif name == "replay rank.csv" and rng.random() < 0.2:
            i = rng.randrange(1, len(df) - 1)
            df.loc[df.index[i], "op"] = "bogus_op"
            what = f"op of row {i} unknown"
        else:
            what, df = _bad_table(rng, df, *spec)
        df.to_csv(path, index=False)
        return what
    if name in ("meta.json", "prediction.json", "raw .json", "log status", "record.json"):
        if rng.random() < 0.15:
            return _bad_text(rng, path)
        d = json.loads(path.read_text())
        return _bad_json(rng, d, path)
    if name == "platform.yaml":
        return _bad_yaml(rng, path)
    if name == "raw .side":
        lines = path.read_bytes().split(b"\n")
        i = rng.randrange(max(1, len(lines) - 1))
        chunk = json.loads(lines[i])
        j = rng.randrange(len(chunk))
        rec = chunk[j]
        k = rng.randrange(len(rec))
        rec[k] = rng.choice(_BAD_VALUES)
        lines[i] = json.dumps(chunk).encode()
        path.write_bytes(b"\n".join(lines))
        return f"side record {j} of line {i}: field {k} = {rec[k]!r}"
    if name == "raw .ev":
        from contracts.raw_trace import FIELDS, N_INT_FIELDS, RECORD
        data = bytearray(path.read_bytes())
        n = len(data) // RECORD.size
        i = rng.randrange(n)
        ints = [FIELDS.index(f) for f in ("op", "peer", "polls")]
        k = rng.choice(ints + list(range(N_INT_FIELDS, len(FIELDS))))
        v = {FIELDS.index("op"): 60000, FIELDS.index("peer"): 9999,
             FIELDS.index("polls"): -1}.get(k, rng.choice(_BAD_NUMBERS))
        fmt = "<q" if k < N_INT_FIELDS else "<d"
        struct.pack_into(fmt, data, i * RECORD.size + 8 * k, v)
        path.write_bytes(bytes(data))
        return f"event {i}: {FIELDS[k]} = {v}"
    if name in ("message log",):
        return _crafted_record(rng, path)
    raise KeyError(name)


def _bad_events(rng, df):
    choice = rng.random()
    if choice < 0.08:
        c = rng.choice(["sbytes", "rbytes"])
        i = rng.randrange(len(df))
        df.loc[df.index[i], c] = HUGE_INT
        return f"{c} = 2**62 in row {i}", df
    if choice < 0.12:
        c = rng.choice(["rank", "peer"])
        df[c] = df[c].astype(float) + 0.5 if rng.random() < 0.5 else df[c].astype(str)
        return f"{c} of type {df[c].dtype}", df
    if choice < 0.15:
        i = rng.randrange(len(df))
        df.loc[df.index[i], "op"] = "bogus_op"
        return f"op of row {i} unknown", df
    if choice < 0.25:
        r = rng.randrange(N)
        last = df.index[df["rank"] == r][-1]
        return f"rank {r}'s last event dropped", df.drop(index=last).reset_index(drop=True)
    return _bad_table(rng, df, {"rank": N + 2, "peer": N + 5, "seq": -3, "comm": 77,
                                "rpeer": 99}, ("comp", "cpu", "t_start", "t_end"))


def _bad_text(rng, path: Path) -> str:
    how = rng.choice(["latin1", "binary", "empty", "header only"])
    data = path.read_bytes()
    if how == "latin1":
        i = rng.randrange(len(data))
        path.write_bytes(data[:i] + b"\xe9\xff" + data[i:])
    elif how == "binary":
        path.write_bytes(bytes(rng.randrange(256) for _ in range(200)))
    elif how == "empty":
        path.write_bytes(b"")
    else:
        path.write_bytes(data.split(b"\n")[0] + b"\n")
    return f"text: {how}"


def _paths(d, prefix=()):
    """Every (path of keys, value) of a JSON-like structure's leaves and nodes."""
    out = []
    if isinstance(d, dict):
        for k, v in d.items():
            out.append((prefix + (k,), v))
            out += _paths(v, prefix + (k,))
    elif isinstance(d, list):
        for i, v in enumerate(d[:8]):
            out.append((prefix + (i,), v))
            out += _paths(v, prefix + (i,))
    return out


def _bad_json(rng, d, path: Path) -> str:
    paths = _paths(d)
    keys, old = rng.choice(paths)
    parent = d
    for k in keys[:-1]:
        parent = parent[k]
    how = rng.random()
    if how < 0.2 and isinstance(parent, dict):
        del parent[keys[-1]]
        what = f"{'/'.join(map(str, keys))} removed"
    else:
        new = rng.choice([v for v in _BAD_VALUES if type(v) is not type(old)] +
                         ([-abs(old) - 1] if isinstance(old, (int, float))
                          and not isinstance(old, bool) else []))
        parent[keys[-1]] = new
        what = f"{'/'.join(map(str, keys))} = {new!r} (was {str(old)[:30]})"
    path.write_text(json.dumps(d))
    return what


def _bad_yaml(rng, path: Path) -> str:
    import yaml
    if rng.random() < 0.15:
        return _bad_text(rng, path)
    d = yaml.safe_load(path.read_text())
    paths = [(k, v) for k, v in _paths(d) if not isinstance(v, (dict, list))]
    keys, old = rng.choice(paths)
    parent = d
    for k in keys[:-1]:
        parent = parent[k]
    if rng.random() < 0.1:
        # a key written twice: YAML keeps the last, which is no user's intent
        text = path.read_text()
        top = [ln for ln in text.splitlines() if ln and not ln[0].isspace() and ":" in ln]
        line = rng.choice(top)
        path.write_text(text + line.split(":")[0] + ": 3\n")
        return f"key {line.split(':')[0]} written twice"
    if rng.random() < 0.2 and isinstance(parent, dict):
        # many keys are optional (their defaults documented): a valid edit,
        # unless the reader says the key is required
        del parent[keys[-1]]
        what = f"{EDIT}{'/'.join(map(str, keys))} removed"
    else:
        choices = [float("nan"), float("inf"), "fast", None, [1], 1e308]
        if isinstance(old, (int, float)) and not isinstance(old, bool):
            choices += [-abs(old) - 1]
        new = rng.choice(choices)
        parent[keys[-1]] = new
        what = f"{'/'.join(map(str, keys))} = {new!r} (was {old!r})"
    path.write_text(yaml.safe_dump(d))
    return what


def _crafted_record(rng, path: Path) -> str:
    """Rewrite the log with one record's meta replaced by nonsense, every
    checksum and the completion status valid: what the checksum cannot find."""
    from contracts.msglog import LogReader, LogWriter, status_path
    r = LogReader(str(path), complete=False)
    records = []
    while True:
        rec = r.next()
        records.append(rec)
        if rec[0] == "end":
            break
    # a record the application's calls read (not init, finalize or end)
    candidates = [i for i, rec in enumerate(records)
                  if rec[0] not in ("init", "finalize", "end")]
    i = rng.choice(candidates)
    op, peer, tag, nbytes, comm, result, payloads = records[i]
    field = rng.choice(["result", "result", "payloads", "op", "peer", "nbytes"])
    if field == "result":
        result = rng.choice(_BAD_VALUES + [[True, [1, "x", 3, False], None], [[99, None]]])
    elif field == "payloads":
        payloads = rng.choice([[], [b"\x80\x05junk"], payloads + [b"extra"], [b""] * 3])
    elif field == "op":
        op = rng.choice(["bogus", "send", "wait", "allreduce"])
    elif field == "peer":
        peer = rng.choice([99, -7, peer + 1])
    else:
        nbytes = nbytes + rng.choice([1, -1, 1 << 40])
    records[i] = (op, peer, tag, nbytes, comm, result, payloads)
    tmp = str(path) + ".new"
    w = LogWriter(tmp, r.header)
    for op_, peer_, tag_, nb_, comm_, res_, pl_ in records[:-1]:
        w.write(op_, peer_, tag_, res_, pl_, nb_, comm_)
    w.close(records[-1][5])
    r.f.close()
    os.replace(tmp, path)
    os.replace(status_path(tmp), status_path(str(path)))
    return f"record {i}: {field} crafted ({records[i][0]}, valid checksum)"


# ---- the runs ---------------------------------------------------------------------
def _copy(base: dict, key: str, dest: Path) -> dict:
    """The base paths, with the directory or file of ``key`` copied under dest."""
    p = dict(base)
    src = base[key]
    dst = dest / src.name
    if src.is_dir():
        shutil.copytree(src, dst)
    else:
        shutil.copyfile(src, dst)
    p[key] = dst
    return p


def baseline(base: dict) -> dict:
    """Each stage's output on the undamaged files."""
    out = {}
    with tempfile.TemporaryDirectory() as d:
        for name, fn in _stages().items():
            rc, res, err = fn(base, Path(d))
            if rc != 0:
                raise RuntimeError(f"stage {name} fails on the undamaged files:\n{err}")
            out[name] = res
    return out


def _stages() -> dict:
    return {"show": stage_show, "rawshow": lambda p, o: stage_show(p, o, "rawtrace"),
            "cluster": stage_cluster, "expand": stage_expand, "netsim": stage_netsim,
            "prediction": stage_prediction, "fit": stage_fit, "log": stage_log}


def one(base: dict, ref: dict, rng: random.Random, name: str, family: str,
        reader=None) -> dict:
    """Damage one file, run one stage that reads it (``reader``, else one
    drawn); the outcome as a row."""
    key, inner, readers = FILES[name]
    stages = _stages()
    reader = reader if reader is not None else rng.choice(readers)
    sname = reader if isinstance(reader, str) else \
        next(k for k, v in stages.items() if v is reader)
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        p = _copy(base, key, d)
        path = p[key] / inner if inner else p[key]
        if family == "directory":
            # a directory of the file's name (an unpacked archive, a
            # mistaken copy): every reader of every file meets it alike
            path.unlink()
            path.mkdir()
            what = "replaced by a directory"
        elif family == "invalid":
            what = invalid(rng, name, path)
            family = "edit" if what.startswith(EDIT) else family
        else:
            what, data = damage(rng, path.read_bytes())
            path.write_bytes(data)
        (d / "out").mkdir()
        t0 = time.perf_counter()
        rc, res, err = stages[sname](p, d / "out")
        took = time.perf_counter() - t0
    if rc == "hang":
        outcome = "hang"
    elif rc == "traceback" or "Traceback (most recent call last)" in err:
        outcome = "traceback"
    elif rc != 0:
        outcome = "error" if "error" in err.lower() else "traceback"
    elif res == ref[sname]:
        outcome = "same"
    elif "warning" in err.lower():
        outcome = "warned"
    else:
        outcome = "changed"
    silent = outcome == "changed" and (family == "invalid" or name in CHECKSUMMED)
    last = [ln for ln in err.strip().splitlines() if ln.strip()]
    return {"file": name, "family": family, "mutation": what, "stage": sname,
            "outcome": outcome, "silent": silent, "seconds": round(took, 3),
            "message": (last[-1] if last else "")[:200]}


def replayed(base: dict, rng: random.Random) -> dict:
    """A crafted message-log record, replayed for real in its own process."""
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        p = _copy(base, "log", d)
        what = _crafted_record(rng, p["log"] / "rank0.log")
        proc = subprocess.run([sys.executable, "-m", "replay", "--rank", "0", "--size", str(N),
                               "--log", str(p["log"]), "-o", str(d / "rep")] + APP, cwd=ROOT,
                              env=_env(), capture_output=True, text=True, timeout=300)
        ref = (base["rep"] / "rank0.csv").read_text().count("\n")
        got = (d / "rep" / "rank0.csv").read_text().count("\n") \
            if (d / "rep" / "rank0.csv").exists() else None
    err = proc.stderr
    if "Traceback (most recent call last)" in err:
        outcome = "traceback"
    elif proc.returncode != 0:
        outcome = "error" if "error" in err.lower() else "traceback"
    else:
        outcome = "same" if got == ref else "changed"
    last = [ln for ln in err.strip().splitlines() if ln.strip()]
    return {"file": "message log", "family": "crafted", "mutation": what, "stage": "replay",
            "outcome": outcome, "silent": False, "seconds": None,
            "message": (last[-1] if last else "")[:200]}


def campaign(base: dict, mutations: int, seed: int, replays: int = 0,
             progress=None) -> pd.DataFrame:
    """Every file replaced by a directory for each of its readers, then
    ``mutations`` in-process cases spread over every file and both
    families (seeded), plus ``replays`` crafted logs replayed for real."""
    ref = baseline(base)
    rng = random.Random(seed)
    names = list(FILES)
    rows = []
    # every file replaced by a directory, once for each stage that reads it
    for name, (_, _, readers) in FILES.items():
        for reader in readers:
            rows.append(one(base, ref, rng, name, "directory", reader))
    for k in range(mutations):
        name = names[k % len(names)]
        family = "invalid" if k // len(names) % 2 == 0 else "damage"
        if name in CHECKSUMMED:
            # its invalid records (valid checksums) only show when replayed:
            # the crafted cases below
            family = "damage"
        rows.append(one(base, ref, rng, name, family))
        if progress and (k + 1) % 100 == 0:
            progress(f"fuzz: {k + 1}/{mutations} mutations")
    for _ in range(replays):
        rows.append(replayed(base, rng))
    return pd.DataFrame(rows)


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Outcomes per file and family, with the three goals' counts."""
    t = df.pivot_table(index=["file", "family"], columns="outcome", values="stage",
                       aggfunc="count", fill_value=0)
    t["silent"] = df.groupby(["file", "family"])["silent"].sum()
    return t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mutations", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--replays", type=int, default=40,
                    help="crafted message logs replayed for real (each its own process)")
    ap.add_argument("--csv", help="write every case (mutation, stage, outcome, message)")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="fuzz-") as work:
        t0 = time.time()
        base = build_base(Path(work))
        print(f"fuzz: base pipeline built in {time.time() - t0:.0f} s", file=sys.stderr)
        df = campaign(base, a.mutations, a.seed, a.replays,
                      progress=lambda m: print(m, file=sys.stderr, flush=True))
    if a.csv:
        df.to_csv(a.csv, index=False)
    with pd.option_context("display.width", 200, "display.max_rows", 200):
        print(summary(df))
    bad = df[df["outcome"].isin(["traceback", "hang"]) | df["silent"]]
    with pd.option_context("display.width", 250, "display.max_colwidth", 120):
        if len(bad):
            print(bad[["file", "family", "mutation", "stage", "outcome", "message"]]
                  .to_string())
    counts = {k: int((df["outcome"] == k).sum()) for k in ("traceback", "hang")}
    print(f"\n{len(df)} cases: {counts['traceback']} tracebacks, {counts['hang']} hangs, "
          f"{int(df['silent'].sum())} silent wrong answers (goal 0/0/0); "
          f"{int((df['outcome'] == 'error').sum())} refused with a message")
    return 0 if not len(bad) else 1


if __name__ == "__main__":
    sys.exit(main())
