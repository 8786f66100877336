"""One-sided communication (MPI.Win) through the whole method: traced with
targets and bytes, recorded, replayed with the same output, simulated."""
import json
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import APPS, EXAMPLES, ROOT, host_lines, record, run, trace

PLATFORM = ROOT / "config" / "platforms" / "ib-cluster.yaml"


def replay(log, out, app, ranks):
    return run([sys.executable, "-m", "replay", "--ranks", ",".join(map(str, ranks)),
                "--log", str(log), "-o", str(out)] + [str(a) for a in app])


@pytest.mark.parametrize("app,n,ranks", [
    ([APPS / "rma_fence.py"], 3, [0, 1, 2]),        # every window call
    ([APPS / "rma_counter.py"], 3, [0, 1, 2]),      # a counter and a spin lock
    ([APPS / "rma_stream.py", "--mode", "get", "--mib", "1"], 2, [1]),
    ([EXAMPLES / "rma_halo.py", "--n", "6000", "--iters", "5", "--halo", "4"], 3, [0, 1]),
])
def test_one_sided_programs_replay_with_the_same_output(tmp_path, app, n, ranks):
    """Replay answers Get and the atomics from the log and restores what
    other ranks wrote into the window at each synchronisation."""
    p = record(n, tmp_path / "log", ranks, app)
    host = host_lines(p.stdout, "rank ")
    replay(tmp_path / "log", tmp_path / "rep", app, ranks)
    for r in ranks:
        mine = (tmp_path / "rep" / f"rank{r}.out").read_text().strip()
        assert mine == host[r], f"rank {r}: replay printed {mine!r}, host {host[r]!r}"


def test_one_sided_calls_are_traced_replayed_in_step_and_simulated(tmp_path):
    app = [APPS / "rma_fence.py"]
    trace(3, tmp_path / "t", app)
    record(3, tmp_path / "log", [1], app)
    replay(tmp_path / "log", tmp_path / "rep", app, [1])
    from contracts.trace import load_trace
    ev = load_trace(str(tmp_path / "t")).events
    mine = ev[ev["rank"] == 1]
    assert list(mine["op"]) == list(pd.read_csv(tmp_path / "rep" / "rank1.csv")["op"])
    put = mine[mine["op"] == "win_put"].iloc[0]
    assert (put["peer"], put["sbytes"]) == (2, 8)           # the right neighbour, 8 bytes
    get = mine[mine["op"] == "win_get"].iloc[0]
    assert (get["peer"], get["rbytes"]) == (0, 8)
    cas = mine[mine["op"] == "win_compare_and_swap"].iloc[0]
    assert (cas["peer"], cas["sbytes"], cas["rbytes"]) == (2, 8, 8)
    out = tmp_path / "p.json"
    run([sys.executable, "-m", "netsim", str(tmp_path / "t"), "--platform", str(PLATFORM),
         "-o", str(out)])
    pred = json.loads(out.read_text())
    assert pred["warnings"] == [] and pred["predicted_time"] > 0


def test_exclusive_lock_epochs_take_turns_in_the_traced_order(tmp_path):
    """A window locked exclusively is held by one rank at a time: simulated,
    no two exclusive epochs at one target overlap, and they come in the
    order the traced run took the lock.  A shared lock is traced as such
    and waits for no one."""
    from contracts.raw_trace import FLAG_LOCK_SHARED
    from contracts.trace import load_trace
    from netsim.platform import load_platform
    from netsim.predict import run as simulate
    from netsim.schedule import from_trace
    trace(3, tmp_path / "t", [APPS / "rma_counter.py"])
    t = load_trace(str(tmp_path / "t"))
    ev = t.events
    locks = ev[ev["op"] == "win_lock"]
    shared = (locks["flags"] & FLAG_LOCK_SHARED) != 0
    assert shared.sum() == 3                     # one read per rank
    plat = load_platform(PLATFORM)
    s = from_trace(t, plat)
    res = simulate(s, plat)
    # each exclusive epoch: its transfers' ops (both sides), from the first
    # start to the last end, against its traced Unlock's end
    epochs = []
    for r in range(t.size):
        idx = np.flatnonzero(ev["rank"].to_numpy() == r)      # event positions
        mine = ev.iloc[idx]
        ops = mine["op"].to_numpy()
        for k in np.flatnonzero(ops == "win_lock"):
            if mine["flags"].iat[k] & FLAG_LOCK_SHARED:
                continue
            u = k + 1 + int(np.argmax(ops[k + 1:] == "win_unlock"))
            moved = np.isin(s.event, idx[k + 1:u])
            epochs.append((mine["t_end"].iat[u], res.start[moved].min(), res.end[moved].max()))
    # a request the target's MPI serves is no wait of the target's program
    assert (res.per_rank["waiting"] <= res.per_rank["finish"]).all(), res.per_rank
    traced = sorted(epochs)
    assert len(traced) >= 3 * 6
    for (_, s0, e0), (_, s1, e1) in zip(traced, traced[1:]):
        assert e0 <= s1, (s0, e0, s1, e1)
    # MPI's own work in each one-sided call (the platform's rma_overhead)
    # busies the caller's CPU, a window of its own as much as another's
    calls = ev["op"].isin(["win_lock", "win_unlock", "win_get_accumulate", "win_get",
                           "win_compare_and_swap", "win_fetch_and_op"])
    most = int(calls.groupby(ev["rank"]).sum().max())
    plat.rma_overhead = 1e-3
    slow = simulate(from_trace(t, plat), plat).predicted_time
    assert res.predicted_time < most * 1e-3 <= slow


def test_a_lock_waits_for_the_target_to_serve_it_twice(tmp_path):
    """MPICH grants a lock only inside a call of the target, then serves
    the transfer inside another (bench/probes/rma_lock_probe.py: a draw against a
    computing target takes two of its calls).  Simulated, rank 1's k-th
    draw ends right after rank 0's 2k-th call, never sooner."""
    from contracts.trace import load_trace
    from netsim.platform import load_platform
    from netsim.predict import run as simulate
    from netsim.schedule import CALC, from_trace
    trace(2, tmp_path / "t", [APPS / "rma_lock_wait.py", 12, 3, 0.005])
    t = load_trace(str(tmp_path / "t"))
    ev = t.events
    plat = load_platform(PLATFORM)
    # rank 1's calls take long enough that its transfer's request finds
    # rank 0 computing again after the call that granted the lock
    plat.rma_overhead = 1e-4
    s = from_trace(t, plat)
    res = simulate(s, plat)
    rank, op = ev["rank"].to_numpy(), ev["op"].to_numpy()
    calls = np.flatnonzero((rank == 0) & (op == "sendrecv"))
    # the moments rank 0 is in MPI: the ends of the computation before its calls
    inside = np.sort([res.end[(s.event == i) & (s.kind == CALC)].max() for i in calls])
    # a draw is done when its Get_accumulate's answer is in
    draws = [res.end[s.event == i].max() for i in np.flatnonzero((rank == 1) &
                                                                  (op == "win_get_accumulate"))]
    assert len(inside) == 12 and len(draws) == 3
    assert (res.per_rank["waiting"] <= res.per_rank["finish"]).all(), res.per_rank
    for k, end in enumerate(draws, 1):
        assert inside[2 * k - 1] <= end < inside[2 * k], (k, end, inside)


def _predicted(tmp_path, mode, platform):
    t = tmp_path / mode
    trace(2, t, [APPS / "rma_stream.py", "--mode", mode, "--mib", "4", "--reps", "4"])
    out = tmp_path / f"{mode}.json"
    run([sys.executable, "-m", "netsim", str(t), "--platform", str(platform), "-o", str(out)])
    return json.loads(out.read_text())


def test_a_put_or_get_costs_what_the_same_message_costs(tmp_path):
    """On a slow network (1 GB/s between nodes, one rank per node) 4 x 4 MiB
    moved by Put or Get inside fences are predicted like the same bytes by
    Send/Recv and barriers: the transfer dominates both."""
    plat = tmp_path / "slow.yaml"
    plat.write_text("name: slow\nnodes: 2\ncores_per_node: 1\nplacement: block\n"
                    "network:\n  levels:\n    - {name: node, span: 1, latency: 1.0e-6, "
                    "byte_time: 1.0e-9}\n    - {name: net, latency: 5.0e-6, byte_time: 1.0e-9}\n"
                    "collectives: {default: analytic}\n"
                    "compute_scale: 1.0e-9\n")       # the transfers alone, not the noise
                                                      # of the traced computation
    data = 4 * 4 * (1 << 20) * 1e-9

    send = _predicted(tmp_path, "send", plat)["predicted_time"]
    assert data <= send < 1.1 * data
    for mode in ("put", "get"):
        t = _predicted(tmp_path, mode, plat)["predicted_time"]
        assert data <= t < 1.1 * data, (mode, t, data)


def test_a_changed_window_stops_the_replay_naming_it(tmp_path):
    """Replayed with other arguments, the first window call that differs
    (its creation, of another size) stops the replay with one message:
    the rank, the event, what was recorded and what was called."""
    app = [APPS / "rma_stream.py", "--mode", "get", "--mib", "1", "--reps", "2"]
    record(2, tmp_path / "log", [1], app)
    p = run([sys.executable, "-m", "replay", "--rank", "1", "--log", str(tmp_path / "log"),
             "-o", str(tmp_path / "rep"), "--any-command"]
            + [str(a) for a in app[:-3]] + ["2", "--reps", "2"], check=False)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("replay: error: rank 1: event 1 "), last
    assert "recorded win_create(peer=-1, tag=-1, 1048576 bytes" in last
    assert "called win_create(peer=-1, tag=-1, 2097152 bytes" in last


@pytest.mark.parametrize("method,args,kw", [
    ("Lock", (1,), {}),
    ("Lock", (1,), {"lock_type": 235, "assertion": 4}),
    ("Lock", (), {"rank": 3}),
    ("Get_accumulate", (b"a", b"b", 2), {}),
    ("Get_accumulate", (b"a",), {"result": b"b", "target_rank": 5, "target": (0, 1)}),
    ("Put", (b"x", 1, (2, 3)), {}),
    ("Flush_all", (), {}),
])
def test_window_arguments_are_read_as_signature_bind_reads_them(method, args, kw):
    # the traced window calls read their arguments with a fast stand-in for
    # Signature.bind, after the call (inside the event, not in the span before)
    import inspect

    from mpi4py import MPI

    from instrument.intercept import _args_of
    base = getattr(MPI.Win, method)
    sig = inspect.signature(base)
    names = [p for p in sig.parameters if p != "self"] + ["not_a_parameter", None]
    self = object()
    ba = sig.bind(self, *args, **kw)
    ba.apply_defaults()
    want = [ba.arguments.get(n) for n in names]
    assert _args_of(base, names)((self,) + args, kw) == want
    # creation is a class method: no self
    create = MPI.Win.Allocate
    ba = inspect.signature(create).bind(64, comm=MPI.COMM_WORLD)
    ba.apply_defaults()
    assert _args_of(create, ("size", "comm", "info"))((64,), {"comm": MPI.COMM_WORLD}) == \
        [64, MPI.COMM_WORLD, ba.arguments["info"]]
