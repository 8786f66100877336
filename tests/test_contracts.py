"""The files between stages (docs/FILES.md): each damaged file stops its
consumer with one message naming the file (and rank, event), exit 2, no
traceback, and nothing already written is lost."""
import json
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import EXAMPLES, mpirun, run, trace

APP = [EXAMPLES / "jacobi.py", "--n", "64", "--iters", "4"]


@pytest.fixture(scope="module")
def stages(tmp_path_factory):
    """A real pipeline at 2 ranks: trace, cluster, record, replay, expand, simulate."""
    d = tmp_path_factory.mktemp("files")
    trace(2, d / "t", APP)
    run([sys.executable, "-m", "cluster", str(d / "t"), "-o", str(d / "reps.csv")])
    mpirun(2, ["-m", "instrument", "record", "--reps", d / "reps.csv", "-o", d / "log"] + APP)
    run([sys.executable, "-m", "replay", "--reps", str(d / "reps.csv"), "--log", str(d / "log"),
         "-o", str(d / "rep")] + [str(a) for a in APP])
    run([sys.executable, "-m", "replay.expand", str(d / "t"), str(d / "reps.csv"), str(d / "rep"),
         "-o", str(d / "compute.csv")])
    run([sys.executable, "-m", "netsim", str(d / "t"), "--platform",
         "config/platforms/ib-cluster.yaml", "--compute", str(d / "compute.csv"),
         "-o", str(d / "pred.json")])
    return d


def fails_clearly(cmd, *needles):
    p = run([sys.executable, "-m"] + [str(c) for c in cmd], check=False)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr, p.stderr
    for n in needles:
        assert n in p.stderr, p.stderr
    return p


@pytest.mark.parametrize("damage,needle", [
    (lambda r: r.drop(columns="representative"), "missing column(s) representative"),
    (lambda r: r.iloc[:-1], "ranks must be 0..1"),
    (lambda r: r.assign(total=np.nan), "total must be a finite number >= 0"),
    (lambda r: r.assign(representative=r["rank"], cluster=0), "more than one representative"),
    # an empty file made record (a full-scale run) and replay exit 0 having done nothing
    (lambda r: r.iloc[:0], "no rows"),
])
def test_a_damaged_representatives_file(stages, tmp_path, damage, needle):
    bad = tmp_path / "reps.csv"
    damage(pd.read_csv(stages / "reps.csv")).to_csv(bad, index=False)
    out = tmp_path / "compute.csv"
    fails_clearly(["replay.expand", stages / "t", bad, stages / "rep", "-o", out], str(bad),
                  needle)
    assert not out.exists()
    fails_clearly(["replay", "--reps", bad, "--log", stages / "log", "-o", tmp_path / "rep"]
                  + APP, str(bad), needle)
    rec = mpirun(2, ["-m", "instrument", "record", "--reps", bad, "-o", tmp_path / "log"] + APP,
                 check=False)
    assert rec.returncode == 2 and "Traceback" not in rec.stderr, rec.stderr
    assert str(bad) in rec.stderr and needle in rec.stderr
    assert not (tmp_path / "log").exists()


def test_a_cut_replay_is_refused_not_taken_for_non_determinism(stages, tmp_path):
    """A truncated replay CSV read as a non-deterministic run: expand warned,
    scaled the traced vector and exited 0."""
    rep = tmp_path / "rep"
    rep.mkdir()
    for f in (stages / "rep").glob("rank*.csv"):
        lines = f.read_text().splitlines()
        (rep / f.name).write_text("\n".join(lines[:len(lines) // 2]) + "\n")
    fails_clearly(["replay.expand", stages / "t", stages / "reps.csv", rep,
                   "-o", tmp_path / "c.csv"], "not finalize: the file was cut")
    assert not (tmp_path / "c.csv").exists()


def test_a_replay_that_parts_from_its_trace_is_named_where(stages, tmp_path):
    """A replay whose calls differ from the trace's (a non-deterministic
    application: a task pool's master probing in another order) is expanded
    from the traced vector, and the warning says at which event the two part
    and what each holds there, so that the user can look."""
    rep = tmp_path / "rep"
    rep.mkdir()
    for f in (stages / "rep").glob("rank*.csv"):
        df = pd.read_csv(f)
        df.loc[3, "op"] = "iprobe"
        df.to_csv(rep / f.name, index=False)
    seq = int(pd.read_csv(stages / "rep" / "rank0.csv")["seq"].iat[3])
    p = run([sys.executable, "-m", "replay.expand", str(stages / "t"),
             str(stages / "reps.csv"), str(rep), "-o", str(tmp_path / "c.csv")], check=False)
    assert p.returncode == 0, p.stderr
    said = p.stdout + p.stderr
    assert f"part from the trace's at event seq {seq}: iprobe where the trace has" in said, said
    assert "1 of " in said and "non-deterministic" in said, said
    assert len(pd.read_csv(tmp_path / "c.csv")) > 0


def test_a_damaged_replay(stages, tmp_path):
    rep = tmp_path / "rep"
    rep.mkdir()
    for f in (stages / "rep").glob("rank*.csv"):
        df = pd.read_csv(f)
        df.loc[len(df) // 2, "comp"] = -1.0
        df.to_csv(rep / f.name, index=False)
    fails_clearly(["replay.expand", stages / "t", stages / "reps.csv", rep,
                   "-o", tmp_path / "c.csv"], "comp must be a finite number >= 0", ", seq ")
    # 1e300 s went into the computation table and the prediction as it was
    for f in (stages / "rep").glob("rank*.csv"):
        df = pd.read_csv(f)
        df.loc[len(df) // 2, "comp"] = 1e300
        df.to_csv(rep / f.name, index=False)
    fails_clearly(["replay.expand", stages / "t", stages / "reps.csv", rep,
                   "-o", tmp_path / "c.csv"], "(and at most 1e+07 s), not 1e+300")
    assert not (tmp_path / "c.csv").exists()


@pytest.mark.parametrize("damage,needle", [
    (lambda c: pd.concat([c, c.iloc[:1]]), "appears twice"),
    (lambda c: c.assign(comp=c["comp"].where(c.index != 3, np.nan)), "comp must be a finite"),
    (lambda c: c.iloc[1:], "no computation time for 1 trace events"),
    (lambda c: c.assign(low=2 * c["comp"] + 1), "rank 0, seq 0: low"),
    (lambda c: c.drop(columns="high"), "columns low and high come together"),
])
def test_a_damaged_computation_table(stages, tmp_path, damage, needle):
    bad = tmp_path / "compute.csv"
    damage(pd.read_csv(stages / "compute.csv")).to_csv(bad, index=False)
    pred = tmp_path / "pred.json"
    pred.write_text("kept")
    fails_clearly(["netsim", stages / "t", "--platform", "config/platforms/ib-cluster.yaml",
                   "--compute", bad, "-o", pred], str(bad), needle)
    assert pred.read_text() == "kept"


@pytest.mark.parametrize("text,needle", [
    ("nodes: 2\ncores_per_node: 2\nnetwork:\n  levels: [{latency: 1e-6, byte_time: 1e-9}]\n"
     "  eager_limit: .inf\n", "eager_limit' must be a whole number"),
    ("nodes: 2\ncores_per_node: 2\nnetwork:\n  levels: [{latency: .nan, byte_time: 1e-9}]\n",
     "network.levels[0].latency must be a finite number"),
    ("nodes: 2\ncores_per_node: 2\nnetwork:\n  levels: [{latency: 1e-6, byte_time: 1e-9}]\n"
     "  overhead: 5\n", "'overhead' must be a mapping"),
    ("nodes: 2\ncores_per_node: 2\nnetwork: {levels: [{latency: 1e-6, byte_time: 1e-9}]}\n"
     "compute_scale: 0\n", "'compute_scale' must be > 0"),
    ("nodes: 2\ncores_per_node: 2\nnetwrk: {}\n", "unknown key(s) ['netwrk']"),
])
def test_a_bad_platform_file(stages, tmp_path, text, needle):
    plat = tmp_path / "p.yaml"
    plat.write_text(text)
    fails_clearly(["netsim", stages / "t", "--platform", plat, "-o", tmp_path / "p.json"],
                  str(plat), needle)


def test_a_platform_file_that_is_not_text(stages, tmp_path):
    plat = tmp_path / "p.yaml"
    plat.write_bytes(b"nodes: \xff\xfe\n")
    fails_clearly(["netsim", stages / "t", "--platform", plat, "-o", tmp_path / "p.json"],
                  str(plat), "not a text file")


def test_a_damaged_prediction(stages, tmp_path):
    pred = json.loads((stages / "pred.json").read_text())
    pred["ranks"] = pred["ranks"][1:]
    bad = tmp_path / "pred.json"
    bad.write_text(json.dumps(pred))
    out = tmp_path / "report.html"
    p = run([sys.executable, "-m", "report", "--predictions", str(bad), "--reps",
             str(stages / "reps.csv"), "--summary", str(stages / "reps_summary.csv"),
             "--dendrogram", str(stages / "reps.csv"), "-o", str(out)], check=False)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert str(bad) in p.stderr and "ranks[0] must be rank 0" in p.stderr
    assert not out.exists()
    # validate stops before running anything
    fails_clearly(["validate", "--prediction", bad, "-o", tmp_path / "v.json", "--", "-c",
                   "pass"], str(bad), "ranks[0] must be rank 0")
    assert not (tmp_path / "v.json").exists()


def _damaged_trace(stages, tmp_path, events=None, meta=None):
    """A copy of the pipeline's trace with its events or meta.json edited,
    its digests kept valid: what a tracer's bug would write, for the
    checks behind the digests."""
    import shutil

    from contracts.merge import table_digest
    t = tmp_path / "t"
    shutil.copytree(stages / "t", t)
    m = json.loads((t / "meta.json").read_text())
    if events is not None:
        events(pd.read_parquet(t / "events.parquet")).to_parquet(t / "events.parquet")
        m["digests"]["events.parquet"] = table_digest(str(t / "events.parquet"))
    if meta is not None:
        meta(m)
    (t / "meta.json").write_text(json.dumps(m))
    return t


def _dup(ev):
    return pd.concat([ev.iloc[:5], ev.iloc[4:]], ignore_index=True)


def _at(col, value, row=3):
    def f(ev):
        ev[col] = ev[col].astype(type(value)) if not isinstance(value, str) else ev[col]
        ev.loc[row, col] = value
        return ev
    return f


@pytest.mark.parametrize("events,meta,needle", [
    (lambda ev: ev.iloc[:0], None, "no events of rank(s) [0, 1]"),
    (_dup, None, "rank 0"),
    (_at("op", "bogus"), None, "rank 0, event 3: unknown op 'bogus'"),
    (_at("peer", 99), None, "rank 0, event 3: peer 99 is not a world rank of 0..1"),
    (_at("cpu", float("inf")), None, "rank 0, event 3: cpu inf is not a finite non-negative"),
    (_at("cpu", -1.0), None, "cpu -1.0 is not a finite non-negative time"),
    (None, lambda m: m.update(size=3), "ranks does not list ranks 0..2"),
    (None, lambda m: m.update(size=1), "ranks does not list ranks 0..0"),
    (None, lambda m: m.update(kind="log"), "not a trace's metadata"),
    (lambda ev: ev[ev["seq"] != ev.groupby("rank")["seq"].transform("max")], None,
     "events, but meta.json counted"),
    # floats or strings where ranks and seconds are: TypeErrors in the checks
    (lambda ev: ev.assign(rank=ev["rank"].astype(float)), None,
     "column rank must hold integers, not float64"),
    (lambda ev: ev.assign(peer=ev["peer"].astype(str)), None, "column peer must hold integers"),
    (lambda ev: ev.assign(cpu=ev["cpu"].astype(str)), None, "column cpu must hold seconds"),
    # 2**62 bytes: an int64 sum wrapped around and show printed "0 B"
    (_at("sbytes", 2 ** 62), None, "rank 0, event 3: sbytes 4611686018427387904 is more than"),
])
def test_a_damaged_trace_is_refused_by_every_stage_before_anything_is_written(
        stages, tmp_path, events, meta, needle):
    """Duplicated or lost events, unknown ops, impossible peers, NaN or
    infinite times, a meta.json that disagrees: all used to pass (netsim
    predicted 0 s for an empty trace) or end in tracebacks."""
    t = _damaged_trace(stages, tmp_path, events, meta)
    reps = tmp_path / "reps.csv"
    reps.write_text("kept")
    fails_clearly(["cluster", t, "-o", reps], needle)
    assert reps.read_text() == "kept"           # cluster no longer overwrites, then fails
    fails_clearly(["netsim", t, "--platform", "config/platforms/ib-cluster.yaml",
                   "-o", tmp_path / "p.json"], needle)
    fails_clearly(["instrument", "show", t], needle)
    assert not (tmp_path / "p.json").exists()


def test_a_trace_missing_a_file_key_or_column_is_refused_in_one_line(stages, tmp_path):
    """A merged trace without topology.parquet, or whose meta.json lacks
    ranks, hosts or incomplete_ranks, was accepted although docs/TRACE.md
    says every key is checked; a cluster run on a trace lacking a column
    printed pyarrow's 29-line schema."""
    t = _damaged_trace(stages, tmp_path)
    (t / "topology.parquet").unlink()
    fails_clearly(["instrument", "show", t], "topology.parquet: missing")
    for key in ("ranks", "hosts", "incomplete_ranks"):
        t = _damaged_trace(stages, tmp_path / key, meta=lambda m, k=key: m.pop(k))
        fails_clearly(["netsim", t, "--platform", "config/platforms/ib-cluster.yaml",
                       "-o", tmp_path / "p.json"], f"missing key(s) {key}")
    t = _damaged_trace(stages, tmp_path / "col", events=lambda ev: ev.drop(columns="cpu"))
    p = fails_clearly(["cluster", t, "-o", tmp_path / "r.csv"], "column(s) cpu")
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    p = fails_clearly(["instrument", "show", t], "lack column(s) cpu")
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_a_log_without_its_record_is_not_replayed(stages, tmp_path):
    """A message log directory without record.json replayed anyway."""
    import shutil
    log = tmp_path / "log"
    shutil.copytree(stages / "log", log)
    (log / "record.json").unlink()
    rep = pd.read_csv(stages / "reps.csv")["representative"].iloc[0]
    fails_clearly(["replay", "--rank", rep, "--log", log, "-o", tmp_path / "rep"] + APP,
                  "record.json: missing")
    assert not (tmp_path / "rep").exists()


def test_a_changed_record_is_refused_by_its_digest(stages, tmp_path):
    """record.json's size or rank list, changed (still valid JSON, still
    in range), would mislead every replay from the log: its digest no
    longer matches, and replay says so before the application runs."""
    import json
    import shutil
    log = tmp_path / "log"
    shutil.copytree(stages / "log", log)
    rec = json.loads((log / "record.json").read_text())
    rec["size"] += 1
    (log / "record.json").write_text(json.dumps(rec))
    rep = pd.read_csv(stages / "reps.csv")["representative"].iloc[0]
    fails_clearly(["replay", "--rank", rep, "--log", log, "-o", tmp_path / "rep"] + APP,
                  "record.json: its digest does not match")
    assert not (tmp_path / "rep").exists()


def test_a_flipped_byte_in_the_events_is_refused_or_harmless(stages, tmp_path):
    """One flipped byte in events.parquet turned rank 0's init into an
    isend, and every stage accepted it (-7 % prediction).  The merge
    writes page checksums and a digest of each file, and every reader
    verifies both: a flip anywhere in the file is refused, the footer's
    bytes included (a flip outside the checksummed pages once came
    through, one run of this test in several)."""
    import shutil

    from contracts.trace import TraceError, load_trace
    good = load_trace(str(stages / "t")).events
    size = (stages / "t" / "events.parquet").stat().st_size
    refused = 0
    raw = (stages / "t" / "events.parquet").read_bytes()
    footer = int.from_bytes(raw[-8:-4], "little")
    spots = list(np.linspace(4, size - 9, 40).astype(int))
    spots += list(range(size - 8 - footer, size, max(1, footer // 40)))
    spots = sorted(set(spots))  # the two ranges can share a byte
    for at in spots:
        t = tmp_path / f"t{at}"
        shutil.copytree(stages / "t", t)
        data = bytearray((t / "events.parquet").read_bytes())
        data[at] ^= 0x10
        (t / "events.parquet").write_bytes(bytes(data))
        try:
            ev = load_trace(str(t)).events
        except TraceError:
            refused += 1
            continue
        pd.testing.assert_frame_equal(ev, good)
    assert refused == len(spots)


def test_a_nan_compute_scale_is_refused(stages, tmp_path):
    """NaN passed a `< 0` test: the computation vanished from the prediction."""
    plat = tmp_path / "p.yaml"
    plat.write_text("nodes: 2\ncores_per_node: 2\nnetwork: {levels: [{latency: 1e-6, "
                    "byte_time: 1e-9}]}\ncompute_scale: .nan\n")
    fails_clearly(["netsim", stages / "t", "--platform", plat, "-o", tmp_path / "p.json"],
                  str(plat), "compute_scale")


def test_show_writes_nothing_into_its_input(tmp_path):
    """show merged an unmerged trace into its input directory."""
    out = tmp_path / "t"
    mpirun(2, ["-m", "instrument", "trace", "--keep-raw", "-o", out] + APP)
    import shutil
    raw = tmp_path / "raw"
    shutil.copytree(out, raw)
    for f in raw.glob("*.parquet"):
        f.unlink()
    m = json.loads((raw / "meta.json").read_text())
    # as the tracer leaves it before the merge
    m = {k: v for k, v in m.items()
         if k not in ("ranks", "incomplete_ranks", "hosts", "events", "unmodelled")}
    (raw / "meta.json").write_text(json.dumps({**m, "merged": False}))
    before = sorted(p.relative_to(raw) for p in raw.rglob("*"))
    p = run([sys.executable, "-m", "instrument", "show", str(raw)])
    assert "never merged" in p.stderr and "ranks" in p.stdout
    assert sorted(p.relative_to(raw) for p in raw.rglob("*")) == before


def test_a_deadlock_names_each_rank_by_its_own_event_number(stages, tmp_path):
    """The report named the row of events.parquet, not the rank's seq."""
    def retag(ev):
        # rank 1's first isend to rank 0 gets a tag nobody receives
        i = ev.index[(ev["rank"] == 1) & (ev["op"] == "isend") & (ev["peer"] == 0)][0]
        ev.loc[i, "tag"] = 99
        return ev
    t = _damaged_trace(stages, tmp_path, events=retag)
    p = fails_clearly(["netsim", t, "--platform", "config/platforms/ib-cluster.yaml",
                       "-o", tmp_path / "p.json"], "cannot finish")
    import re
    ev = pd.read_parquet(t / "events.parquet")
    named = re.findall(r"rank (\d+): event (\d+): (\w+)", p.stderr)
    assert named, p.stderr
    for r, seq, what in named:
        op = ev[(ev["rank"] == int(r)) & (ev["seq"] == int(seq))]["op"]
        assert len(op) == 1, (r, seq)
        if what == "receive":
            assert "recv" in op.iat[0], (r, seq, op.iat[0])
