"""Partial replay: the loop finder on real traces, the cut log, the replay
that stops at its cut, and expand filling in the iterations not replayed."""
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import EXAMPLES, ROOT, mpirun, run, trace

from replay.loops import Loop, fill, find_loop, plan

JACOBI = [EXAMPLES / "jacobi.py", "--n", "160", "--iters", "300", "--check", "5"]


def test_the_loop_is_found_after_a_prologue_and_before_an_epilogue():
    body = [3, 4, 4, 5, 6]
    sig = np.array([0, 1, 2] + body * 40 + [7, 8])
    lp = find_loop(sig, min_iterations=4)
    assert (lp.start, lp.period, lp.iterations) == (3, 5, 40)
    assert lp.end == 3 + 200
    # the smallest period wins over its multiples, and no loop is no loop
    assert find_loop(np.array([1, 2] * 50)).period == 2
    assert find_loop(np.arange(100)) is None


def _events(cpu):
    n = len(cpu)
    return pd.DataFrame({"seq": np.arange(n), "op": ["allreduce"] * n, "comm": 0, "peer": -1,
                         "tag": -1, "sbytes": 8, "rbytes": 8, "site": 1, "flags": 0,
                         "cpu": cpu})


def test_a_drifting_or_short_loop_is_replayed_whole_saying_why():
    steady = plan(0, _events(np.full(400, 1e-3)), 10)
    # one call repeated: a loop of period 1, cut after the warm-up and 10 more
    assert steady.loop == Loop(0, 1, 400) and steady.cut == 11 and steady.warmup == 1
    assert "partial replay of events 0-" in steady.describe()
    # a solver slowing down: the first iterations stand for none of the later ones
    drifting = plan(0, _events(np.linspace(1e-3, 3e-3, 400)), 10)
    # a slow start is a longer warm-up, not a drift
    slow_start = plan(0, _events(np.r_[np.full(30, 2e-3), np.full(370, 1e-3)]), 10)
    assert slow_start.warmup == 30 and slow_start.cut == 40
    assert drifting.cut is None and "drifts" in drifting.reason
    # ... unless told to take a drift that wide (linspace: the median after
    # the first 11 iterations is about twice theirs)
    assert plan(0, _events(np.linspace(1e-3, 3e-3, 400)), 10, drift=2.0).cut is not None
    assert plan(0, _events(np.full(15, 1e-3)), 10).cut is None
    assert "off" in plan(0, _events(np.full(400, 1e-3)), 0).reason
    below = _events(np.full(400, 1e-3))
    below.loc[7, "flags"] = 256
    assert "below Python" in plan(0, below, 10).reason


def test_the_measured_iterations_follow_the_host_noise_within_a_twentieth_of_the_loop():
    """By default the plan measures as many iterations as make their mean
    precise on the host's noise and span half a second, at least 3, the
    warm-up and they at most a twentieth of the loop."""
    rng = np.random.default_rng(1)

    def auto(per, n=1000, noise=0.002):
        return plan(0, _events(per * (1 + noise * rng.standard_normal(n))), None)
    assert 45 <= auto(1e-2, n=2000, noise=0.01).replayed <= 55   # half a second of 10 ms
    # noise that asks for (2 x 20 % / 1 %)^2 iterations: the twentieth bounds them
    short = auto(0.02, noise=0.2)
    assert short.warmup + short.replayed == 50 and short.cut == 50
    # a loop of 1 s in all: a twentieth of it is too short to measure, and
    # its whole replay cheap
    tiny = auto(1e-3)
    assert tiny.cut is None and "computes 1 s in all" in tiny.reason
    assert auto(0.2).replayed == 3                          # three 0.2 s iterations
    rough = auto(0.2, n=2000, noise=0.04)                   # about (2 x 4 % / 1 %)^2
    assert 55 <= rough.replayed <= 75 and rough.precision == pytest.approx(0.01, rel=0.02)
    assert "their mean within" in short.describe()
    # a loop that holds little of the run: the rest would be host times, not a replay
    ev = _events(np.full(160, 1e-3))
    ev.loc[:59, "site"] = np.arange(60) + 2
    ev.loc[100:, "site"] = np.arange(60) + 62
    few = plan(0, ev, None)
    assert few.cut is None and "holds 40 of its 160 events" in few.reason


def test_a_tag_that_counts_the_steps_does_not_hide_the_loop():
    """Codes that tag each step's messages with the step number still
    repeat the same calls: the loop is found."""
    ev = _events(np.full(400, 1e-3))
    ev["tag"] = np.arange(400)
    assert plan(0, ev, 10).cut == 11


def test_fill_takes_the_mean_of_the_replayed_iterations_and_scales_the_tail():
    lp = Loop(start=2, period=3, iterations=10)          # events 2..31, then 32..33
    host = np.full(34, 2.0)
    m = 2 + 4 * 3 + 1                                   # warm-up, 3 iterations, one call more
    comp = np.arange(m, dtype=float)
    prefix = {"comp": comp, "low": comp * 0.9, "high": comp * 1.1, "inside": np.zeros(m),
              "mean": comp}
    out = fill(prefix, lp, host)
    assert len(out["comp"]) == 34 and (out["comp"][:m] == comp).all()
    # event 14 was replayed; 15, 16, 17 are positions 1, 2, 0 of the loop,
    # whose iterations 1..3 (events 5..13) replayed 6/9/12, 7/10/13, 5/8/11
    assert list(out["comp"][15:18]) == [9.0, 10.0, 8.0]
    assert out["low"][15] == pytest.approx(0.9 * 6) and out["high"][15] == pytest.approx(1.1 * 12)
    ratio = comp[5:14].sum() / host[5:14].sum()
    assert out["comp"][32:] == pytest.approx([2.0 * ratio] * 2)
    assert (out["low"] <= out["comp"]).all() and (out["comp"] <= out["high"]).all()


@pytest.fixture(scope="module")
def jacobi_partial(tmp_path_factory):
    """jacobi at 2 ranks traced, planned (5 iterations after the warm-up),
    recorded whole and cut, and rank 0 replayed from both logs."""
    d = tmp_path_factory.mktemp("partial")
    trace(2, d / "trace", JACOBI)
    run([sys.executable, "-m", "cluster", str(d / "trace"), "-o", str(d / "reps.csv")])
    # a drift this wide: the tiny loop's host times must not decide whether
    # there is a cut to test (a noisy host made them drift 5 %)
    run([sys.executable, "-m", "replay.loops", str(d / "trace"), str(d / "reps.csv"),
         "-o", str(d / "partial.csv"), "--iterations", "5", "--drift", "0.5"])
    for name, extra in (("whole", []), ("cut", ["--partial", str(d / "partial.csv")])):
        mpirun(2, ["-m", "instrument", "record", "--reps", str(d / "reps.csv"), *extra,
                   "-o", str(d / f"log_{name}")] + JACOBI)
        run([sys.executable, "-m", "replay", "--reps", str(d / "reps.csv"), "--log",
             str(d / f"log_{name}"), "-o", str(d / f"rp_{name}"), "--load", "2"] + JACOBI)
        run([sys.executable, "-m", "replay.expand", str(d / "trace"), str(d / "reps.csv"),
             str(d / f"rp_{name}"), "-o", str(d / f"compute_{name}.csv"),
             "--variability", str(d / f"var_{name}.csv")])
    return d


def test_a_partial_replay_stops_at_its_cut_and_expands_to_every_event(jacobi_partial):
    d = jacobi_partial
    plan_t = pd.read_csv(d / "partial.csv")
    row = plan_t[plan_t["rank"] == 0].iloc[0]
    assert row["cut"] > 0 and row["iterations"] == 60 and row["replayed"] == 5
    assert row["cut"] == 2 + (row["warmup"] + 5) * row["period"]
    whole, cut = (d / "log_whole" / "rank0.log").stat().st_size, \
        (d / "log_cut" / "rank0.log").stat().st_size
    # the cut log holds the messages up to the cut only: its share of the
    # whole log is about the cut's share of the events (the warm-up, and so
    # the cut, depends on how evenly the host ran the traced iterations)
    events = len(pd.read_csv(d / "compute_whole.csv").query("rank == 0"))
    assert row["cut"] < events
    assert cut < whole * 1.3 * (row["cut"] + 1) / events + 4096, (cut, whole, row["cut"], events)
    rp = pd.read_csv(d / "rp_cut" / "rank0.csv")
    assert len(rp) == row["cut"] + 1 and rp["op"].iat[-1] != "finalize"
    side = json.loads((d / "rp_cut" / "rank0.partial.json").read_text())
    assert side["rows"] == len(rp) and side["period"] == row["period"]
    # the copies stopped at the same call
    assert len(pd.read_csv(d / "rp_cut" / "copies" / "copy1" / "rank0.csv")) == len(rp)
    full, part = pd.read_csv(d / "compute_whole.csv"), pd.read_csv(d / "compute_cut.csv")
    assert len(full) == len(part) and (full[["rank", "seq"]] == part[["rank", "seq"]]).all().all()
    # the same machine replaying the same loop: the totals agree to well
    # within the noise of one replay against another on a busy host
    ratio = part["comp"].sum() / full["comp"].sum()
    assert 0.5 < ratio < 2.0, ratio


def test_a_damaged_plan_or_side_file_is_refused_in_one_line(jacobi_partial, tmp_path):
    d = jacobi_partial
    bad = pd.read_csv(d / "partial.csv")
    bad.loc[0, "cut"] = bad.loc[0, "events"] + 5
    bad.to_csv(tmp_path / "bad.csv", index=False)
    p = mpirun(2, ["-m", "instrument", "record", "--reps", str(d / "reps.csv"), "--partial",
                   str(tmp_path / "bad.csv"), "-o", str(tmp_path / "log")] + JACOBI, check=False)
    assert p.returncode != 0 and "is not inside a loop of its events" in p.stderr
    assert "Traceback" not in p.stderr
    import shutil
    shutil.copytree(d / "rp_cut", tmp_path / "rp")
    (tmp_path / "rp" / "rank0.partial.json").write_text('{"rank": 0}')
    p = run([sys.executable, "-m", "replay.expand", str(d / "trace"), str(d / "reps.csv"),
             str(tmp_path / "rp"), "-o", str(tmp_path / "c.csv")], check=False)
    assert p.returncode == 2 and "rank0.partial.json: must hold the integers" in p.stderr
    # without its side file a cut replay reads as a truncated one
    (tmp_path / "rp" / "rank0.partial.json").unlink()
    p = run([sys.executable, "-m", "replay.expand", str(d / "trace"), str(d / "reps.csv"),
             str(tmp_path / "rp"), "-o", str(tmp_path / "c.csv")], check=False)
    assert p.returncode == 2 and "not finalize: the file was cut" in p.stderr
    assert not (tmp_path / "c.csv").exists()


def test_a_whole_replay_cut_where_the_partial_one_stopped_expands_like_it(jacobi_partial,
                                                                        tmp_path):
    """The partial-replay benchmark's paired figure: the whole replay cut at
    the partial replay's stop, expanded as a partial replay is."""
    d = jacobi_partial
    sys.path.insert(0, str(ROOT / "bench"))
    from partial_replay import cut_like

    from contracts.replayed import partial_path
    cut_like(d / "rp_whole", d / "rp_cut", tmp_path / "rp")
    for part in (d / "rp_cut").rglob("rank*.csv"):
        mine = tmp_path / "rp" / part.relative_to(d / "rp_cut")
        assert len(pd.read_csv(mine)) == len(pd.read_csv(part)), mine
        assert Path(partial_path(str(mine))).read_text() == \
            Path(partial_path(str(part))).read_text()
    assert (tmp_path / "rp" / "variability_rank0.csv").exists()
    run([sys.executable, "-m", "replay.expand", str(d / "trace"), str(d / "reps.csv"),
         str(tmp_path / "rp"), "-o", str(tmp_path / "c.csv")])
    full, cut = pd.read_csv(d / "compute_whole.csv"), pd.read_csv(tmp_path / "c.csv")
    assert (full[["rank", "seq"]] == cut[["rank", "seq"]]).all().all()
    # the same spans, the later iterations filled with the replayed ones' mean
    assert 0.5 < cut["comp"].sum() / full["comp"].sum() < 2.0
