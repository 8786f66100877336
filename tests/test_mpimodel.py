"""The one table of MPI operations (mpimodel/ops.py) against mpi4py and
against real runs: every entry is traced, recorded and replayed, or
refused by replay with a message."""
import sys

import pandas as pd
import pytest
from conftest import APPS, host_lines, record, run, trace

from contracts.trace import load_trace
from mpimodel import ops


def test_every_entry_is_a_method_of_its_mpi4py_class():
    rows = [(o.method, o.level) for o in ops.TABLE if o.level != "-"]
    p = run([sys.executable, "-c",
             "import sys; from mpi4py import MPI\n"
             f"rows = {rows!r}\n"
             "bad = [r for r in rows if r[0] not in vars(getattr(MPI, r[1]))]\n"
             "print(bad); sys.exit(1 if bad else 0)"], check=False)
    assert p.returncode == 0, f"not methods of their class: {p.stdout}"
    t = ops.table()
    assert list(t.columns) == ["method", "level", "op", "kind", "shape", "completes", "starts"]
    assert set(t["kind"]) <= set(ops.KINDS)
    assert set(t.loc[t["kind"] == "coll", "shape"]) <= set(ops.SHAPES)
    assert not t.duplicated(["method", "level"]).any()


# coverage.py polls (how often depends on timing, so its traced and
# recorded runs make different calls); table_ops.py does not
PROGRAMS = {"coverage": ([APPS / "coverage.py"], False),
            "table_ops": ([APPS / "table_ops.py"], True),
            "rma_fence": ([APPS / "rma_fence.py"], False)}     # rank 0 polls with Test


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each program traced, recorded (every rank) and replayed (every rank)."""
    out = {}
    for name, (app, _) in PROGRAMS.items():
        d = tmp_path_factory.mktemp(name)
        t = trace(4, d / "t", app)
        rec = record(4, d / "log", [0, 1, 2, 3], app)
        run([sys.executable, "-m", "replay", "--ranks", "0,1,2,3", "--log", str(d / "log"),
             "-o", str(d / "rep"), "--concurrent", "2"] + [str(a) for a in app])
        out[name] = (d, t, rec, load_trace(str(d / "t")).events)
    return out


@pytest.mark.parametrize("name", PROGRAMS)
def test_traced_recorded_and_replayed_alike(runs, name):
    """Traced, recorded and replayed, every rank prints what it printed;
    without polling loops the replay also makes the trace's calls in the
    trace's order."""
    d, t, rec, ev = runs[name]
    traced, recorded = host_lines(t.stdout, "rank "), host_lines(rec.stdout, "rank ")
    for r in range(4):
        assert recorded[r] == traced[r]
        assert (d / "rep" / f"rank{r}.out").read_text().strip() == traced[r]
        replayed = list(pd.read_csv(d / "rep" / f"rank{r}.csv")["op"])
        if PROGRAMS[name][1]:
            assert replayed == list(ev.loc[ev["rank"] == r, "op"]), f"rank {r}"


def test_the_programs_call_every_entry(runs):
    """Together they call every entry that is traced, so the test above
    covers the whole table (the rest: the tool's own init and finalize,
    untraced queries, and what replay refuses, tested below)."""
    seen = set().union(*(set(ev["op"]) for _, _, _, ev in runs.values()))
    untraced = {"env", "query", *ops.REFUSED_KINDS}
    missing = sorted({o.op for o in ops.TABLE if o.kind not in untraced} - seen)
    assert not missing, f"table entries no test program calls: {missing}"


@pytest.mark.parametrize("select", [["--rank", "1"], ["--ranks", "1"]])
def test_replay_refuses_file_io(tmp_path, select):
    """Alone (--rank) or from the driver (--ranks, --reps), the error names
    the rank and the application's actual reason, once."""
    app = [APPS / "file_io.py", tmp_path / "f"]
    record(2, tmp_path / "log", [1], app)
    p = run([sys.executable, "-m", "replay"] + select + ["--log", str(tmp_path / "log"),
             "-o", str(tmp_path / "rep")] + [str(a) for a in app], check=False)
    assert p.returncode == 2
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("replay: error: rank 1: the application failed: NotImplementedError")
    assert "MPI-IO (MPI.File) cannot be replayed" in last
    assert last.count("rank 1:") == 1 and last.count("replay: error") == 1
