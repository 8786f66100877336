"""Message logging and single-node replay with real mpiexec record runs."""
import json
import re
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import APPS, EXAMPLES, host_lines, mpi_env, mpirun, record, run, trace


def replay(log, out, app, ranks=None, rank=None, extra=(), check=True):
    sel = ["--rank", str(rank)] if rank is not None else ["--ranks", ",".join(map(str, ranks))]
    return run([sys.executable, "-m", "replay"] + sel + ["--log", str(log), "-o", str(out)]
               + list(extra) + [str(a) for a in app], check=check)


@pytest.mark.parametrize("app,n,ranks", [
    ([EXAMPLES / "jacobi.py", "--n", "64", "--iters", "12", "--check", "4"], 4, [0, 3]),
    ([EXAMPLES / "cg.py", "--n", "3000", "--iters", "15"], 3, [1]),
    ([EXAMPLES / "fft2d.py", "--n", "64", "--steps", "3"], 4, [0, 3]),   # Alltoall transposes
    ([EXAMPLES / "master_worker.py", "--tasks", "12"], 4, [0, 2]),   # ANY_SOURCE master
    ([EXAMPLES / "parareal.py", "--points", "2000", "--fine", "50"], 3, [0, 2]),  # pipelined
    ([APPS / "pkl5_poll.py"], 3, [0, 2]),       # pkl5 requests polled, as mpi4py.futures
    ([APPS / "groups.py"], 4, [1, 2]),          # unbound MPI.Group methods, as pylops-mpi
    ([APPS / "fortran_buffers.py"], 3, [0, 1]),  # Fortran-ordered buffers, as pylops-mpi
    ([APPS / "empty_buffers.py"], 3, [0, 1]),   # receives into (0, 3) arrays, as Devito
    ([APPS / "mpi4py_module.py"], 2, [1]),      # classes of mpi4py's module, as petsc4py checks
    ([APPS / "own_pickler.py"], 2, [1]),        # objects pickled as the app says, as mpipool's dill
])
def test_replay_reproduces_the_ranks_own_output(tmp_path, app, n, ranks):
    p = record(n, tmp_path / "log", ranks, app)
    host = host_lines(p.stdout, "rank ")
    replay(tmp_path / "log", tmp_path / "rep", app, ranks=ranks)
    for r in ranks:
        mine = (tmp_path / "rep" / f"rank{r}.out").read_text().strip()
        assert mine == host[r], f"rank {r}: replay printed {mine!r}, host {host[r]!r}"
        vec = pd.read_csv(tmp_path / "rep" / f"rank{r}.csv")
        assert list(vec.columns) == ["rank", "seq", "op", "comp", "cpu", "polls", "poll_cpu",
                                     "inside", "faults", "fault_s"]
        assert vec["op"].iloc[0] == "init" and vec["op"].iloc[-1] == "finalize"
        assert (vec["comp"] >= 0).all() and vec["comp"].sum() > 0
        # every span's page faults counted, and the node's cost per fault measured
        assert (vec["faults"] >= 0).all() and 0 < vec["fault_s"].iat[0] < 1e-3


@pytest.mark.parametrize("app,n,ranks", [
    ([EXAMPLES / "jacobi.py", "--n", "64", "--iters", "6", "--check", "3"], 2, [1]),
    ([EXAMPLES / "master_worker.py", "--tasks", "8"], 3, [0, 1]),
    ([APPS / "pkl5_poll.py"], 3, [0]),
])
def test_measuring_the_overhead_at_every_call_changes_nothing(tmp_path, app, n, ranks):
    """The overhead probe repeats the application's last call with its own
    record (fake.overhead); made after every call, including the ones
    whose last record is not a repeatable call's (finalize, waits,
    polls), the ranks still print what they printed."""
    p = record(n, tmp_path / "log", ranks, app)
    host = host_lines(p.stdout, "rank ")
    run([sys.executable, "-m", "replay", "--ranks", ",".join(map(str, ranks)), "--log",
         str(tmp_path / "log"), "-o", str(tmp_path / "rep")] + [str(a) for a in app],
        env={**mpi_env(), "REPREPLAY_PROBE_SECONDS": "0"})
    for r in ranks:
        assert (tmp_path / "rep" / f"rank{r}.out").read_text().strip() == host[r]


def test_replayed_calls_line_up_with_the_trace(tmp_path):
    app = [EXAMPLES / "jacobi.py", "--n", "64", "--iters", "8"]
    trace(4, tmp_path / "t", app)
    record(4, tmp_path / "log", [2], app)
    replay(tmp_path / "log", tmp_path / "rep", app, rank=2)
    from contracts.trace import load_trace
    ev = load_trace(str(tmp_path / "t")).events
    traced = list(ev[ev["rank"] == 2]["op"])
    replayed = list(pd.read_csv(tmp_path / "rep" / "rank2.csv")["op"])
    assert replayed == traced


def test_repeated_replay_keeps_each_ranks_least_disturbed_run(tmp_path):
    app = [EXAMPLES / "jacobi.py", "--n", "64", "--iters", "6", "--check", "3"]
    p = record(2, tmp_path / "log", [1], app)
    rep = tmp_path / "rep"
    replay(tmp_path / "log", rep, app, rank=1, extra=["--repeats", "3"])
    runs = pd.read_csv(rep / "repeats_rank1.csv")
    assert list(runs["repeat"]) == [1, 2, 3] and runs["kept"].sum() == 1
    kept = runs[runs["kept"]].iloc[0]
    assert kept["comp"] == runs["comp"].min()
    # the kept replay is the one copied to REP/rank1.csv, output and all
    chosen = rep / f"repeat{kept['repeat']}" / "rank1.csv"
    assert (rep / "rank1.csv").read_bytes() == chosen.read_bytes()
    assert pd.read_csv(rep / "rank1.csv")["comp"].sum() == pytest.approx(kept["comp"])
    assert (rep / "rank1.out").read_text().strip() == host_lines(p.stdout, "rank ")[1]
    bad = replay(tmp_path / "log", tmp_path / "rep0", app, rank=1, extra=["--repeats", "0"],
                 check=False)
    assert bad.returncode == 2 and "--repeats must be >= 1" in bad.stderr


def test_load_copies_run_beside_a_lone_representative(tmp_path):
    """One representative replayed alone would have the node to itself,
    unlike its rank in the full run: --load 2 runs a copy beside it, on a
    core of its own, and keeps its times."""
    app = [EXAMPLES / "jacobi.py", "--n", "64", "--iters", "6", "--check", "3"]
    p = record(2, tmp_path / "log", [1], app)
    rep = tmp_path / "rep"
    q = replay(tmp_path / "log", rep, app, ranks=[1], extra=["--load", "2"])
    assert "rank 1 started as 2 copies" in q.stderr
    line = host_lines(p.stdout, "rank ")[1]
    assert (rep / "rank1.out").read_text().strip() == line
    assert (rep / "copies" / "copy1" / "rank1.out").read_text().strip() == line
    assert pd.read_csv(rep / "rank1.csv")["op"].iloc[-1] == "finalize"
    assert pd.read_csv(rep / "copies" / "copy1" / "rank1.csv")["op"].iloc[-1] == "finalize"
    var = pd.read_csv(rep / "variability_rank1.csv")
    assert list(var["copy"]) == [0, 1] and var["factor"].iat[0] == 1.0
    # one round: no run-to-run noise can be told from the cores' speeds
    assert (var["sigma_run"] == 0).all() and (var["rounds"] == 1).all()
    bad = replay(tmp_path / "log", tmp_path / "rep2", app, ranks=[1],
                 extra=["--load", "2", "--concurrent", "2"], check=False)
    assert bad.returncode == 2 and "give it without --concurrent" in bad.stderr


def test_a_changed_argument_stops_with_the_divergence(tmp_path):
    """Another command line is refused before the application runs; forced
    through, the first call whose peer, tag or size differs stops it."""
    rec = [EXAMPLES / "jacobi.py", "--n", "64", "--iters", "6", "--check", "3"]
    record(4, tmp_path / "log", [1], rec)
    changed = [EXAMPLES / "jacobi.py", "--n", "64", "--iters", "6", "--check", "2"]
    p = replay(tmp_path / "log", tmp_path / "rep", changed, rank=1, check=False)
    assert p.returncode == 2
    assert "recorded as `jacobi.py --n 64 --iters 6 --check 3`" in p.stderr
    assert "--any-command" in p.stderr and "Traceback" not in p.stderr
    p = replay(tmp_path / "log", tmp_path / "rep", changed, rank=1, check=False,
               extra=["--any-command"])
    assert p.returncode == 2
    err = p.stderr
    assert "rank 1: event" in err and "the log recorded irecv" in err
    assert "but the application called allreduce" in err
    assert "different arguments" in err
    assert "Traceback" not in err, err       # one message, not the application's traceback
    assert not (tmp_path / "rep" / "rank1.csv").exists()


def test_another_problem_size_stops_at_the_first_message(tmp_path):
    """The same calls with other message sizes (``--n 128`` on a log of
    ``--n 64``) used to replay to the end with five times the computation."""
    rec = [EXAMPLES / "jacobi.py", "--n", "64", "--iters", "4"]
    record(2, tmp_path / "log", [0], rec)
    bigger = [EXAMPLES / "jacobi.py", "--n", "128", "--iters", "4"]
    p = replay(tmp_path / "log", tmp_path / "rep", bigger, rank=0, check=False,
               extra=["--any-command"])
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    import re
    m = re.search(r"rank 0: event (\d+) \(the trace's seq", lines[0])
    assert m, lines[0]
    assert "bytes" in lines[0] and "other arguments or input" in lines[0]
    # the event number is the trace's own seq of that call
    trace(2, tmp_path / "t", rec)
    ev = pd.read_parquet(tmp_path / "t" / "events.parquet")
    row = ev[(ev["rank"] == 0) & (ev["seq"] == int(m.group(1)))]
    assert row["op"].iloc[0] in lines[0]


def test_damaged_logs_fail_loudly(tmp_path):
    app = [EXAMPLES / "jacobi.py", "--n", "64", "--iters", "4"]
    record(4, tmp_path / "log", [0], app)
    path = tmp_path / "log" / "rank0.log"
    good = path.read_bytes()
    bad = bytearray(good)
    bad[len(bad) // 2] ^= 0xFF
    path.write_bytes(bytes(bad))
    p = replay(tmp_path / "log", tmp_path / "rep", app, rank=0, check=False)
    assert p.returncode == 2 and "rank0.log" in p.stderr
    assert "checksum mismatch in record" in p.stderr or "undecodable record" in p.stderr
    path.write_bytes(good[:len(good) // 3])
    p = replay(tmp_path / "log", tmp_path / "rep", app, rank=0, check=False)
    assert p.returncode == 2 and "the file was cut or changed" in p.stderr
    done = tmp_path / "log" / "rank0.json"
    status = done.read_text()
    done.unlink()
    p = replay(tmp_path / "log", tmp_path / "rep", app, rank=0, check=False)
    assert p.returncode == 2 and "its recording did not finish" in p.stderr
    done.write_text(status)
    path.write_bytes(good[:8] + b"\x07\x00\x00\x00" + good[12:])
    p = replay(tmp_path / "log", tmp_path / "rep", app, rank=0, check=False)
    assert p.returncode == 2 and "version 7" in p.stderr
    p = replay(tmp_path / "log", tmp_path / "rep", app, rank=3, check=False)
    assert p.returncode == 2 and "rank 3 was not recorded (the log holds rank(s) [0])" in \
        p.stderr
    path.write_bytes(good)
    p = replay(tmp_path / "log", tmp_path / "rep", app, rank=0, extra=["--size", "5"],
               check=False)
    assert p.returncode == 2 and "recorded with 4 ranks, not --size 5" in p.stderr


def test_record_refuses_bad_ranks_and_existing_logs(tmp_path):
    app = [EXAMPLES / "jacobi.py", "--n", "64", "--iters", "2"]
    p = record(2, tmp_path / "log", [5], app, check=False)
    assert p.returncode == 2 and "--ranks [5] outside 0..1" in p.stderr
    record(2, tmp_path / "log", [0], app)
    p = record(2, tmp_path / "log", [0], app, check=False)
    assert p.returncode == 2 and p.stderr.count("already exists") == 1


def test_expand_gives_every_rank_its_representatives_target_vector(tmp_path):
    app = [EXAMPLES / "uneven.py", "--iters", "6", "--work", "60000"]
    trace(6, tmp_path / "t", app)
    run([sys.executable, "-m", "cluster", str(tmp_path / "t"), "-o", str(tmp_path / "reps.csv"),
         "--threshold", "0.25"])
    reps = pd.read_csv(tmp_path / "reps.csv")
    chosen = sorted(set(reps["representative"]))
    record(6, tmp_path / "log", chosen, app)
    replay(tmp_path / "log", tmp_path / "rep", app, ranks=chosen)
    run([sys.executable, "-m", "replay.expand", str(tmp_path / "t"), str(tmp_path / "reps.csv"),
         str(tmp_path / "rep"), "-o", str(tmp_path / "compute.csv")])
    comp = pd.read_csv(tmp_path / "compute.csv")
    assert sorted(comp["rank"].unique()) == list(range(6))
    from contracts.trace import load_trace
    traced = load_trace(str(tmp_path / "t")).events
    for r, rep in zip(reps["rank"], reps["representative"]):
        mine = comp[comp["rank"] == r]["comp"].to_numpy()
        theirs = pd.read_csv(tmp_path / "rep" / f"rank{rep}.csv")
        # the representative's replayed spans, with the page faults its
        # traced run took beyond the replay's charged at the node's cost
        faults = traced[traced["rank"] == rep]["faults"].to_numpy() - theirs["faults"].to_numpy()
        faults[0] = 0                                  # before MPI initialisation
        want = np.maximum(theirs["comp"].to_numpy() + faults * theirs["fault_s"].iat[0], 0.0)
        assert np.allclose(mine, want, rtol=1e-12, atol=1e-15)
    # and without the charge, the replayed spans as they are
    run([sys.executable, "-m", "replay.expand", str(tmp_path / "t"), str(tmp_path / "reps.csv"),
         str(tmp_path / "rep"), "-o", str(tmp_path / "bare.csv"), "--no-fault-charge"])
    bare = pd.read_csv(tmp_path / "bare.csv")
    for r, rep in zip(reps["rank"], reps["representative"]):
        theirs = pd.read_csv(tmp_path / "rep" / f"rank{rep}.csv")["comp"].to_numpy()
        assert (bare[bare["rank"] == r]["comp"].to_numpy() == theirs).all()
    p = run([sys.executable, "-m", "netsim", str(tmp_path / "t"), "--platform",
             "config/platforms/ib-cluster.yaml", "--compute", str(tmp_path / "compute.csv"),
             "-o", str(tmp_path / "pred.json")])
    assert "predicted time" in p.stdout


def test_polling_waits_are_not_computation(tmp_path):
    """futures-julia: the manager's Iprobe-and-sleep loop was charged as 9.7 s
    of computation (its CPU time: 0.5 s) on top of the worker's 10 s.  A
    waiting loop is one event in the trace, ends at its first poll on
    replay, and the simulator charges the wait."""
    app = [APPS / "poll_wait.py"]
    trace(2, tmp_path / "t", app)
    from contracts.trace import load_trace
    ev = load_trace(str(tmp_path / "t")).events
    # rank 0 polled Iprobe (sleeping 2 ms between polls) for rank 1's 0.3 s
    # of work: one event, the polls counted on it, the wait out of `comp`
    probe = ev[(ev["rank"] == 0) & (ev["op"] == "iprobe")]
    assert len(probe) == 1 and probe["polls"].iat[0] > 10, probe
    assert probe["comp"].iat[0] < probe["t_end"].iat[0] - probe["t_start"].iat[0]
    assert list(ev[ev["rank"] == 0]["op"]) == ["init", "iprobe", "recv", "send", "finalize"]
    # it slept 2 ms between polls: it noticed the message up to one
    # interval late, half of one on average, charged after its receive;
    # under an MPI whose first Iprobe after an arrival reports nothing
    # (MPICH), one whole interval more.  Rank 1's Test loop: half of one
    from netsim.schedule import _noticed
    gap = probe["poll_gap"].iat[0]
    assert gap >= 0.002
    after_recv = (ev["rank"] == 0).to_numpy() & (ev["op"] == "send").to_numpy()
    after_test = (ev["rank"] == 1).to_numpy() & (ev["op"] == "recv").to_numpy()
    test_gap = ev.loc[(ev["rank"] == 1) & (ev["op"] == "test"), "poll_gap"].iat[0]
    assert test_gap >= 0.002
    for late_polls in (0, 1):
        late = _noticed(ev, late_polls)
        assert list(late[after_recv]) == [gap * (0.5 + late_polls)]
        assert list(late[after_test]) == [test_gap / 2]
    record(2, tmp_path / "log", [0, 1], app)
    replay(tmp_path / "log", tmp_path / "rep", app, ranks=[0, 1], extra=["--concurrent", "2"])
    r0 = pd.read_csv(tmp_path / "rep" / "rank0.csv")
    # the replay answered the first poll: no wait, the rows line up with the trace
    assert list(r0["op"]) == list(ev[ev["rank"] == 0]["op"]) and r0["polls"].sum() == 0
    assert (tmp_path / "rep" / "rank0.out").read_text().strip() == "rank 0 got 41"
    # each rank its own cluster (a representatives file as python -m cluster writes it)
    pd.DataFrame({"rank": [0, 1], "group": [0, 1], "cluster": [0, 1], "representative": [0, 1],
                  "total": [0.2, 0.3], "rep_total": [0.2, 0.3], "error": [0.0, 0.0]}).to_csv(
        tmp_path / "reps.csv", index=False)
    run([sys.executable, "-m", "replay.expand", str(tmp_path / "t"), str(tmp_path / "reps.csv"),
         str(tmp_path / "rep"), "-o", str(tmp_path / "compute.csv")])
    c = pd.read_csv(tmp_path / "compute.csv")
    # rank 0's computation (start-up aside) is its own work, not the wait:
    # less than its replayed CPU time plus what a loaded machine adds
    work0 = c.loc[(c["rank"] == 0) & (c["seq"] > 0), "comp"].sum()
    total0 = r0.loc[r0["op"] != "init", "comp"].sum()
    # (give or take the page faults charged where the traced run took a
    # few dozen more or fewer than the replay: 2 us each)
    assert work0 == pytest.approx(total0, rel=0.01)
    run([sys.executable, "-m", "netsim", str(tmp_path / "t"), "--platform",
         "config/platforms/this-machine.yaml", "--compute", str(tmp_path / "compute.csv"),
         "-o", str(tmp_path / "pred.json")])
    import json
    pred = json.loads((tmp_path / "pred.json").read_text())["predicted_time"]
    # rank 0 works after rank 1's message, rank 1 waits for rank 0's reply:
    # their computations add up on the critical path, and nothing else does
    total = c.groupby("rank")["comp"].sum()
    assert 0.8 * total.sum() < pred < 1.1 * total.sum() + 0.01, (pred, total)
    # the platform's late Iprobe (this machine's MPICH: one poll) is on
    # that path: a platform without it predicts one polling interval less
    import yaml
    plat = yaml.safe_load(open("config/platforms/this-machine.yaml"))
    assert plat["network"]["probe_late_polls"] == 1
    plat["network"]["probe_late_polls"] = 0
    (tmp_path / "prompt.yaml").write_text(yaml.safe_dump(plat))
    run([sys.executable, "-m", "netsim", str(tmp_path / "t"), "--platform",
         str(tmp_path / "prompt.yaml"), "--compute", str(tmp_path / "compute.csv"),
         "-o", str(tmp_path / "prompt.json")])
    prompt = json.loads((tmp_path / "prompt.json").read_text())["predicted_time"]
    assert pred - prompt == pytest.approx(gap, rel=1e-6)


def test_threads_take_the_gil_at_every_replayed_call(tmp_path):
    """mpipool's shape: job threads call MPI while the main thread waits in
    a busy loop.  Each real call gives the GIL up and the job thread waits
    about a switch interval to get it back: that is most of the run.  A
    replay that kept the GIL through its calls measured 3 % of it."""
    app = [APPS / "spinning_consumer.py"]
    trace(2, tmp_path / "t", app)
    p = record(2, tmp_path / "log", [0], app)
    replay(tmp_path / "log", tmp_path / "rep", app, ranks=[0])
    assert (tmp_path / "rep" / "rank0.out").read_text().strip() == host_lines(p.stdout, "rank ")[0]
    from contracts.trace import load_trace
    ev = load_trace(str(tmp_path / "t")).events
    r0 = ev[ev["rank"] == 0]
    elapsed = r0["t_end"].max() - r0["t_start"].min()
    replayed = pd.read_csv(tmp_path / "rep" / "rank0.csv")["comp"].sum()
    # a neighbour on the cores stretches the traced run, never the
    # replay's waits for the GIL (the switch interval is a timer)
    assert replayed > 0.3 * elapsed, (replayed, elapsed)


def test_repeated_payloads_are_logged_once(tmp_path):
    """The OSU bandwidth demo filled the disk (72 GB): a payload identical to
    an earlier one is logged as a reference to it, and a short message into a
    large buffer ([buf, count, type]) logs the count, not the buffer."""
    app = [APPS / "same_buffer.py"]
    p = record(2, tmp_path / "log", [1], app)
    size = (tmp_path / "log" / "rank1.log").stat().st_size
    assert size < 3 << 20, f"80 MiB received (and 3 x 8 MiB buffers), {size} bytes logged"
    replay(tmp_path / "log", tmp_path / "rep", app, ranks=[1])
    assert (tmp_path / "rep" / "rank1.out").read_text().strip() == \
        host_lines(p.stdout, "rank ")[1]


def test_every_stage_leaves_the_allocator_as_the_application_has_it(tmp_path):
    """heat's KMeans.fit page-faults its fresh tensors in: 1.1 s run for
    real, 0.55-0.7 s replayed under a 64 MiB heap top pad (-15 %
    predicted); with the pad, an MCMC likelihood over 1.6 MB temporaries
    ran 6x faster traced than for real.  The C-call counter's former
    audit library (LD_AUDIT) made the linker allocate on the heap: a NumPy
    loop ran 2.4x slower traced.  Tracing (counting C calls or not),
    recording and replay keep what the application alone keeps."""
    app = [APPS / "heap_trim.py"]
    alone = host_lines(mpirun(2, app).stdout, "rank ")
    assert alone[1].startswith("rank 1 heap top returned, 160 kB blocks "), alone
    p = trace(2, tmp_path / "t", app)
    assert host_lines(p.stdout, "rank ") == alone
    p = mpirun(2, ["-m", "instrument", "trace", "--count-c-calls", "-o", tmp_path / "tc"] + app)
    assert host_lines(p.stdout, "rank ") == alone
    p = record(2, tmp_path / "log", [1], app)
    assert host_lines(p.stdout, "rank ") == alone
    replay(tmp_path / "log", tmp_path / "rep", app, ranks=[1])
    assert (tmp_path / "rep" / "rank1.out").read_text().strip() == alone[1]


def test_every_stage_keeps_the_plain_runs_loop_temporaries(tmp_path):
    """Every tool initialised MPI, and loaded its own modules, before the
    application imported NumPy; the heap then took another shape, and a
    NumPy loop's temporaries were trimmed and faulted in again at every step
    (17,958 page faults against 8 alone; examples/uneven.py ran 1.7x slower
    timed, traced and replayed than run plainly).  Now the application
    initialises MPI and each tool sets itself up there, in a thread of its
    own (launch.AtMPIImport): the timed real run, the trace, the record and
    the replay keep the loop's temporaries as the plain run does."""
    app = [APPS / "heap_steps.py"]
    alone = host_lines(mpirun(2, app).stdout, "rank ")
    # by rank: the two ranks' lines reach mpiexec's output in either order
    assert alone == {0: "rank 0 loop temporaries kept",
                     1: "rank 1 loop temporaries kept"}, alone
    p = mpirun(2, ["-m", "validate.clock", "--out", tmp_path / "clock"] + app)
    assert host_lines(p.stdout, "rank ") == alone
    spans = [json.loads((tmp_path / "clock" / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [s["rank"] for s in spans] == [0, 1] and all(s["span"] > 0 for s in spans)
    p = trace(2, tmp_path / "t", app)
    assert host_lines(p.stdout, "rank ") == alone
    p = record(2, tmp_path / "log", [0, 1], app)
    assert host_lines(p.stdout, "rank ") == alone
    replay(tmp_path / "log", tmp_path / "rep", app, ranks=[0, 1])
    assert [(tmp_path / "rep" / f"rank{r}.out").read_text().strip() for r in (0, 1)] == \
        [alone[0], alone[1]]


def test_page_faults_of_receives_into_new_memory_go_to_the_next_span(tmp_path):
    """MPI's copy into a buffer never touched faults its pages in (fft2d's
    Alltoall into a fresh 2 MiB buffer: 0.82 ms per call against 0.13 ms
    into a used one), which the network model, calibrated with used
    buffers, does not hold: fft2d was predicted 20 % fast.  The replay
    meets the same faults, times them apart and charges them to the span
    after the call; a receive into a used buffer is charged nothing."""
    spans = {}
    for how in ("fresh", "reused"):
        app = [APPS / "fresh_recv.py", how]
        record(2, tmp_path / how, [0], app)
        p = replay(tmp_path / how, tmp_path / f"rep-{how}", app, rank=0)
        vec = pd.read_csv(tmp_path / f"rep-{how}" / "rank0.csv")
        after = vec["op"].shift(1) == "sendrecv"
        spans[how] = vec.loc[after, "cpu"].to_numpy()
        charged = re.search(r"rank 0: ([0-9.]+) CPU ms of page faults", p.stderr)
        if how == "fresh":
            # 1024 pages per receive, each faulted at the replay's touch
            assert charged and float(charged.group(1)) > 0, p.stderr
            assert spans[how].sum() * 1e3 >= float(charged.group(1)) * 0.99
        else:
            assert charged is None, p.stderr
    # eight spans after a receive (the last one ends at finalize), each
    # holding its 1024 faults: CPU time, counted alike on a busy machine
    assert len(spans["fresh"]) == len(spans["reused"]) == 8
    assert np.median(spans["fresh"]) > 5 * np.median(spans["reused"]), spans


def test_mpi4py_work_in_collectives_of_objects_is_charged_to_the_spans(tmp_path):
    """An allreduce of a 1 MiB array as a Python object took 2.9 ms a call
    here where the network model predicted 0.45: the rest is mpi4py
    pickling, unpickling and summing in Python, which the log's answer
    skipped.  The replay redoes this rank's share: the leaf's copy and
    pickling before its message leaves go to the span ending at the call,
    its unpickling of the result to the span after; rank 0's unpickling,
    summing and pickling of the result, before the broadcast, to the call's
    ``inside``; the buffer form is charged nothing.  The results are the
    ones the host computed."""
    cpu, charged, inside = {}, {}, {}
    for how in ("objects", "buffer"):
        app = [APPS / "object_allreduce.py", how]
        host = host_lines(record(2, tmp_path / how, [0, 1], app).stdout, "rank ")
        p = replay(tmp_path / how, tmp_path / f"rep-{how}", app, ranks=[0, 1])
        said = re.findall(r"note: rank (\d): ([0-9.]+) CPU ms of mpi4py's pickling", p.stderr)
        charged[how] = {int(r): float(ms) for r, ms in said}
        for r in (0, 1):
            assert (tmp_path / f"rep-{how}" / f"rank{r}.out").read_text().strip() == host[r]
            vec = pd.read_csv(tmp_path / f"rep-{how}" / f"rank{r}.csv")
            calls = vec["op"] == "allreduce"
            following = calls.shift(1, fill_value=False)  # up to the barrier that follows
            assert calls.sum() == 8 and (vec.loc[following, "op"] == "barrier").all()
            # CPU time before each call and after it: counted alike on a busy machine
            cpu[how, r] = (vec.loc[calls, "cpu"].to_numpy(),
                           vec.loc[following, "cpu"].to_numpy())
            inside[how, r] = vec.loc[calls, "inside"].to_numpy()
            assert (vec.loc[~calls, "inside"] == 0).all()
    assert charged["buffer"] == {} and set(charged["objects"]) == {0, 1}
    assert not inside["buffer", 0].any() and not inside["buffer", 1].any()
    # the leaf reduces nothing; rank 0 unpickles, sums and pickles 1 MiB
    # between its receive and the broadcast (at least 0.3 ms here)
    assert not inside["objects", 1].any() and (inside["objects", 0] > 1e-4).all()
    for r in (0, 1):
        spans = sum(a.sum() for a in cpu["objects", r]) + inside["objects", r].sum()
        assert spans * 1e3 >= charged["objects"][r] * 0.99
        # per call (the first span holds the start of the program)
        per_call = {how: np.median(sum(cpu[how, r])[1:]) for how in ("objects", "buffer")}
        assert per_call["objects"] > 10 * per_call["buffer"], cpu
    # rank 1 copies and pickles its 1 MiB before its message leaves, and
    # unpickles the result after: three allocations and fills against one
    before, after = cpu["objects", 1]
    assert np.median(before[1:]) > 1.5 * np.median(after[1:]), (before, after)


def test_a_full_disk_names_the_log_and_the_record():
    """Recording the OSU demo once filled the disk: the error names the file,
    the record and the call, and says what is kept."""
    from contracts.msglog import LogError, LogWriter
    w = LogWriter("/dev/full", {"rank": 0})
    with pytest.raises(LogError, match=r"/dev/full: cannot write record 0 \(recv\): No space "
                                       r"left on device; the records before it are kept"):
        w.write("recv", 1, 5, None, [b"x" * (1 << 20)])


def test_a_record_read_again_is_the_same_and_leaves_the_log_where_it_was(tmp_path):
    """The overhead probe repeats a call with its record read again: the
    same record (after a peek too), and the next one still next."""
    from contracts.msglog import LogReader, LogWriter
    path = str(tmp_path / "rank0.log")
    w = LogWriter(path, {"rank": 0})
    w.write("recv", 1, 5, {"count": 3}, [b"abc"], nbytes=3)
    w.write("send", 1, 6, None, [], nbytes=8)
    w.close()
    r = LogReader(path)
    assert r.again() is None
    first = r.next()
    assert first[0] == "recv" and bytes(first[6][0]) == b"abc"
    assert r.peek()[0] == "send"             # a poll looks ahead
    again = r.again()
    assert again[:6] == first[:6] and bytes(again[6][0]) == b"abc"
    assert r.next()[0] == "send" and r.again()[0] == "send"
    assert r.next()[0] == "end"


@pytest.mark.parametrize("mode,rank,op", [("allreduce", 0, "allreduce"),
                                          ("window", 0, "isend"), ("window", 1, "irecv")])
def test_replay_overhead_is_not_counted_as_computation(tmp_path, mode, rank, op):
    # a loop of tiny calls (collectives; windows of nonblocking starts):
    # between two calls the application computes next to nothing, but each
    # replayed call costs ~1 us of Python around its timers; that must not
    # be charged to the application
    app = [APPS / "tight_loop.py", mode]
    record(2, tmp_path / "log", [rank], app)
    p = replay(tmp_path / "log", tmp_path / "rep", app, rank=rank)
    assert "us of replay overhead per call taken out" in p.stderr
    overhead = float(p.stderr.split("us of replay overhead")[0].split()[-1])
    idle = float(p.stdout.split()[-4])
    vec = pd.read_csv(tmp_path / "rep" / f"rank{rank}.csv")
    loop = vec[vec["op"] == op]["comp"].iloc[100:] * 1e6
    assert overhead > 0.2 and idle > 0
    # taken out of every span, never below zero.  The overhead is measured
    # by repeating the application's own call (fake.overhead): a probe of
    # empty calls ran on warm caches, took 0.75 us out, and left 1.4 us a
    # span against 0.15 us idle; repeated, 2 us out and 0.03-0.05 us left.
    # Against the idle loop and the overhead, both of this run: a busy
    # neighbour slows all three alike.
    # The spans' mean: single spans scatter around the cost taken out, and
    # what a short one cannot give the next ones owe (less_overhead).
    assert (loop >= 0).all()
    assert loop.mean() < 2 * idle + 0.25 * overhead, (loop.mean(), idle, overhead)


def test_each_span_loses_the_overhead_measured_nearest_it():
    """The replay's own cost per call is measured along the run (this
    machine's speed halves for seconds at a time): a span takes the
    measurement interpolated at its call, never going below zero."""
    from replay.run import less_overhead
    rows = [(s, "send", 1.0, 1.0, 0, 0.0) for s in range(5)] + [(5, "recv", 0.1, 0.0, 3, 2.0)]
    probes = [(1, 0.1, 0.2), (3, 0.3, 0.4)]
    out = less_overhead(rows, probes)
    assert [round(r[2], 9) for r in out] == [0.9, 0.9, 0.8, 0.7, 0.7, 0.0]
    assert [round(r[3], 9) for r in out] == [0.8, 0.8, 0.7, 0.6, 0.6, 0.0]
    assert [r[:2] + r[4:5] for r in out] == [r[:2] + r[4:5] for r in rows]
    # the CPU time between folded polls loses the cost of each poll
    assert [round(r[5], 9) for r in out] == [0.0] * 5 + [0.8]


def test_what_a_short_span_cannot_give_the_next_ones_owe():
    """Spans of a loop scatter around the replay's cost per call; cut at
    zero alone, the short ones' shortfall would stay in the sum as the
    long ones' excess.  Owed on, up to DEBT_CALLS calls' worth."""
    from replay.run import DEBT_CALLS, less_overhead
    probes = [(0, 1.0, 1.0)]
    rows = [(s, "send", c, c, 0, 0.0) for s, c in enumerate([0.5, 0.5, 3.0, 0.2, 1.4])]
    out = less_overhead(rows, probes)
    assert [round(r[2], 9) for r in out] == [0.0, 0.0, 1.0, 0.0, 0.0]
    assert sum(r[2] for r in out) == pytest.approx(sum(r[2] for r in rows) - 5 * 1.0 + 0.4)
    # a shortfall beyond DEBT_CALLS calls' worth is forgiven
    rows = [(s, "send", 0.0, 0.0, 0, 0.0) for s in range(DEBT_CALLS + 5)] + \
        [(DEBT_CALLS + 5, "send", 5000.0, 5000.0, 0, 0.0)]
    assert less_overhead(rows, probes)[-1][2] == pytest.approx(5000.0 - 1.0 - DEBT_CALLS)


def test_measuring_the_replay_overhead_leaves_the_heap_alone():
    """The replay times 100 canned calls every 20 ms, inside a replayed
    call.  Done with a growing list of rows and sorted copies of it, that
    changed the heap examples/uneven.py's next 1.6 MB temporaries came
    from, and its replayed spans after each probe took 10 ms more (9.4 KB
    at the peak then; 1 KB with the lists made once and sorted in place)."""
    code = ("import tracemalloc\nfrom replay import fake\nfake.build()\n"
            "fake.overhead()\ntracemalloc.start()\nfake.overhead()\n"
            "print(tracemalloc.get_traced_memory()[1])\n")
    peak = int(run([sys.executable, "-c", code]).stdout.split()[-1])
    assert peak < 2048, peak


def test_freeing_a_large_logged_payload_is_not_computation(tmp_path):
    """osu_alltoall at 1 MiB replayed 44-100 us of computation between calls
    that have none: the logged payload was freed after the call's exit clock."""
    from contracts.trace import load_trace
    app = [APPS / "big_alltoall.py"]
    trace(2, tmp_path / "trace", app)
    p = record(2, tmp_path / "log", [1], app)
    replay(tmp_path / "log", tmp_path / "rep", app, ranks=[1])
    assert (tmp_path / "rep" / "rank1.out").read_text().strip() == \
        host_lines(p.stdout, "rank ")[1]

    def after_alltoall(rows):
        return rows["comp"][rows["op"].shift(1) == "alltoall"]
    ev = load_trace(str(tmp_path / "trace")).events
    real = after_alltoall(ev[ev["rank"] == 1].reset_index(drop=True))
    between = after_alltoall(pd.read_csv(tmp_path / "rep" / "rank1.csv"))
    # Between two calls the application writes two bytes; the real run
    # spends 5-10 us there (cold caches after a 1 MiB exchange), the fixed
    # replay 1-2.5x that, the replay that freed late ~10x (105 us).  The
    # ratio, both measured in this test, cancels this machine's speed.
    assert len(between) == len(real) == 30
    assert between.median() < 4 * real.median(), (between.describe(), real.describe())


def test_a_replay_is_not_overwritten_without_force(tmp_path):
    app = [EXAMPLES / "jacobi.py", "--n", "64", "--iters", "4"]
    record(2, tmp_path / "log", [1], app)
    rep = tmp_path / "rep"
    replay(tmp_path / "log", rep, app, ranks=[1])
    before = (rep / "rank1.csv").read_bytes()
    (rep / ".load").mkdir()                       # the user's, not a load copy's
    (rep / ".load" / "mine.txt").write_text("x")
    p = replay(tmp_path / "log", rep, app, rank=1, check=False)
    assert p.returncode == 2 and "--force" in p.stderr
    assert (rep / "rank1.csv").read_bytes() == before
    replay(tmp_path / "log", rep, app, ranks=[1], extra=["--force", "--load", "2"])
    assert (rep / ".load" / "mine.txt").read_text() == "x"


def test_a_busy_replay_node_is_said_and_bounds_the_prediction(tmp_path):
    """On a loaded node a replayed span took 0.132 s wall against 0.037 s
    CPU and every prediction had ``warnings: []``.  Here the node is made
    busy on purpose (a spinning process pinned to the replay's core), so
    the check holds however loaded the machine already is."""
    import json
    import os
    import subprocess
    app = [EXAMPLES / "uneven.py", "--iters", "10", "--work", "200000"]
    trace(2, tmp_path / "t", app)
    record(2, tmp_path / "log", [0, 1], app)
    core = {sorted(os.sched_getaffinity(0))[0]}
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                              preexec_fn=lambda: os.sched_setaffinity(0, core))
    try:
        p = subprocess.run([sys.executable, "-m", "replay", "--ranks", "0,1", "--log",
                            str(tmp_path / "log"), "-o", str(tmp_path / "rep")]
                           + [str(a) for a in app], capture_output=True, text=True,
                           env=mpi_env(), timeout=300,
                           preexec_fn=lambda: os.sched_setaffinity(0, core))
    finally:
        burner.kill()
        burner.wait()
    assert p.returncode == 0, p.stderr
    assert "the node was busy during its replay" in p.stderr, p.stderr
    reps = tmp_path / "reps.csv"
    reps.write_text("rank,group,cluster,representative,total,rep_total,error\n"
                    "0,0,0,0,1,1,0\n1,0,1,1,1,1,0\n")
    q = run([sys.executable, "-m", "replay.expand", str(tmp_path / "t"), str(reps),
             str(tmp_path / "rep"), "-o", str(tmp_path / "c.csv")])
    assert "the node was busy" in q.stderr and "stands for 1 rank(s)" in q.stderr
    c = pd.read_csv(tmp_path / "c.csv")
    assert (c["low"] <= c["comp"]).all() and (c["comp"] <= c["high"]).all()
    assert c["low"].sum() < 0.8 * c["comp"].sum()     # the busy spans at their CPU time
    run([sys.executable, "-m", "netsim", str(tmp_path / "t"), "--platform",
         "config/platforms/ib-cluster.yaml", "--compute", str(tmp_path / "c.csv"),
         "-o", str(tmp_path / "p.json")])
    pred = json.loads((tmp_path / "p.json").read_text())
    low, high = pred["band"]
    assert low < 0.8 * pred["predicted_time"] <= high
    assert any("busy node" in w for w in pred["warnings"]), pred["warnings"]


def test_a_replay_blocked_below_python_is_stopped_saying_where(tmp_path):
    # rank 1 receives through ctypes on libmpi's own handle, recorded
    # without the PMPI shim (--no-c-calls, as where no mpicc is found): its
    # replay blocks in the real MPI_Recv (no rank 0 in its one-process
    # world); the watchdog stops it, naming the rank, the last event and
    # the application's line, through the driver too
    app = [APPS / "ctypes_mpi.py"]
    p = record(2, tmp_path / "log", [1], app, options=["--no-c-calls"])
    assert "rank 1 value 42.0" in p.stdout
    for sel in ({"rank": 1}, {"ranks": [1]}):
        p = replay(tmp_path / "log", tmp_path / f"rep{len(sel)}{sorted(sel)[0]}", app,
                   extra=["--watchdog", "2"], check=False, **sel)
        assert p.returncode in (2, 3)
        assert "rank 1: no MPI call replayed for 2 s after event 1" in p.stderr
        assert "ctypes_mpi.py:" in p.stderr and "in <module>" in p.stderr
        assert "Traceback" not in p.stderr
    # on a virtual core of half a CPU (what an emulated cluster's core
    # script tells its processes) the limit is in the core's time: 2 s of
    # wall time for --watchdog 1, as a computation there takes twice as long
    from emulate.cores import PERIOD_ENV, SHARE_ENV
    p = run([sys.executable, "-m", "replay", "--rank", "1", "--log", str(tmp_path / "log"),
             "-o", str(tmp_path / "half"), "--watchdog", "1"] + [str(a) for a in app],
            check=False, env=dict(mpi_env(), **{SHARE_ENV: "0.5", PERIOD_ENV: "0.01"}))
    assert p.returncode in (2, 3)
    assert "rank 1: no MPI call replayed for 2 s after event 1" in p.stderr, p.stderr


def test_an_application_that_changes_directory_keeps_relative_outputs(tmp_path):
    """Trace, record and replay given paths relative to where they were
    started, of an application that changes its working directory (as
    pySDC's studies do): every output lands there, no traceback."""
    app = [APPS / "changes_directory.py"]
    trace(2, "t", app, cwd=tmp_path)
    record(2, "log", [1], app, cwd=tmp_path)
    run([sys.executable, "-m", "replay", "--ranks", "1", "--log", "log", "-o", "rep"]
        + [str(a) for a in app], cwd=tmp_path)
    from contracts.trace import load_trace
    assert load_trace(str(tmp_path / "t")).size == 2
    assert (tmp_path / "rep" / "rank1.out").read_text().strip() == "rank 1 total 3"
