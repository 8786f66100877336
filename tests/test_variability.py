"""Computation variability: measured by replaying copies, sampled by netsim.

The sampling is checked where the truth is known: synthetic schedules with
a barrier per iteration, whose mean iteration time must be the expected
maximum of N draws (order statistics, integrated numerically); the
measurement and the whole chain on real mpiexec runs."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import EXAMPLES, mpirun, run
from scipy.stats import norm

from contracts.variability import nil, read_variability, write_variability
from netsim import Builder, from_dict
from netsim import run as simulate
from netsim.engine import CALC, COLL
from netsim.variability import Variability, run_samples
from replay.variability import estimate, mean_spans

SPAN = 1e-3


def flat_platform(cores_per_node=4, nodes=4096):
    """Free messages: an iteration costs its slowest span and nothing else."""
    return from_dict({"nodes": nodes, "cores_per_node": cores_per_node,
                      "network": {"levels": [{"name": "net", "latency": 0.0,
                                              "byte_time": 0.0}]}}, "flat")


def barrier_loop(n: int, iters: int, span: float = SPAN):
    """Every rank: a span of application work, then a barrier, ``iters`` times."""
    B = Builder(n)
    colls = [B.new_coll(n) for _ in range(iters)]
    for r in range(n):
        after = []
        for k in range(iters):
            x = B.op(CALC, r, after, dur=span)
            c = B.op(COLL, r, [(x, False)], coll=colls[k])
            after = [(c, False)]
    s = B.done()
    s.work = np.where(s.kind == CALC, span, 0.0)
    return s


def table(factors=(1.0,), sigma_run=0.0, sigma_span=0.0, rep=0) -> pd.DataFrame:
    return pd.DataFrame({"representative": rep, "copy": np.arange(len(factors)), "core": -1,
                         "factor": list(factors), "sigma_run": sigma_run,
                         "sigma_span": sigma_span, "rounds": 3})


def expected_max(n: int, sigma: float) -> float:
    """E[max of n draws of exp(sigma Z - sigma^2/2)] = int_0^inf 1 - F(x)^n dx."""
    x = np.linspace(1e-9, 4.0, 400_001)
    F = norm.cdf((np.log(x) + sigma ** 2 / 2) / sigma)
    return float(np.trapezoid(1 - F ** n, x))


@pytest.mark.parametrize("n,iters", [(2, 400), (16, 100), (256, 40), (4096, 30)])
def test_the_mean_iteration_is_the_expected_maximum_of_n_spans(n, iters):
    sigma = 0.1
    s = barrier_loop(n, iters)
    plat = flat_platform()
    var = Variability(table(sigma_span=sigma), samples=15, seed=3)
    _, times, _, _ = run_samples(s, plat, var, np.zeros(n, int), simulate)
    per_iter = np.mean(times) / iters
    assert per_iter == pytest.approx(SPAN * expected_max(n, sigma), rel=0.01)
    # and the expectation itself grows with N: the effect being modelled
    assert expected_max(n, sigma) > expected_max(max(n // 2, 1), sigma)


def test_the_slowest_core_of_a_node_sets_the_pace():
    """A node's 4 ranks take its 4 measured cores, one each, in any order:
    every sample waits for the 1.3x core, every iteration."""
    s = barrier_loop(8, 10)
    var = Variability(table(factors=(1.0, 0.9, 1.3, 1.0)), samples=5)
    _, times, _, _ = run_samples(s, flat_platform(cores_per_node=4), var, np.zeros(8, int),
                              simulate)
    assert times == pytest.approx([10 * SPAN * 1.3] * 5, rel=1e-12)


def test_run_to_run_noise_sets_the_pace_by_its_own_order_statistics():
    n, sigma = 64, 0.05
    s = barrier_loop(n, 3)
    var = Variability(table(sigma_run=sigma), samples=301, seed=1)
    _, times, _, _ = run_samples(s, flat_platform(), var, np.zeros(n, int), simulate)
    # a rank's factor holds for the whole run: each sample is 3 iterations
    # of the same slowest rank
    assert np.mean(times) / 3 == pytest.approx(SPAN * expected_max(n, sigma), rel=0.01)


def test_nothing_measured_to_vary_changes_nothing():
    s = barrier_loop(6, 4, span=0.37e-3)
    var = Variability(table(factors=(1.0, 1.0)), samples=3)
    assert var.nil
    one = simulate(s, flat_platform()).predicted_time
    _, times, _, _ = run_samples(s, flat_platform(), var, np.zeros(6, int), simulate)
    assert times == [one] * 3


def test_a_sample_is_reproduced_from_its_seed():
    s = barrier_loop(32, 5)
    var = Variability(table(factors=(1.0, 1.2), sigma_run=0.05, sigma_span=0.1), samples=4,
                      seed=11)
    a = run_samples(s, flat_platform(), var, np.zeros(32, int), simulate)[1]
    b = run_samples(s, flat_platform(), var, np.zeros(32, int), simulate)[1]
    assert a == b and len(set(a)) == 4
    other = Variability(table(factors=(1.0, 1.2), sigma_run=0.05, sigma_span=0.1),
                        samples=4, seed=12)
    assert run_samples(s, flat_platform(), other, np.zeros(32, int), simulate)[1] != a


def test_estimate_separates_cores_rounds_and_spans():
    """Copy 1's core 1.2x slower in every round, round 2 1.5x slower on
    the whole node, no other noise: factor 1.2, nothing else."""
    base = np.array([1e-3, 2e-3, 4e-3])
    spans = np.array([[base, 1.5 * base], [1.2 * base, 1.8 * base]])
    t = estimate(7, spans, cores=[0, 1])
    assert t["factor"].to_numpy() == pytest.approx([1.0, 1.2])
    assert t["sigma_run"].iat[0] == pytest.approx(0.0, abs=1e-12)
    assert t["sigma_span"].iat[0] == pytest.approx(0.0, abs=1e-12)
    assert list(t["core"]) == [0, 1] and set(t["representative"]) == {7}
    # span noise: every span a little longer or shorter in every replay
    many = np.tile(base, 20)
    noisy = np.array([[many, 1.5 * many], [1.2 * many, 1.8 * many]])
    noisy *= np.exp(0.05 * np.random.default_rng(1).standard_normal(noisy.shape))
    assert estimate(7, noisy)["sigma_span"].iat[0] == pytest.approx(0.05, rel=0.3)
    # the same span slower in both copies of a round at the same moment: the
    # node was busy, which slows a real run's ranks alike and makes none wait
    shared = np.array([[base, 1.5 * base], [base, 1.5 * base]])
    shared[:, 1, 2] *= 1.1
    assert estimate(7, shared)["sigma_span"].iat[0] == pytest.approx(0.0, abs=1e-12)


def test_a_time_slice_lost_to_another_process_is_no_noise():
    """Spans of 3 % noise; then one replay loses 10 ms inside a 0.3 ms span,
    and another inside a span that takes 0.1 us: the host's disturbances,
    like a disturbed repeat, not the node's noise (osu-bw's spans came out
    at sigma 2.96 from such hiccups)."""
    rng = np.random.default_rng(0)
    base = rng.uniform(1e-4, 1e-3, 400)
    base[::10] = 1e-7                            # calls back to back
    spans = base * np.exp(0.03 * rng.standard_normal((2, 3, 400)))
    clean = estimate(0, spans)["sigma_span"].iat[0]
    assert clean == pytest.approx(0.03, rel=0.2)
    spans[1, 2, 17] += 10e-3
    spans[0, 1, 20] += 10e-3
    assert estimate(0, spans)["sigma_span"].iat[0] == pytest.approx(clean, rel=0.1)


def test_the_samples_vary_around_each_spans_mean_at_the_kept_level():
    """The kept replay's spans are one draw of the noise: sampling around
    them would count it twice.  Replays that differ by a factor only give
    the kept replay's spans back; noise averages out."""
    base = np.array([1e-3, 2e-3, 4e-3])
    spans = np.array([[base, 1.5 * base], [1.2 * base, 1.8 * base]])
    assert mean_spans(spans, 0) == pytest.approx(base)
    assert mean_spans(spans, 1) == pytest.approx(1.5 * base)
    noisy = spans.copy()
    noisy[0, 0] *= [1.2, 1.0, 1.0]           # the kept replay's first span a high draw
    m = mean_spans(noisy, 0)
    assert noisy[0, 0, 0] > m[0] > base[0] and m.sum() == pytest.approx(noisy[0, 0].sum(),
                                                                          rel=0.05)


def test_a_damaged_variability_table_is_refused(tmp_path):
    path = tmp_path / "v.csv"
    write_variability(table(factors=(1.0, 1.1)), str(path))
    assert len(read_variability(str(path))) == 2
    bad = table(factors=(1.0, float("nan")))
    bad.to_csv(path, index=False)
    with pytest.raises(ValueError, match="representative 0, copy 1: factor"):
        read_variability(str(path))
    bad = table(factors=(1.0, 1.1))
    bad["copy"] = [0, 2]
    bad.to_csv(path, index=False)
    with pytest.raises(ValueError, match="copies must be 0..K-1"):
        read_variability(str(path))


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """uneven.py at 4 ranks traced, clustered, recorded, and its two
    representatives replayed as 2 copies over 2 rounds."""
    d = tmp_path_factory.mktemp("var")
    app = [EXAMPLES / "uneven.py", "--iters", "6", "--work", "40000", "--classes", "2"]
    mpirun(4, ["-m", "instrument", "trace", "-o", d / "trace"] + app)
    run([*PY, "-m", "cluster", str(d / "trace"), "-o", str(d / "reps.csv")])
    mpirun(4, ["-m", "instrument", "record", "--reps", d / "reps.csv", "-o", d / "log"] + app)
    p = run([*PY, "-m", "replay", "--reps", str(d / "reps.csv"), "--log", str(d / "log"),
             "-o", str(d / "rep"), "--load", "2", "--repeats", "2"] + [str(a) for a in app])
    run([*PY, "-m", "replay.expand", str(d / "trace"), str(d / "reps.csv"), str(d / "rep"),
         "-o", str(d / "compute.csv"), "--variability", str(d / "variability.csv")])
    return d, p


PY = [__import__("sys").executable]


def test_replay_copies_measure_each_representative(measured):
    d, p = measured
    reps = sorted(set(pd.read_csv(d / "reps.csv")["representative"]))
    var = read_variability(str(d / "variability.csv"))
    assert sorted(set(var["representative"])) == reps
    for r in reps:
        # both copies of both rounds kept, made the same calls as the kept replay
        for k in (1, 2):
            copy = pd.read_csv(d / "rep" / f"repeat{k}" / "copies" / "copy1" / f"rank{r}.csv")
            assert list(copy["op"]) == list(pd.read_csv(d / "rep" / f"rank{r}.csv")["op"])
        mine = var[var["representative"] == r]
        assert list(mine["copy"]) == [0, 1] and (mine["rounds"] == 2).all()
        assert f"rank {r}: 2 copies x 2 round(s): core factors" in p.stderr
    compute = pd.read_csv(d / "compute.csv")
    rep_of = dict(zip(*pd.read_csv(d / "reps.csv")[["rank", "representative"]].T.values))
    assert (compute["representative"] == compute["rank"].map(rep_of)).all()
    # the spans' means over 2 copies x 2 rounds: not the kept replay's draw,
    # but within the measured spread of it
    assert (compute["mean"] != compute["comp"]).mean() > 0.5
    work = compute[compute["seq"] > 0]
    assert work["mean"].sum() == pytest.approx(work["comp"].sum(), rel=0.5)


def _netsim(d, out, *extra):
    run([*PY, "-m", "netsim", str(d / "trace"), "--platform", "config/platforms/ib-cluster.yaml",
         "--compute", str(d / "compute.csv"), "-o", str(out), *extra])
    return json.loads(out.read_text())


def test_the_prediction_is_the_median_sample_with_its_band(measured, tmp_path):
    d, _ = measured
    plain = _netsim(d, tmp_path / "plain.json")
    sampled = _netsim(d, tmp_path / "sampled.json", "--variability", str(d / "variability.csv"),
                      "--samples", "5", "--seed", "4")
    v = sampled["variability"]
    assert v["samples"] == 5 and v["seed"] == 4 and len(v["times"]) == 5
    assert sampled["predicted_time"] == sorted(v["times"])[2] == v["times"][v["median_sample"]]
    assert sampled["band"] == pytest.approx(list(np.percentile(v["times"], [5, 95])))
    assert {r["representative"] for r in v["representatives"]} == \
        set(pd.read_csv(d / "reps.csv")["representative"])
    assert max(r["finish"] for r in sampled["ranks"]) == sampled["predicted_time"]
    # nothing measured to vary: the unsampled prediction, to the digit
    nil(sorted(set(pd.read_csv(d / "reps.csv")["representative"]))).to_csv(
        tmp_path / "nil.csv", index=False)
    same = _netsim(d, tmp_path / "nil.json", "--variability", str(tmp_path / "nil.csv"))
    assert same["predicted_time"] == plain["predicted_time"] and "variability" not in same
    bad = run([*PY, "-m", "netsim", str(d / "trace"), "--platform",
               "config/platforms/ib-cluster.yaml", "-o", str(tmp_path / "x.json"),
               "--variability", str(d / "variability.csv")], check=False)
    assert bad.returncode == 2 and "--variability needs --compute" in bad.stderr
    bad = run([*PY, "-m", "netsim", str(d / "trace"), "--platform",
               "config/platforms/ib-cluster.yaml", "--compute", str(d / "compute.csv"),
               "-o", str(tmp_path / "y.json"), "--variability", str(d / "variability.csv"),
               "--samples", "-1"], check=False)
    assert bad.returncode == 2 and "--samples must be >= 0, not -1" in bad.stderr
    assert not (tmp_path / "y.json").exists()


def test_core_speeds_are_what_the_rounds_tell_from_run_noise():
    """16 alike cores, 3 rounds of 15 % run-to-run noise: the copies' means
    differ by noise alone (a 'slowest core' about 15 % slow), and no core
    may be sampled as slower than the rest.  One core truly 1.5x slower
    stays so (within the noise of its mean); the others stay alike."""
    rng = np.random.default_rng(3)
    base = np.full(50, 1e-3)
    noise = np.exp(0.15 * rng.standard_normal((16, 3)))
    alike = base * noise[:, :, None]
    raw = np.exp(np.log(alike.sum(axis=2)).mean(axis=1))
    assert raw.max() / raw.min() > 1.15                # what noise alone makes
    t = estimate(0, alike)
    f = t["factor"].to_numpy()
    assert t["sigma_run"].iat[0] == pytest.approx(0.15, rel=0.3)
    assert f.max() / f.min() < 1.02
    slow = alike.copy()
    slow[5] *= 1.5
    f = estimate(0, slow)["factor"].to_numpy()
    others = np.delete(f, 5)
    assert f[5] / np.median(others) == pytest.approx(1.5, rel=0.15)
    assert others.max() / others.min() < raw.max() / raw.min()
