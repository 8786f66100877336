"""Trace extrapolation (python -m extrapolate): traces of real runs at
small N, the extrapolated trace against a real trace at the larger N, and
what is refused."""
import json
import sys

import numpy as np
import pytest
from conftest import APPS, EXAMPLES, run, trace

from contracts.trace import load_trace
from extrapolate.compare import compare

JACOBI = [EXAMPLES / "jacobi.py", "--n", "240", "--iters", "4"]
CG = [EXAMPLES / "cg.py", "--n", "8400", "--iters", "6"]
RMA = [EXAMPLES / "rma_halo.py", "--n", "19200", "--iters", "4"]


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """Real traces: jacobi on 3x3, 4x3, 4x4 and 5x4 grids; cg at 4, 6, 8,
    12; rma_halo (one-sided) at 4, 8, 16, 32."""
    d = tmp_path_factory.mktemp("extrapolate")
    for n in (9, 12, 16, 20):
        trace(n, d / f"jacobi{n}", JACOBI)
    for n in (4, 6, 8, 12):
        trace(n, d / f"cg{n}", CG)
    for n in (4, 8, 16, 32):
        trace(n, d / f"rma_halo{n}", RMA)
    return d


def extrapolate(*args):
    return run([sys.executable, "-m", "extrapolate"] + [str(a) for a in args], check=False)


@pytest.mark.parametrize("app,small,big", [("jacobi", (9, 12, 16), 20), ("cg", (4, 6, 8), 12),
                                           ("rma_halo", (4, 8, 16), 32)])
def test_the_extrapolated_trace_makes_the_real_runs_calls(traces, tmp_path, app, small, big):
    """A 2-D Cartesian stencil, a 1-D ring code and a one-sided halo
    exchange (whose window is n / p cells plus the ghost cells: a
    constant plus a power of N): every rank's calls at the larger N (ops,
    communicators, peers, tags, bytes, requests) are those of the real
    trace there."""
    p = extrapolate(*[traces / f"{app}{n}" for n in small], "--ranks", big, "-o", tmp_path / "x")
    assert p.returncode == 0, p.stderr
    x = load_trace(str(tmp_path / "x"))
    c = compare(x, load_trace(str(traces / f"{app}{big}")))
    assert c["same_calls"], c["first_difference"]
    meta = json.loads((tmp_path / "x" / "meta.json").read_text())["extrapolated"]
    assert [f["size"] for f in meta["from"]] == list(small)
    for row in meta["classes"]:
        assert 0 < row["cpu_low"] <= row["cpu_total"] <= row["cpu_high"]


def test_a_slab_grid_keeps_its_axes_of_one(tmp_path):
    """A grid of N x 1 at every small N (a slab decomposition, as
    mpi4py-fft makes) is not MPI_Dims_create's balanced one, but its rule
    is: the axis of extent 1 stays 1."""
    for n in (3, 4, 6, 8):
        trace(n, tmp_path / f"j{n}", JACOBI[:-2] + ["--iters", "2", "--grid", f"{n}x1"])
    p = extrapolate(tmp_path / "j3", tmp_path / "j4", tmp_path / "j6", "--ranks", 8,
                    "-o", tmp_path / "x")
    assert p.returncode == 0, p.stderr
    assert "-> 8x1" in p.stderr
    c = compare(load_trace(str(tmp_path / "x")), load_trace(str(tmp_path / "j8")))
    assert c["same_calls"], c["first_difference"]


def test_a_large_target_is_simulated(traces, tmp_path):
    """Far beyond the small traces: 4,096 ranks on a 64x64 grid, read and
    simulated by netsim like any trace, with the computation's interval
    as the prediction's band."""
    small = (traces / "jacobi9", traces / "jacobi12", traces / "jacobi16")
    # 240 cells do not split evenly over 64: where the remainder goes is
    # the application's convention, which the small traces do not show
    p = extrapolate(*small, "--ranks", 4096, "-o", tmp_path / "x")
    assert p.returncode == 2 and "3.75 elements of 8 bytes at [64, 64]" in p.stderr, p.stderr
    assert "--uneven" in p.stderr and not (tmp_path / "x").exists()
    # jacobi drops it (n // p): floored, the halo along each axis is 3 cells
    p = extrapolate(*small, "--ranks", 4096, "-o", tmp_path / "x", "--uneven", "floor")
    assert p.returncode == 0, p.stderr
    x = load_trace(str(tmp_path / "x"))
    assert x.size == 4096 and x.topology["dims"].iloc[0].tolist() == [64, 64]
    assert json.loads((tmp_path / "x" / "meta.json").read_text())["extrapolated"]["uneven"] \
        == "floor"
    halo = x.events[(x.events["op"] == "isend") & (x.events["sbytes"] > 0)]["sbytes"]
    assert set(halo) == {24}
    p = run([sys.executable, "-m", "netsim", str(tmp_path / "x"), "--platform",
             "config/platforms/ib-cluster.yaml", "-o", str(tmp_path / "p.json")], check=False)
    assert p.returncode == 0, p.stderr
    pred = json.loads((tmp_path / "p.json").read_text())
    # the prediction says where its trace came from, and its band is the
    # computation's interval
    assert any("extrapolated from traces at N = 9, 12, 16" in w
               and "fitted to the small traces' CPU seconds" in w for w in pred["warnings"])
    assert pred["band"][0] < pred["predicted_time"] < pred["band"][1]


def test_a_domain_split_with_remainders_is_taken_as_seen_or_refused(tmp_path):
    """250 cells over 3, 4 and 5 ranks per axis leave remainders (83, 62,
    50 cells: a power of the extents fits them to within one element
    only).  At 4x4 every axis splits as some small grid split it: the
    sizes seen there, exactly the real run's (Devito's domain over 9, 12,
    15 and 16 ranks gave one wrong halo at 20 when they were fitted).
    At 6x6 neither the remainder's place nor the form is known: refused,
    naming the event."""
    app = JACOBI[:1] + ["--n", "250", "--iters", "2"]
    for n in (9, 12, 16, 20):
        trace(n, tmp_path / f"j{n}", app)
    small = (tmp_path / "j9", tmp_path / "j12", tmp_path / "j20")
    p = extrapolate(*small, "--ranks", 16, "-o", tmp_path / "x")
    assert p.returncode == 0, p.stderr
    c = compare(load_trace(str(tmp_path / "x")), load_trace(str(tmp_path / "j16")))
    assert c["same_calls"], c["first_difference"]
    p = extrapolate(*small, "--ranks", 36, "-o", tmp_path / "y")
    # (the second axis had two extents, 3 and 4: too few to check a form)
    assert p.returncode == 2 and "two extents only" in p.stderr, p.stderr
    assert "event" in p.stderr and "[[3, 3], [4, 3], [5, 4]]" in p.stderr
    assert "--uneven" in p.stderr and not (tmp_path / "y").exists()


def test_the_classes_variability_is_sampled_at_the_target(traces, tmp_path):
    """Each position class keeps how its members differed in the largest
    small trace (speeds of mean 1, span noise); --class-variability
    samples them at N, as the replay's copies are sampled, and every rank
    of a synchronising code then waits for the slowest of its class."""
    p = extrapolate(traces / "jacobi9", traces / "jacobi12", traces / "jacobi16",
                    "--ranks", 400, "-o", tmp_path / "x")
    assert p.returncode == 0, p.stderr
    classes = json.loads((tmp_path / "x" / "meta.json").read_text())["extrapolated"]["classes"]
    inside = next(c for c in classes if c["class"] == "in,in")
    assert len(inside["cpu_factors"]) == 4 and abs(sum(inside["cpu_factors"]) / 4 - 1) < 1e-9
    # these spans are mostly shorter than the 20 us a span must last to
    # count as noise: the members' speeds carry the variability here
    assert inside["cpu_sigma_span"] >= 0 and max(inside["cpu_factors"]) > 1
    plain, sampled = tmp_path / "plain.json", tmp_path / "sampled.json"
    for out, extra in ((plain, []), (sampled, ["--class-variability", "--samples", "5"])):
        p = run([sys.executable, "-m", "netsim", str(tmp_path / "x"), "--platform",
                 "config/platforms/ib-cluster.yaml", "-o", str(out)] + extra, check=False)
        assert p.returncode == 0, p.stderr
    a, b = (json.loads(f.read_text()) for f in (plain, sampled))
    assert len(b["variability"]["times"]) == 5
    # every rank waits for the slowest of its class; the run's end may not
    # move where one rank of a class of one (a corner with a long span of
    # its own) is the last to finish, as in one CI run
    assert b["summary"]["waiting"]["mean"] > a["summary"]["waiting"]["mean"]
    assert b["predicted_time"] >= a["predicted_time"]
    # a traced run has no classes' variability to sample
    p = run([sys.executable, "-m", "netsim", str(traces / "jacobi9"), "--platform",
             "config/platforms/ib-cluster.yaml", "-o", str(tmp_path / "no.json"),
             "--class-variability"], check=False)
    assert p.returncode == 2 and "extrapolated trace" in p.stderr, p.stderr


def test_a_task_pool_is_refused(tmp_path):
    """A master and workers taking tasks as they come: the workers' calls
    depend on timing, not on their place; refused naming two ranks."""
    app = [EXAMPLES / "master_worker.py", "--tasks", "12"]
    for n in (4, 5, 6):
        trace(n, tmp_path / f"t{n}", app)
    p = extrapolate(tmp_path / "t4", tmp_path / "t5", tmp_path / "t6", "--ranks", 8,
                    "-o", tmp_path / "x")
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert "rank" in p.stderr and "position class" in p.stderr, p.stderr
    assert not (tmp_path / "x").exists()


def test_a_split_communicator_is_refused(tmp_path):
    """groups.py makes communicators of some ranks, by group: no slice of a
    grid, so their members at another N are unknown."""
    app = [APPS / "groups.py"]
    for n in (4, 6):
        trace(n, tmp_path / f"t{n}", app)
    p = extrapolate(tmp_path / "t4", tmp_path / "t6", "--ranks", 8, "-o", tmp_path / "x")
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert "no row, column or plane of the process grid" in p.stderr, p.stderr


def test_row_and_column_communicators_are_extrapolated(tmp_path):
    """Rows and columns of the grid (Cart_sub, and Split on the row
    coordinate) with collectives rooted at each slice's first rank: at
    the target every slice is a communicator of its own, numbered, made
    of members and laid out as the real trace has them."""
    app = [APPS / "grid_slices.py", "--n", "240", "--iters", "2"]
    for n in (9, 12, 16, 20):
        trace(n, tmp_path / f"t{n}", app)
    p = extrapolate(tmp_path / "t9", tmp_path / "t12", tmp_path / "t16", "--ranks", 20,
                    "-o", tmp_path / "x")
    assert p.returncode == 0, p.stderr
    x, real = load_trace(str(tmp_path / "x")), load_trace(str(tmp_path / "t20"))
    c = compare(x, real)
    assert c["same_calls"], c["first_difference"]
    for col in ("how", "members"):
        assert [list(v) if col == "members" else v for v in x.comms[col]] == \
            [list(v) if col == "members" else v for v in real.comms[col]], col
    key = ["comm", "rank"]
    a, b = (t.topology.sort_values(key).reset_index(drop=True) for t in (x, real))
    assert len(a) == len(b) > 20          # the grid, and each row's and column's Cartesian one
    for col in ("comm", "rank", "sources", "dims", "coords"):
        assert [list(v) if hasattr(v, "__len__") else v for v in a[col]] == \
            [list(v) if hasattr(v, "__len__") else v for v in b[col]], col


def test_a_grid_without_inside_ranks_is_refused(traces, tmp_path):
    """3x3 has inside ranks; a 2-D grid of 2 along an axis has none: the
    class that the target needs is never seen."""
    trace(4, tmp_path / "j4", JACOBI)
    p = extrapolate(tmp_path / "j4", traces / "jacobi9", "--ranks", 16, "-o", tmp_path / "x")
    assert p.returncode == 2 and "missing at another" in p.stderr, p.stderr


def test_square_grids_alone_are_refused_for_a_grid_that_is_not(traces, tmp_path):
    """On 3x3 and 4x4 grids a halo of n / rows and one of n / columns look
    alike; on 5x4 they differ: refused, asking for a grid that is not
    square."""
    p = extrapolate(traces / "jacobi9", traces / "jacobi16", "--ranks", 20, "-o", tmp_path / "x")
    assert p.returncode == 2 and "not square" in p.stderr, p.stderr


def test_different_applications_are_refused(traces, tmp_path):
    p = extrapolate(traces / "cg4", traces / "jacobi9", "--ranks", 16, "-o", tmp_path / "x")
    assert p.returncode == 2 and "different applications" in p.stderr, p.stderr


def test_one_noisy_small_run_does_not_bend_the_computation():
    """The members of one small trace share that run's deviation (the host
    was loaded while it ran): a whole run 1.5x slow among flat weak-scaling
    runs must not bend the fitted curve below every run at the target, as
    thirty members fitted as thirty independent points once did (0.011 s
    predicted at 128 ranks where every run took 0.025)."""
    import numpy as np

    from extrapolate.fit import computation_at, total_model
    rng = np.random.default_rng(1)
    sizes = [8, 16, 32]
    totals = [0.025 * level * rng.lognormal(0, 0.07, n - 2)
              for n, level in zip(sizes, (1.0, 1.5, 1.0))]
    pred, lo, hi = computation_at(total_model(sizes, totals), 128)
    means = [t.mean() for t in totals]
    assert min(means) * 0.9 <= pred <= max(means)
    assert lo <= 0.025 <= hi


def test_replayed_computation_is_extrapolated_in_place_of_the_cpu_seconds(traces, tmp_path):
    """``--compute``: one computation table per small trace (replay.expand's
    format), here every span twice the trace's CPU seconds, as a target
    twice as slow would replay it: the extrapolated computation doubles,
    the calls stay, and meta.json names the tables.  A table that misses
    events of its trace is refused, naming both."""
    from contracts.compute import write_compute
    small = [traces / f"jacobi{n}" for n in (9, 12, 16)]
    tables = []
    for d in small:
        ev = load_trace(str(d)).events
        t = ev[["rank", "seq"]].assign(comp=2 * ev["cpu"])
        tables.append(tmp_path / f"{d.name}.csv")
        write_compute(t, str(tables[-1]))
    p = extrapolate(*small, "--ranks", 20, "-o", tmp_path / "plain")
    assert p.returncode == 0, p.stderr
    p = extrapolate(*small, "--ranks", 20, "-o", tmp_path / "x", "--compute", *tables)
    assert p.returncode == 0, p.stderr
    assert "not the traces' CPU seconds" in p.stdout
    plain, x = load_trace(str(tmp_path / "plain")), load_trace(str(tmp_path / "x"))
    assert compare(x, plain)["same_calls"]
    ratio = x.events.groupby("rank")["cpu"].sum() / plain.events.groupby("rank")["cpu"].sum()
    assert ratio.between(1.9, 2.1).all(), ratio.describe()
    meta = json.loads((tmp_path / "x" / "meta.json").read_text())["extrapolated"]
    assert meta["computation"] == [str(t) for t in tables]

    cut = tmp_path / "cut.csv"
    write_compute(load_trace(str(small[1])).events[["rank", "seq"]].iloc[5:].assign(comp=1e-3),
                  str(cut))
    p = extrapolate(*small, "--ranks", 20, "-o", tmp_path / "y", "--compute", tables[0], cut,
                    tables[2])
    assert p.returncode == 2 and str(cut) in p.stderr and "jacobi12" in p.stderr, p.stderr
    p = extrapolate(*small, "--ranks", 20, "-o", tmp_path / "z", "--compute", tables[0])
    assert p.returncode == 2 and "one per trace" in p.stderr, p.stderr


def test_replays_give_the_speed_and_the_trace_the_spread_over_classes(traces, tmp_path):
    """Each class's representative is replayed on its own, minutes apart
    from the others; the trace timed every rank at once.  Replayed tables
    where one class's representative (rank 0, each rank its own) came out
    30 % slow against the others: the extrapolated computation is the
    run's pooled speed times the traced CPU seconds, the same ratio to the
    traces' own extrapolation on every rank, not 30 % more on rank 0's
    class.  Where one representative stands for every rank (one cluster),
    every class computes alike: the cluster's mean."""
    from contracts.compute import write_compute
    small = [traces / f"jacobi{n}" for n in (9, 12, 16)]
    for name, rep in (("each", None), ("one", 5)):
        tables = []
        for d in small:
            ev = load_trace(str(d)).events
            slow = np.where(ev["rank"] == 0, 2.6, 2.0)
            t = ev[["rank", "seq"]].assign(comp=slow * ev["cpu"],
                                           representative=ev["rank"] if rep is None else rep)
            tables.append(tmp_path / f"{name}{d.name}.csv")
            write_compute(t, str(tables[-1]))
        p = extrapolate(*small, "--ranks", 20, "-o", tmp_path / name, "--compute", *tables)
        assert p.returncode == 0, p.stderr
    p = extrapolate(*small, "--ranks", 20, "-o", tmp_path / "plain")
    assert p.returncode == 0, p.stderr
    plain = load_trace(str(tmp_path / "plain")).events.groupby("rank")["cpu"].sum()
    each = load_trace(str(tmp_path / "each")).events.groupby("rank")["cpu"].sum()
    ratio = each / plain
    assert ratio.max() / ratio.min() < 1.01 and ratio.between(1.95, 2.15).all(), ratio
    one = load_trace(str(tmp_path / "one")).events.groupby("rank")["cpu"].sum()
    assert one.max() / one.min() < 1 + 1e-9 and plain.max() / plain.min() > 1.01, (one, plain)


def test_the_replayed_copies_variability_goes_to_every_class(traces, tmp_path):
    """``--variability`` with replayed small runs: their members compute
    exactly as their representative did, so their spread is nothing; each
    class takes the variability its representative's copies showed (the
    largest small run's table: core factors, run and span noise), the
    spans' means over the copies are extrapolated (what the samples vary
    around), and netsim --class-variability samples it: every rank then
    waits for the slowest.  A table without the representative, or one
    without --compute, is refused."""
    import pandas as pd

    from contracts.compute import write_compute
    from contracts.variability import rows, write_variability
    small = [traces / f"jacobi{n}" for n in (9, 12, 16)]
    tables = []
    for d in small:
        ev = load_trace(str(d)).events
        # rank 5 stands for every rank of each run: one cluster
        t = ev[["rank", "seq"]].assign(comp=2 * ev["cpu"], mean=3 * ev["cpu"], representative=5)
        tables.append(tmp_path / f"{d.name}.csv")
        write_compute(t, str(tables[-1]))
    var = tmp_path / "variability.csv"
    factors = [1.0, 1.25, 0.9, 1.1]
    write_variability(pd.concat([rows(5, np.array(factors), 0.05, 0.2, 3, None),
                                 rows(7, np.ones(2), 0.0, 0.0, 3, None)]), str(var))
    p = extrapolate(*small, "--ranks", 20, "-o", tmp_path / "comp", "--compute", *tables)
    assert p.returncode == 0, p.stderr
    p = extrapolate(*small, "--ranks", 20, "-o", tmp_path / "x", "--compute", *tables,
                    "--variability", var)
    assert p.returncode == 0, p.stderr
    meta = json.loads((tmp_path / "x" / "meta.json").read_text())["extrapolated"]
    assert meta["variability"] == str(var)
    for c in meta["classes"]:
        assert c["variability_of"] == 5 and c["cpu_factors"] == factors
        assert (c["cpu_sigma_run"], c["cpu_sigma_span"]) == (0.05, 0.2)
    # without the table, the members' spread in the tables (nothing, where
    # replay.expand wrote them; here each rank's own CPU seconds)
    plain = json.loads((tmp_path / "comp" / "meta.json").read_text())["extrapolated"]
    assert "computation tables" in plain["variability"]
    assert not any("variability_of" in c for c in plain["classes"])
    x, comp = load_trace(str(tmp_path / "x")), load_trace(str(tmp_path / "comp"))
    ratio = x.events.groupby("rank")["cpu"].sum() / comp.events.groupby("rank")["cpu"].sum()
    assert ratio.between(1.45, 1.55).all(), ratio.describe()

    out = {}
    for name, extra in (("plain", []), ("sampled", ["--class-variability", "--samples", "5"])):
        p = run([sys.executable, "-m", "netsim", str(tmp_path / "x"), "--platform",
                 "config/platforms/ib-cluster.yaml", "-o", str(tmp_path / f"{name}.json")]
                + extra, check=False)
        assert p.returncode == 0, p.stderr
        out[name] = json.loads((tmp_path / f"{name}.json").read_text())
    sampled = out["sampled"]["variability"]["representatives"]
    assert {r["sigma_run"] for r in sampled} == {0.05}
    assert out["sampled"]["summary"]["waiting"]["mean"] > \
        out["plain"]["summary"]["waiting"]["mean"]

    write_variability(rows(7, np.ones(2), 0.0, 0.0, 3, None), str(var))
    p = extrapolate(*small, "--ranks", 20, "-o", tmp_path / "y", "--compute", *tables,
                    "--variability", var)
    assert p.returncode == 2 and "representative 5" in p.stderr and str(var) in p.stderr
    assert "jacobi16" in p.stderr and not (tmp_path / "y").exists(), p.stderr
    p = extrapolate(*small, "--ranks", 20, "-o", tmp_path / "y", "--variability", var)
    assert p.returncode == 2 and "needs --compute" in p.stderr, p.stderr
