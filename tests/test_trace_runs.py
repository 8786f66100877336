"""Tracing real example runs: identical output, summaries, crashes and kills."""
import json
import os
import re
import signal
import struct
import subprocess
import sys
import time

import pandas as pd
import pytest
from conftest import APPS, BIN, EXAMPLES, MPIEXEC, ROOT, mpi_env, mpirun, run, trace

from contracts.raw_trace import FLAG_BELOW_PYTHON
from contracts.trace import TraceError, load_trace

SMALL = {
    "jacobi.py": ["--n", "64", "--iters", "30", "--check", "5"],
    "cg.py": ["--n", "20000", "--iters", "30"],
    "fft2d.py": ["--n", "64", "--steps", "3"],
    "master_worker.py": ["--tasks", "12", "--size", "60"],
    "uneven.py": ["--iters", "5", "--work", "5000"],
}


def per_rank_output(n, args, tmp_path, name):
    """Run under mpiexec with each rank's stdout in its own file (the merged
    stream interleaves partial lines of different ranks)."""
    pattern = str(tmp_path / (name + ".%r"))
    run([MPIEXEC, "-outfile-pattern", pattern, "-n", str(n), sys.executable]
        + [str(a) for a in args])
    return [(tmp_path / f"{name}.{r}").read_bytes() for r in range(n)]


@pytest.mark.parametrize("example", sorted(SMALL))
def test_tracing_leaves_output_bit_identical(example, tmp_path):
    args = [EXAMPLES / example] + SMALL[example]
    plain = per_rank_output(4, args, tmp_path, "plain")
    traced = per_rank_output(4, ["-m", "instrument", "trace", "-o", tmp_path / "t"] + args,
                             tmp_path, "traced")
    assert traced == plain
    assert all(b"rank" in out for out in plain)
    t = load_trace(str(tmp_path / "t"))
    assert t.meta["complete"] and t.size == 4
    assert set(t.events["rank"]) == {0, 1, 2, 3}


def test_show_summarises_jacobi(tmp_path):
    trace(4, tmp_path / "t", [EXAMPLES / "jacobi.py"] + SMALL["jacobi.py"])
    out = run([sys.executable, "-m", "instrument", "show", str(tmp_path / "t")]).stdout
    assert "ranks       : 4" in out
    assert "complete    : yes" in out
    t = load_trace(str(tmp_path / "t"))
    ev = t.events
    # 30 iterations: each rank has 2 Cartesian neighbours on a 2x2 grid
    isends = ev[(ev.op == "isend") & (ev.peer >= 0)]
    assert len(isends) == 4 * 30 * 2
    assert (isends.sbytes == 32 * 8).all()
    lines = {ln.split()[0]: ln.split() for ln in out.splitlines() if ln.strip()}
    assert lines["isend"][1] == str(4 * 30 * 4)   # PROC_NULL sends are calls too
    assert lines["allreduce"][1] == str(4 * 6)
    assert "comp share" in out
    # computation vector: wall and CPU seconds between calls, never negative
    assert (ev.comp >= 0).all() and (ev.cpu >= 0).all()
    assert ev.groupby("rank").comp.sum().min() > 0


def test_module_and_command_modes(tmp_path):
    p = trace(2, tmp_path / "m", ["-m", "mpi4py.bench", "helloworld"])
    assert p.stdout.count("Hello, World!") == 2
    t = load_trace(str(tmp_path / "m"))
    assert t.meta["argv"][:2] == ["module", "mpi4py.bench"]
    p = trace(2, tmp_path / "c", ["-c", "from mpi4py import MPI; MPI.COMM_WORLD.Barrier()"])
    assert "barrier" in set(load_trace(str(tmp_path / "c")).events.op)


def test_existing_trace_is_never_overwritten(tmp_path):
    out = tmp_path / "t"
    trace(2, out, [EXAMPLES / "uneven.py"] + SMALL["uneven.py"])
    before = (out / "events.parquet").read_bytes()
    p = trace(2, out, [EXAMPLES / "uneven.py"] + SMALL["uneven.py"], check=False)
    assert p.returncode != 0 and "already exists" in p.stderr
    assert p.stderr.count("already exists") == 1
    # refused before the application starts, not at its import of mpi4py.MPI
    p = trace(2, out, ["-c", "print('started', flush=True)\nfrom mpi4py import MPI"],
              check=False)
    assert p.returncode != 0 and "started" not in p.stdout and "already exists" in p.stderr
    assert (out / "events.parquet").read_bytes() == before
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "precious.txt").write_text("x")
    p = trace(2, tmp_path / "other", ["-c", "pass"], check=False)
    assert p.returncode != 0 and (tmp_path / "other" / "precious.txt").exists()
    p = mpirun(2, ["-m", "instrument", "trace", "--force", "-o", out, "-c", "pass"])
    assert load_trace(str(out)).meta["argv"][0] == "command"


def test_failing_rank_leaves_readable_incomplete_trace(tmp_path):
    out = tmp_path / "t"
    p = trace(3, out, [APPS / "crash.py", "raise"], check=False, timeout=120)
    assert p.returncode != 0
    assert "deliberate failure" in p.stderr
    t = load_trace(str(out))                      # salvages the unmerged run
    assert not t.meta["complete"]
    assert 1 in t.incomplete_ranks
    ranks = {r["rank"]: r for r in t.meta["ranks"]}
    assert ranks[1]["status"].startswith("failed")
    ev = t.events
    # the iterations before the failure are all there on the failing rank,
    # and on the others, killed outright by mpiexec while they waited in
    # the next one (their watcher flushed as soon as they waited)
    for r in range(3):
        assert (ev[(ev["rank"] == r) & (ev.op == "allreduce")].shape[0]) >= 6, r
    show = run([sys.executable, "-m", "instrument", "show", str(out)]).stdout
    assert "INCOMPLETE" in show


def test_a_recorded_rank_killed_while_waiting_keeps_its_records(tmp_path):
    """When one rank raises, mpiexec kills the others outright while they
    wait in their next allreduce: a recorded rank's log kept nothing of
    what its buffer held, and lay without its status file.  Its watcher
    flushes as soon as it waits; the log (without a status: it did not
    finish) keeps every call it made, and replay refuses it in one line."""
    from contracts.msglog import LogError, LogReader
    log = tmp_path / "log"
    p = mpirun(3, ["-m", "instrument", "record", "--ranks", "0,1", "-o", log,
                   APPS / "crash.py", "raise"], check=False, timeout=120)
    assert p.returncode != 0 and "deliberate failure" in p.stderr
    assert "error" not in p.stderr.replace("deliberate failure", ""), p.stderr
    assert not (log / "rank0.json").exists()
    r = LogReader(str(log / "rank0.log"), complete=False)
    ops = []
    try:
        while r.pos < r.end:
            ops.append(r.next()[0])
    except LogError:                      # a record cut by the kill ends the reading
        pass
    assert ops.count("allreduce") >= 6, ops
    rep = run([sys.executable, "-m", "replay", "--rank", "0", "--log", log, "-o",
               tmp_path / "rep", APPS / "crash.py", "raise"], check=False)
    assert rep.returncode == 2 and "its recording did not finish" in rep.stderr
    assert len(rep.stderr.strip().splitlines()) == 1, rep.stderr


def test_killed_run_leaves_readable_partial_trace(tmp_path):
    out = tmp_path / "t"
    cmd = [MPIEXEC, "-n", "2", sys.executable, "-m", "instrument", "trace", "-o", str(out),
           str(APPS / "crash.py"), "hang"]
    proc = subprocess.Popen(cmd, env=mpi_env(), cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.time() + 60
        # the app prints once it has done its communication and is computing
        while time.time() < deadline:
            line = proc.stdout.readline()
            if "computing" in line:
                break
        time.sleep(1.5)                             # past the tracer's 1 s flush
        os.killpg(proc.pid, signal.SIGKILL)         # no chance to clean up
    finally:
        proc.wait(timeout=30)
    assert not (out / "events.parquet").exists()
    t = load_trace(str(out))
    assert not t.meta["complete"] and sorted(t.incomplete_ranks) == [0, 1]
    ev = t.events
    assert (ev[ev.op == "allreduce"].groupby("rank").size() >= 20).all()


def test_damaged_trace_errors_name_the_file(tmp_path):
    with pytest.raises(TraceError, match="no such trace directory"):
        load_trace(str(tmp_path / "nothing"))
    (tmp_path / "d").mkdir()
    with pytest.raises(TraceError, match="meta.json"):
        load_trace(str(tmp_path / "d"))
    trace(2, tmp_path / "t", ["-c", "from mpi4py import MPI; MPI.COMM_WORLD.Barrier()"])
    (tmp_path / "t" / "events.parquet").write_bytes(b"garbage")
    said = "events.parquet: does not match the digest"
    with pytest.raises(TraceError, match=said):
        load_trace(str(tmp_path / "t"))
    p = run([sys.executable, "-m", "instrument", "show", str(tmp_path / "t")], check=False)
    assert p.returncode == 2 and said in p.stderr
    # garbage with a digest that matches (a merge's own failure): pyarrow's
    # refusal, with the directory named
    from contracts.merge import table_digest
    meta = json.loads((tmp_path / "t" / "meta.json").read_text())
    meta["digests"]["events.parquet"] = table_digest(str(tmp_path / "t" / "events.parquet"))
    (tmp_path / "t" / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(TraceError, match="cannot read"):
        load_trace(str(tmp_path / "t"))


def test_library_subclasses_of_mpi_classes_keep_their_isinstance(tmp_path):
    """mpi4py.futures broke under the tracer: pkl5.Comm subclasses the traced
    MPI.Comm, and isinstance(plain_comm, pkl5.Comm) answered True."""
    app = [APPS / "pkl5_poll.py"]
    plain = per_rank_output(3, app, tmp_path, "plain")
    traced = per_rank_output(3, ["-m", "instrument", "trace", "-o", tmp_path / "t"] + app,
                             tmp_path, "traced")
    assert traced == plain and b"total" in plain[2]
    ops = set(load_trace(str(tmp_path / "t")).events["op"])
    assert {"issend", "testall", "iprobe", "recv"} <= ops


def _c_library_app(tmp_path, n: int, name: str):
    """tests/apps/NAME.c compiled with mpicc into a library for NAME.py:
    (the library, the untraced run's output, the run traced with --c-calls
    into tmp_path/t)."""
    lib = tmp_path / f"lib{name}.so"
    run([str(BIN / "mpicc"), "-shared", "-fPIC", "-o", str(lib), str(APPS / f"{name}.c")])
    app = [APPS / f"{name}.py", lib]
    plain = mpirun(n, app).stdout
    return lib, plain, mpirun(n, ["-m", "instrument", "trace", "--c-calls", "-o",
                                  tmp_path / "t"] + app)


# what a call below Python must record as the same call through mpi4py does
SAME_AS_PYTHON = ["op", "peer", "tag", "sbytes", "rbytes", "wildcard", "rpeer", "rtag"]


def _halves(ev: pd.DataFrame, rank: int):
    """A rank's events of below_python_ops.py: the Python half (after init,
    up to the first barrier on the world) and the C half (flagged)."""
    r = ev[ev["rank"] == rank].reset_index(drop=True)
    first_barrier = r.index[(r["op"] == "barrier") & (r["comm"] == 0)][0]
    return r.iloc[1:first_barrier], r[(r["flags"] & FLAG_BELOW_PYTHON) != 0]


def test_calls_below_python_are_traced_like_calls_through_mpi4py(tmp_path):
    """--c-calls: a C library calling MPI itself on the raw handles (as
    Devito's generated code, FFTW-MPI or a C extension do) joins the trace,
    in call order with the mpi4py events and recorded exactly as the same
    calls made through mpi4py are (peers, tags, bytes, wildcards, per-peer
    counts, requests, communicators made in C, Cartesian topology); a call
    the shim only counts stays invisible and is warned about."""
    lib, plain, p = _c_library_app(tmp_path, 3, "below_python_ops")

    def sums(out):                    # the ranks' lines may interleave
        return sorted(re.findall(r"rank (\d) python ([\d.]+) c ([\d.]+)\n", out))
    assert sums(p.stdout) == sums(plain) and len(sums(plain)) == 3
    assert all(py == c for _, py, c in sums(plain))
    t = load_trace(str(tmp_path / "t"))
    ev = t.events
    for rank in range(3):
        py, c = _halves(ev, rank)
        assert len(c) == len(py) == 34, (rank, len(py), len(c))
        assert (py[SAME_AS_PYTHON].to_numpy() == c[SAME_AS_PYTHON].to_numpy()).all(), rank
        for col in ("scounts", "rcounts"):
            assert [None if v is None else list(v) for v in py[col]] == \
                   [None if v is None else list(v) for v in c[col]], (rank, col)
        assert [len(v) for v in py["reqs"]] == [len(v) for v in c["reqs"]]
        # persistent requests: what each start begins, and every start's id
        # completed by the Waitall after it
        assert list(py["started"]) == list(c["started"])
        assert list(c.loc[c["op"] == "start", "started"]) == ["irecv", "isend"] * 2
        # a request made in C is completed by the C call that waits for it
        made = set(c["req"][c["req"] >= 0])
        done = {q for v in c["reqs"] for q in v}
        assert made == done and len(made) == 9
        # both halves dup the world, which the C half knows by the id the
        # Python tracer gave it; the communicators made then are their own
        assert c["comm"].iloc[0] == py["comm"].iloc[0] == 0
        own = set(c["comm"]) - {-1, 0}
        assert len(own) == 2 and not own & set(py["comm"])
    comms = t.comms.set_index("comm")
    made_in_c = comms[comms["key"].str.startswith("c") & (comms["key"].str.len() == 17)]
    assert sorted(made_in_c["how"]) == ["cart_create", "comm_dup"]
    assert all(list(m) == [0, 1, 2] for m in made_in_c["members"])
    topo = t.topology
    cart_py = comms.index[(comms["how"] == "cart_create") & ~comms.index.isin(made_in_c.index)]
    a = topo[topo["comm"] == cart_py[0]].drop(columns="comm").reset_index(drop=True)
    b = topo[topo["comm"] == made_in_c.index[made_in_c["how"] == "cart_create"][0]] \
        .drop(columns="comm").reset_index(drop=True)
    assert a.astype(str).equals(b.astype(str))
    # the C events' call sites name the library that made them
    c_sites = set(_halves(ev, 0)[1]["site"])
    assert set(t.sites.set_index("site").loc[list(c_sites), "file"]) == {str(lib)}
    assert t.meta["below_python_calls"]["MPI_Isend"] == 6
    assert t.meta["invisible_calls"] == {"MPI_Alltoallw": 3}
    assert "MPI_Alltoallw x3" in p.stderr and "MPI calls made below Python were traced" \
        in p.stderr
    counts = pd.read_csv(tmp_path / "t" / "c_calls.csv").set_index("function")
    assert counts.loc["MPI_Alltoallw", "invisible"] == 3 and counts["visible"].sum() > 0
    shown = run([sys.executable, "-m", "instrument", "show", str(tmp_path / "t")]).stdout
    assert "INVISIBLE" in shown and "below Python:" in shown
    sim = run([sys.executable, "-m", "netsim", str(tmp_path / "t"), "--platform",
               str(ROOT / "config" / "platforms" / "fat-node.yaml"), "-o",
               str(tmp_path / "p.json")])
    warnings = json.loads((tmp_path / "p.json").read_text())["warnings"]
    assert "cannot see" in sim.stderr and any("cannot see" in w for w in warnings)
    assert any("made below Python were traced" in w for w in warnings)
    # MPI_Alltoallw from C: the C log cannot answer it, so recording stops
    # at once, naming the function and its caller, rather than log a run
    # whose replay would go wrong
    p = mpirun(3, ["-m", "instrument", "record", "--ranks", "0", "-o", tmp_path / "log",
                   APPS / "below_python_ops.py", lib], check=False)
    assert p.returncode != 0
    assert f"MPI_Alltoallw (called from {lib.name}) was called below Python; the C-level " \
           "recorder cannot log it" in p.stderr


def _predict_from_replays(d):
    """The last steps of the method on d/t, d/reps.csv and the replays in
    d/rp: expanded to every rank and simulated; the prediction is made."""
    run([sys.executable, "-m", "replay.expand", str(d / "t"), str(d / "reps.csv"),
         str(d / "rp"), "-o", str(d / "c.csv")])
    run([sys.executable, "-m", "netsim", str(d / "t"), "--platform",
         str(ROOT / "config" / "platforms" / "fat-node.yaml"), "--compute",
         str(d / "c.csv"), "-o", str(d / "p.json")])
    assert json.loads((d / "p.json").read_text())["predicted_time"] > 0


def test_calls_below_python_are_recorded_and_replayed_through_the_method(tmp_path):
    """The whole method on an application whose C library calls MPI itself
    (point-to-point with wildcards, probes, polls, persistent requests,
    blocking, v- and nonblocking collectives, communicators and a
    Cartesian topology made in C, group calls on the world's group): the
    representatives' calls below Python
    are logged by the PMPI shim and answered from that C log in their
    replays, which compute what the real run computed, make every call of
    the trace in its order, and feed the simulation."""
    lib = tmp_path / "libbelow_python_ops.so"
    run([str(BIN / "mpicc"), "-shared", "-fPIC", "-o", str(lib),
         str(APPS / "below_python_ops.c")])
    app = [APPS / "below_python_ops.py", lib, "replayable"]
    plain = mpirun(3, app).stdout
    mpirun(3, ["-m", "instrument", "trace", "-o", tmp_path / "t"] + app)
    run([sys.executable, "-m", "cluster", str(tmp_path / "t"), "-o", str(tmp_path / "reps.csv"),
         "--threshold", "1e-9"])                  # every rank its own representative
    mpirun(3, ["-m", "instrument", "record", "--reps", tmp_path / "reps.csv", "-o",
               tmp_path / "log"] + app)
    assert sorted(f.name for f in (tmp_path / "log").glob("*.clog")) == \
        ["rank0.clog", "rank1.clog", "rank2.clog"]
    p = run([sys.executable, "-m", "replay", "--reps", str(tmp_path / "reps.csv"), "--log",
             str(tmp_path / "log"), "-o", str(tmp_path / "rp")] + [str(a) for a in app])
    assert "calls below Python answered by the PMPI shim" in p.stderr
    ev = load_trace(str(tmp_path / "t")).events
    for r in range(3):
        mine = re.search(rf"rank {r} python \S+ c \S+ groups -?\d+ waitsome -1", plain).group(0)
        assert (tmp_path / "rp" / f"rank{r}.out").read_text().strip() == mine
        rows = pd.read_csv(tmp_path / "rp" / f"rank{r}.csv")
        assert list(rows["op"]) == list(ev.loc[ev["rank"] == r, "op"]), r
        assert (rows["comp"] >= 0).all()
    _predict_from_replays(tmp_path)


def test_a_replay_whose_calls_below_python_differ_from_the_log_stops_naming_them(tmp_path):
    """A replay whose compiled code makes a call the C log did not record
    (here one ring exchange more than when recorded) stops at that call,
    naming it and the library that made it, instead of answering wrongly."""
    lib = tmp_path / "libbelow.so"
    run([str(BIN / "mpicc"), "-shared", "-fPIC", "-o", str(lib), str(APPS / "below_python.c")])
    mpirun(2, ["-m", "instrument", "record", "--ranks", "1", "-o", tmp_path / "log",
               APPS / "below_python.py", lib, "3"])
    p = run([sys.executable, "-m", "replay", "--rank", "1", "--log", str(tmp_path / "log"),
             "-o", str(tmp_path / "rp"), "--any-command", str(APPS / "below_python.py"),
             str(lib), "4"], check=False)
    assert p.returncode != 0 and not (tmp_path / "rp" / "rank1.csv").exists()
    assert "replay: error: rank 1: C-level call 6, MPI_Sendrecv (called from libbelow.so): " \
           "the log ended here" in p.stderr, p.stderr


def test_calls_below_python_are_traced_by_default_and_not_without_the_shim(tmp_path):
    """With --no-c-calls the trace holds the mpi4py calls only, and the
    application computes the same; by default (the shim built) the calls
    below Python are in it."""
    lib = tmp_path / "libbelow.so"
    run([str(BIN / "mpicc"), "-shared", "-fPIC", "-o", str(lib), str(APPS / "below_python.c")])
    app = [APPS / "below_python.py", lib, "3"]
    p = mpirun(2, ["-m", "instrument", "trace", "--no-c-calls", "-o", tmp_path / "t"] + app)
    assert "ring sums 3, mpi4py sum 1" in p.stdout
    ev = load_trace(str(tmp_path / "t")).events
    assert not ((ev["flags"] & FLAG_BELOW_PYTHON) != 0).any()
    assert "sendrecv" not in set(ev["op"])
    p = mpirun(2, ["-m", "instrument", "trace", "-o", tmp_path / "d"] + app)
    assert "ring sums 3, mpi4py sum 1" in p.stdout
    below = load_trace(str(tmp_path / "d")).meta["below_python_calls"]
    assert below == {"MPI_Sendrecv": 6, "MPI_Allreduce": 6}


def test_mpi_initialised_from_c_without_mpi4py_is_traced(tmp_path):
    """A library that initialises and finalises MPI itself, from C (as
    PETSc does for petsc4py), in an application that never imports
    mpi4py.MPI: the shim sees the initialisation and the tracer sets itself
    up there, so the calls that follow are in the trace."""
    _, plain, p = _c_library_app(tmp_path, 2, "c_init")
    def totals(out):                  # the ranks' lines may interleave
        return sorted(re.findall(r"rank (\d) ring total (\d+)", out))
    assert totals(p.stdout) == totals(plain) == [("0", "9"), ("1", "9")]
    t = load_trace(str(tmp_path / "t"))
    assert t.meta["complete"] and t.meta["invisible_calls"] == {}
    for rank in range(2):
        ops_ = list(t.events.loc[t.events["rank"] == rank, "op"])
        assert ops_ == ["init"] + ["sendrecv", "allreduce"] * 3 + ["finalize"], ops_


def test_a_compiled_program_is_traced_and_simulated(tmp_path):
    """A plain C MPI program (no Python) under `instrument trace`: the PMPI
    shim, preloaded into it, traces every call from its MPI_Init to its
    MPI_Finalize into the same trace format (a Cartesian halo exchange,
    an Allreduce), which the simulator takes; its output is unchanged."""
    exe = tmp_path / "stencil"
    run([str(BIN / "mpicc"), "-O2", "-o", str(exe), str(APPS / "stencil.c"), "-lm"])
    plain = run([MPIEXEC, "-n", "3", str(exe), "20000", "30"])
    p = run([MPIEXEC, "-n", "3", sys.executable, "-m", "instrument", "trace", "-o",
             str(tmp_path / "t"), str(exe), "20000", "30"])
    assert re.findall(r"residual \S+", p.stdout) == re.findall(r"residual \S+", plain.stdout)
    assert "trace of 3 ranks" in p.stderr and "(complete)" in p.stderr
    t = load_trace(str(tmp_path / "t"))
    assert t.meta["native"] is True and t.meta["complete"]
    ev = t.events
    assert ((ev["flags"] & FLAG_BELOW_PYTHON) != 0).all()
    cart = int(t.comms.loc[t.comms["kind"] == "Cartcomm", "comm"].iloc[0])
    for rank in range(3):
        r = ev[ev["rank"] == rank]
        assert r["op"].iloc[0] == "init" and r["op"].iloc[-1] == "finalize"
        counts = r["op"].value_counts()
        assert (counts["isend"], counts["irecv"], counts["waitall"], counts["allreduce"]) == \
            (60, 60, 30, 3)
        sends = r[r["op"] == "isend"]
        assert set(sends["peer"]) == {(rank + 1) % 3, (rank - 1) % 3}
        assert (sends["sbytes"] == 8).all() and (sends["comm"] == cart).all()
        assert (r.loc[r["op"] == "waitall", "reqs"].map(len) == 4).all()
    topo = t.topology[t.topology["comm"] == cart].set_index("rank")
    assert list(topo.loc[1, "destinations"]) == [0, 2] and list(topo.loc[1, "dims"]) == [3]
    assert set(t.sites["file"]) == {str(exe)}
    sim = run([sys.executable, "-m", "netsim", str(tmp_path / "t"), "--platform",
               str(ROOT / "config" / "platforms" / "fat-node.yaml"), "-o",
               str(tmp_path / "p.json")])
    assert json.loads((tmp_path / "p.json").read_text())["predicted_time"] > 0
    assert "MPI calls of this compiled program were traced" in sim.stderr
    # a program the launcher cannot start: one line per rank, no traceback
    exe.chmod(0o644)
    p = run([MPIEXEC, "-n", "2", sys.executable, "-m", "instrument", "trace", "-o",
             str(tmp_path / "u"), str(exe)], check=False)
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert f"instrument trace: error: rank 0: cannot run {exe}: Permission denied" in p.stderr


def test_a_compiled_program_goes_through_the_whole_method(tmp_path):
    """A plain C MPI program through every stage: traced, clustered,
    recorded (the shim logs each recorded rank's calls into its C log) and
    replayed alone (each call answered from it, the Cartesian communicator
    and its neighbours included), expanded and simulated; the replayed rank
    prints what the real run printed and makes the trace's calls in order."""
    exe = tmp_path / "stencil"
    run([str(BIN / "mpicc"), "-O2", "-o", str(exe), str(APPS / "stencil.c"), "-lm"])
    app = [str(exe), "20000", "30"]
    plain = run([MPIEXEC, "-n", "3"] + app).stdout
    run([MPIEXEC, "-n", "3", sys.executable, "-m", "instrument", "trace", "-o",
         str(tmp_path / "t")] + app)
    run([sys.executable, "-m", "cluster", str(tmp_path / "t"), "-o", str(tmp_path / "reps.csv"),
         "--threshold", "1e-9"])                  # every rank its own representative
    run([MPIEXEC, "-n", "3", sys.executable, "-m", "instrument", "record", "--reps",
         str(tmp_path / "reps.csv"), "-o", str(tmp_path / "log")] + app)
    p = run([sys.executable, "-m", "replay", "--reps", str(tmp_path / "reps.csv"), "--log",
             str(tmp_path / "log"), "-o", str(tmp_path / "rp")] + app)
    assert "calls of the compiled program answered by the PMPI shim" in p.stderr
    assert (tmp_path / "rp" / "rank0.out").read_text() == plain
    ev = load_trace(str(tmp_path / "t")).events
    for r in range(3):
        rows = pd.read_csv(tmp_path / "rp" / f"rank{r}.csv")
        assert list(rows["op"]) == list(ev.loc[ev["rank"] == r, "op"]), r
    _predict_from_replays(tmp_path)
    # replayed with other arguments (more steps): stopped at the first call
    # the log does not hold, naming it
    q = run([sys.executable, "-m", "replay", "--rank", "1", "--log", str(tmp_path / "log"),
             "-o", str(tmp_path / "rp2"), "--any-command", str(exe), "20000", "31"], check=False)
    assert q.returncode != 0 and "Traceback" not in q.stderr
    assert "replay: error: rank 1: C-level call " in q.stderr and \
        "MPI_Irecv (called from stencil)" in q.stderr, q.stderr


def test_calls_looked_up_on_the_mpi_librarys_own_handle_are_traced(tmp_path):
    """ctypes on libmpi's handle (as numba-jitted codes call MPI) bypasses
    the shim's place in the symbol scope; the preloaded dlsym interposer
    hands out the shim's wrappers instead, so the calls are traced, and
    the application's output is unchanged."""
    plain = mpirun(2, [APPS / "ctypes_mpi.py"]).stdout
    p = mpirun(2, ["-m", "instrument", "trace", "--c-calls", "-o", tmp_path / "t",
                   APPS / "ctypes_mpi.py"])
    def values(out):                  # the two ranks' lines may interleave
        return sorted(re.findall(r"rank (\d) value (\d+\.\d)", out))
    assert values(p.stdout) == values(plain) == [("0", "42.0"), ("1", "42.0")]
    assert "cannot see" not in p.stderr
    t = load_trace(str(tmp_path / "t"))
    assert t.meta["invisible_calls"] == {}
    assert t.meta["below_python_calls"] == {"MPI_Send": 1, "MPI_Recv": 1}
    below = t.events[(t.events["flags"] & FLAG_BELOW_PYTHON) != 0]
    assert sorted(zip(below["rank"], below["op"], below["peer"])) == [(0, "send", 1),
                                                                     (1, "recv", 0)]


def test_a_counter_that_cannot_see_library_lookups_stops_before_tracing(tmp_path):
    """Told it already runs with the dlsym interposer when it does not (the
    marker leaked into the environment), the tracer refuses to count
    instead of missing the calls looked up on libmpi's handle, and writes
    nothing."""
    from pmpishim.build import PRELOADED
    env = dict(mpi_env(), **{PRELOADED: "1"})
    env.pop("LD_PRELOAD", None)
    p = mpirun(2, ["-m", "instrument", "trace", "--count-c-calls", "-o", tmp_path / "t",
                   EXAMPLES / "jacobi.py"] + SMALL["jacobi.py"], env=env, check=False)
    assert p.returncode != 0
    assert "--c-calls: " in p.stderr and "is not preloaded or did not find the C " \
        "library's dlsym: calls looked up on the MPI library's handle would go uncounted" \
        in p.stderr
    assert not (tmp_path / "t").exists()


def test_an_all_python_application_has_no_invisible_calls(tmp_path):
    p = mpirun(2, ["-m", "instrument", "trace", "--count-c-calls", "-o", tmp_path / "t",
                   EXAMPLES / "jacobi.py"] + SMALL["jacobi.py"])
    assert "cannot see" not in p.stderr
    t = load_trace(str(tmp_path / "t"))
    assert t.meta["invisible_calls"] == {} and t.meta["c_calls_counted_ranks"] == 2
    counts = pd.read_csv(tmp_path / "t" / "c_calls.csv")
    assert counts["invisible"].sum() == 0 and counts["visible"].sum() > 0


def test_force_removes_only_our_own_directories(tmp_path):
    """A user's directory that happens to hold a meta.json or record.json is
    not a trace or a log: --force refuses to clear it."""
    for cmd, marker in (("trace", "meta.json"), ("record", "record.json")):
        d = tmp_path / cmd
        d.mkdir()
        (d / marker).write_text('{"kind": "something of the user\'s"}')
        (d / "precious.txt").write_text("x")
        sel = ["--ranks", "0"] if cmd == "record" else []
        p = mpirun(2, ["-m", "instrument", cmd, "--force", "-o", d] + sel + ["-c", "pass"],
                   check=False)
        assert p.returncode == 2, p.stderr
        assert "refusing to clear it even with --force" in p.stderr
        assert (d / "precious.txt").read_text() == "x"


def test_long_runs_report_progress(tmp_path):
    """Trace and record say how far they are while the application runs,
    and each rank says when it finished (the workflow's logs show it)."""
    app = ["-c", "import time; from mpi4py import MPI; w = MPI.COMM_WORLD\n"
                 "for i in range(6):\n    w.Barrier(); time.sleep(0.25)"]
    env = {**mpi_env(), "REPREPLAY_PROGRESS_SECONDS": "0.4"}
    p = mpirun(2, ["-m", "instrument", "trace", "-o", tmp_path / "t"] + app, env=env)
    assert "instrument: trace: rank 0 of 2:" in p.stderr and "events so far" in p.stderr
    assert "trace: rank 1 finished (complete, " in p.stderr, p.stderr
    p = mpirun(2, ["-m", "instrument", "record", "--ranks", "1", "-o", tmp_path / "log"] + app,
               env=env)
    assert "instrument: record: rank 1:" in p.stderr and "records so far" in p.stderr
    assert "record: rank 1 finished (complete, " in p.stderr, p.stderr
    p = run([sys.executable, "-m", "replay", "--rank", "1", "--log", str(tmp_path / "log"),
             "-o", str(tmp_path / "rep")] + app, env=env)
    assert "replay: rank 1:" in p.stderr and "calls replayed so far" in p.stderr, p.stderr


def test_a_rank_blocked_in_mpi_ends_on_sigterm_with_its_events(tmp_path):
    """Untraced, a deadlocked run dies at its launcher's SIGTERM; traced it
    used to ignore it (the Python handler waits for the MPI call to return)
    and to leave no events (none flushed while blocked)."""
    cmd = ["timeout", "-k", "30", "-s", "TERM", "6", MPIEXEC, "-n", "2", sys.executable, "-m",
           "instrument", "trace", "-o", str(tmp_path / "t"), str(APPS / "deadlock.py")]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=mpi_env(), cwd=ROOT, timeout=120)
    assert p.returncode == 124 and time.perf_counter() - t0 < 25, (p.returncode, p.stderr)
    t = load_trace(str(tmp_path / "t"))
    # once one rank has ended, the launcher SIGKILLs the others: one that had
    # not yet written its end is said to have ended without closing (seen in
    # 2 of 12 runs), but its events were flushed while it waited
    status = [r["status"] for r in t.meta["ranks"]]
    assert "killed by signal 15" in status, status
    assert {s.split(" (")[0] for s in status} <= {"killed by signal 15",
                                                  "ended without closing its trace"}, status
    assert (t.events.groupby("rank").size() >= 102).all()       # init and 101 barriers


def test_a_killed_blocked_rank_keeps_what_it_traced(tmp_path):
    """SIGKILL cannot be caught: a rank blocked in MPI flushes its events
    within a second anyway, so they survive it."""
    out = tmp_path / "t"
    p = subprocess.Popen([MPIEXEC, "-n", "2", sys.executable, "-m", "instrument", "trace",
                          "-o", str(out), str(APPS / "deadlock.py")], env=mpi_env(), cwd=ROOT,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        sizes, deadline = [], time.time() + 60
        while time.time() < deadline:            # until rank 0's events stop growing
            ev = out / "raw" / "r000000.ev"
            sizes.append(ev.stat().st_size if ev.exists() else 0)
            if len(sizes) > 4 and sizes[-1] > 0 and len(set(sizes[-4:])) == 1:
                break
            time.sleep(0.5)
        pids = subprocess.run(["pgrep", "-f", "--", f"-o {out} "], capture_output=True,
                              text=True).stdout.split()
        assert pids, "the traced ranks are not running"
        for pid in pids:
            os.kill(int(pid), signal.SIGKILL)
    finally:
        p.kill()
        p.wait()
    t = load_trace(str(out))
    assert (t.events.groupby("rank").size() >= 102).all()
    # a killed rank is told apart from a running one
    assert all(r["status"].startswith("ended without closing") for r in t.meta["ranks"])


def test_calls_after_the_tool_finished_pass_to_mpi_untraced(tmp_path):
    """A pool's exit handler that sent after the tracer finished raised
    'tracer not started' (trace) and 'write to closed file' (record)."""
    app = [APPS / "late_atexit.py"]
    for cmd in (["trace", "-o", str(tmp_path / "t")],
                ["record", "--ranks", "0,1", "-o", str(tmp_path / "log")]):
        p = mpirun(2, ["-m", "instrument"] + cmd + app)
        assert "Traceback" not in p.stderr, p.stderr
        assert "rank 1 got bye" in p.stdout
        assert "MPI call(s) after the end of the application's run" in p.stderr, p.stderr
    # the replay answers them with nothing (they were not logged), no traceback
    p = run([sys.executable, "-m", "replay", "--rank", "1", "--log", str(tmp_path / "log"),
             "-o", str(tmp_path / "rep")] + [str(a) for a in app])
    assert "Traceback" not in p.stderr and "after the end of the application's run" in p.stderr
    assert "rank 1 main done" in p.stdout


def test_a_damaged_poll_count_in_a_raw_trace_is_named(tmp_path):
    """The folded polls' count, CPU time and interval are checked like the
    CPU clock: a damaged raw event stops the merge with the file, the rank
    and the event, and what was written stays."""
    from contracts.raw_trace import FIELDS, RECORD
    out = tmp_path / "t"
    mpirun(2, ["-m", "instrument", "trace", "--keep-raw", "-o", out, APPS / "poll_wait.py"])
    raw = out / "raw" / "r000000.ev"
    data = bytearray(raw.read_bytes())
    # rank 0's second event is the Iprobe its polling loop ended with
    struct.pack_into("<q", data, RECORD.size + 8 * FIELDS.index("polls"), -3)
    raw.write_bytes(bytes(data))
    merged = (out / "events.parquet").read_bytes()
    p = run([sys.executable, "-m", "instrument", "merge", str(out)], check=False)
    assert p.returncode == 2, p.stdout + p.stderr
    assert f"{raw}: rank 0, event 1: " in p.stderr and "polls -3" in p.stderr, p.stderr
    assert raw.exists() and (out / "events.parquet").read_bytes() == merged


def test_ranks_spin_in_waits_unless_the_node_is_oversubscribed(tmp_path):
    """The real run spins in MPI waits; a rank that sleeps in them computes
    more slowly afterwards.  The tracer lets waiting ranks yield only when
    the node has more ranks than cores, and never overrides the user."""
    from instrument.waits import YIELD, cores
    # one write per line: lines that ranks print at once stay whole
    show = ("import os, sys; from mpi4py import MPI; "
            f"sys.stdout.write('rank %d yield %s\\n' % (MPI.COMM_WORLD.rank, "
            f"os.environ.get('{YIELD}'))); sys.stdout.flush()")
    env = mpi_env()
    env.pop(YIELD, None)
    for n in (2, 3):
        p = trace(n, tmp_path / f"t{n}", ["-c", show], env=env)
        values = set(re.findall(r"rank \d+ yield (\S+)", p.stdout))
        oversubscribed = n > cores()
        assert values == ({"1"} if oversubscribed else {"None"}), (n, cores(), p.stdout)
        assert ("waiting ranks yield their core" in p.stderr) == oversubscribed
        assert load_trace(str(tmp_path / f"t{n}")).meta["waits"]["yield"] == oversubscribed
        shown = run([sys.executable, "-m", "instrument", "show", str(tmp_path / f"t{n}")]).stdout
        assert ("waits       : yielding the core" in shown) == oversubscribed
    p = trace(3, tmp_path / "mine", ["-c", show], env=dict(env, **{YIELD: "0"}))
    assert set(re.findall(r"rank \d+ yield (\S+)", p.stdout)) == {"0"}
    assert "waiting ranks yield" not in p.stderr
    assert load_trace(str(tmp_path / "mine")).meta["waits"] == {
        "yield": False, "why": f"{YIELD}=0, set by the user"}


def test_ranks_per_node_are_read_from_every_launcher():
    from instrument.waits import YIELD, choose_waits, cores
    over = str(cores() + 1)
    for name in ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"):
        env = {name: over}
        assert f"{over} ranks on this node's" in choose_waits(env) and env[YIELD] == "1"
        env = {name: str(cores())}
        assert choose_waits(env) is None and YIELD not in env
    assert choose_waits({}) is None                 # no launcher said: left alone


def test_side_records_survive_two_threads_flushing(tmp_path):
    """The watcher thread flushes a rank's side records while the rank
    waits in MPI, and the rank flushes its own by size and time; a file
    write releases the GIL, so the two interleave.  One flush removed
    records the other had not written: at 36 oversubscribed ranks of
    jacobi, 8 of 216 Waitalls lost their completed requests.  Here both
    threads flush a real Recorder's side file, whose writes are slowed so
    that they always interleave, while one of them keeps appending: every
    record must reach the file exactly once."""
    import threading

    from instrument.writer import Recorder

    class SlowFile:                  # the real file, each write a moment long
        def __init__(self, f):
            self.f = f

        def write(self, b):
            time.sleep(0.002)        # releases the GIL, as a write to disk may
            return self.f.write(b)

        def flush(self):
            self.f.flush()

    rec = Recorder.__new__(Recorder)
    rec.side, rec._side_lock = [], threading.Lock()
    path = tmp_path / "r.side"
    rec._side = SlowFile(open(path, "wb"))
    n, done = 3000, threading.Event()

    def watcher():
        while not done.is_set():
            rec._flush_side()

    t = threading.Thread(target=watcher)
    t.start()
    for i in range(n):
        rec.side.append(("x", i))
        if i % 50 == 0:
            rec._flush_side()
    done.set()
    t.join()
    rec._flush_side()
    rec._side.f.close()
    got = [r[1] for line in path.read_text().splitlines() for r in json.loads(line)]
    assert sorted(got) == list(range(n))


def test_traced_classes_say_they_are_mpi4pys(tmp_path):
    """petsc4py converts a communicator only if its class's module is
    mpi4py.MPI; the tracer's stand-ins claim it, so such code runs traced
    as untraced (tests/apps/mpi4py_module.py fails otherwise)."""
    p = mpirun(2, ["-m", "instrument", "trace", "-o", tmp_path / "t", APPS / "mpi4py_module.py"])
    assert p.stdout.count("all from mpi4py.MPI") == 2


def test_cpu_seconds_of_threads_besides_the_main_one_are_said(tmp_path, coverage_trace):
    """A rank whose helper thread burns most of its CPU seconds (a threaded
    BLAS, OpenMP): meta.json keeps each rank's CPU seconds and its other
    threads' share, and the tracer warns, as these CPU seconds overstate
    the computation wherever they stand for it.  A rank without such
    threads has no warning."""
    from contracts.merge import trace_warnings
    p = trace(2, tmp_path / "t", [APPS / "threaded.py"])
    assert "helpers done: 2" in p.stdout
    assert "threads besides the main one" in p.stderr, p.stderr
    ranks = json.loads((tmp_path / "t" / "meta.json").read_text())["ranks"]
    for r in ranks:
        assert r["other_threads_cpu"] >= 0.3 and r["cpu"] >= r["other_threads_cpu"], r
    trace_of_cov, _ = coverage_trace
    assert all("other_threads_cpu" in r for r in trace_of_cov.meta["ranks"])
    assert "threads" not in trace_warnings(trace_of_cov.meta)


def test_calls_of_two_threads_inside_mpi_at_once_make_one_sequence(tmp_path):
    """A helper thread's receive begins before the main thread's send and
    receive and returns after them (a task pool's result threads do
    this): the rank's trace keeps its calls in return order, the helper's
    starting where the call before it returned, counts the overlap and
    says so; the trace merges, shows and simulates."""
    from contracts.merge import trace_warnings
    from contracts.trace import load_trace
    p = trace(2, tmp_path / "t", [APPS / "overlapping_threads.py"])
    assert "rank 0 got 10 then 14" in p.stdout
    assert "began on one thread while another thread" in p.stderr, p.stderr
    t = load_trace(str(tmp_path / "t"))
    r0 = t.meta["ranks"][0]
    assert r0["overlapped_calls"] >= 1 and "overlapped_calls" not in t.meta["ranks"][1]
    assert "rank 0: " in trace_warnings(t.meta)["overlapped"]
    ev = t.events[t.events["rank"] == 0]
    assert (ev["t_start"].to_numpy()[1:] >= ev["t_end"].to_numpy()[:-1]).all()
    # in return order: the main thread's calls, then the helper's receive
    assert list(ev["op"]) == ["init", "send", "recv", "send", "recv", "finalize"]
    assert list(ev["tag"])[1:5] == [0, 2, 3, 1]
    run([sys.executable, "-m", "netsim", str(tmp_path / "t"), "--platform",
         str(ROOT / "config" / "platforms" / "ib-cluster.yaml"), "-o", str(tmp_path / "p.json")])
    assert json.loads((tmp_path / "p.json").read_text())["predicted_time"] > 0
    # recorded whole (one record at a time), but not replayable alone: the
    # replay names the threads as the likely cause
    d = str(tmp_path)
    run([sys.executable, "-m", "cluster", d + "/t", "-o", d + "/reps.csv"])
    mpirun(2, ["-m", "instrument", "record", "--reps", d + "/reps.csv", "-o", d + "/log",
               APPS / "overlapping_threads.py"])
    r = subprocess.run([sys.executable, "-m", "replay", "--reps", d + "/reps.csv", "--log",
                        d + "/log", "-o", d + "/rep", str(APPS / "overlapping_threads.py")],
                       capture_output=True, text=True, cwd=ROOT, env=mpi_env())
    assert r.returncode != 0 and "calls MPI from more than one thread" in r.stderr, r.stderr


def test_page_faults_are_counted_in_the_span_that_took_them(tmp_path):
    """The trace's ``faults``: a span that writes 40 MB of fresh memory
    takes about 10,000 page faults (4 KiB pages), the spans around it
    almost none, and both ranks alike."""
    app = tmp_path / "touch.py"
    app.write_text(
        "from mpi4py import MPI\n"
        "comm = MPI.COMM_WORLD\n"
        "comm.Barrier()\n"
        "b = bytearray(40 * 2 ** 20)   # zeroed: every page written once\n"
        "comm.Barrier()\n"
        "n = len(b)\n"
        "comm.Barrier()\n")
    trace(2, tmp_path / "t", [app])
    ev = load_trace(str(tmp_path / "t")).events
    for r in (0, 1):
        f = ev[ev["rank"] == r]["faults"].tolist()
        assert ev[ev["rank"] == r]["op"].tolist()[1:4] == ["barrier"] * 3
        assert 9000 <= f[2] <= 12000, f          # the span before the second barrier
        assert f[3] < 500, f
    # and instrument show sums them per rank
    out = run([sys.executable, "-m", "instrument", "show", str(tmp_path / "t")]).stdout
    rows = out[out.index("computation per rank"):].splitlines()[2:4]
    assert all(9000 <= int(row.split()[-1]) <= 20000 for row in rows), rows
