"""Selecting representatives: real traces of the examples and synthetic tables."""
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import APPS, DATA, EXAMPLES, mpi_env, run, trace

from cluster import ClusterError, cluster_group, read_rank_vectors, select, select_representatives
from cluster.select import representatives
from launch import PINNED_MALLOC


@pytest.fixture(scope="module")
def uneven_trace(tmp_path_factory):
    # The premise of the tests below is that a rank's CPU time reflects its
    # work class.  On this shared 2-core machine a rank now and then runs a
    # whole trace 1.4-2.5x slower in CPU time too (a co-runner on the same
    # physical core or memory bus), which is a genuinely different vector, so
    # such a trace is retaken (at most three times) rather than tested
    # against.  Undisturbed traces keep each class's totals within 11 % of
    # each other.  What the clustering cuts on is the distance between span
    # vectors (Manhattan), which a time slice lost in one span raises while
    # the totals stay close: so the premise checked is that no two members
    # of a work class are further apart than 80 % of the cut.
    # The allocator is pinned (every temporary from the heap, never
    # trimmed): left to glibc's dynamic thresholds, this example's 2.4 MB
    # temporaries are faulted in again at every step or not depending on
    # the process's allocation history, which the tracer's own allocations
    # change (2x on whole ranks: bench/probes/heap_trim_probe.py); pinned, traced
    # and untraced computation agree (0.055 / 0.10 s per class, both).
    env = dict(mpi_env(), **PINNED_MALLOC)
    for _attempt in range(4):
        out = tmp_path_factory.mktemp("uneven") / "trace"
        trace(8, out, [EXAMPLES / "uneven.py", "--iters", "8", "--work", "300000",
                       "--classes", "2"], timeout=300, env=env)
        rv = read_rank_vectors(str(out))
        cut = float(HOST_THRESHOLD) * rv.table["total"].mean()
        apart = max(np.abs(rv.vectors[a] - rv.vectors[b]).sum()
                    for a in range(8) for b in range(a % 2, 8, 2))
        if apart < 0.8 * cut:
            break
    return out


# 8 ranks on 2 cores: a rank's CPU time still varies by up to ~15 % (caches
# refilled after every time slice), so the cut (35 % of the mean total) sits
# well below the gap between the 1- and 2-unit classes (~67 % of the mean)
# but above that noise; enough work per rank (~0.1-0.2 s) that a time
# slice lost to another process does not decide the clusters
HOST_THRESHOLD = "0.35"


def test_uneven_example_yields_its_work_classes(uneven_trace):
    reps = select_representatives(str(uneven_trace), threshold=float(HOST_THRESHOLD))
    assert list(reps["rank"]) == list(range(8))
    assert reps["group"].nunique() == 1          # a ring: one communication pattern
    # the clusters are exactly the work classes rank % 2
    by_class = reps.groupby(reps["rank"] % 2)["cluster"].agg(set)
    assert all(len(c) == 1 for c in by_class), reps
    assert reps["cluster"].nunique() == 2
    for _c, g in reps.groupby("cluster"):
        rep = g["representative"].iloc[0]
        assert rep in set(g["rank"])             # a representative from each class
    # what the cut guarantees (complete linkage, Manhattan distance): no
    # member's total is further from its representative's than the cut;
    # how close they come depends on the host's noise, so no tighter bound
    cut = float(HOST_THRESHOLD) * reps["total"].mean()
    assert (reps["total"] - reps["rep_total"]).abs().max() <= cut * (1 + 1e-9)


def test_cli_writes_tables_summary_and_dendrogram(uneven_trace, tmp_path):
    out = tmp_path / "reps.csv"
    p = run([sys.executable, "-m", "cluster", str(uneven_trace), "-o", str(out),
             "--threshold", HOST_THRESHOLD, "--plot", str(tmp_path / "dendro.png")])
    assert "2 cluster(s)" in p.stdout and "clustering error" in p.stdout
    reps = pd.read_csv(out)
    assert list(reps.columns[:4]) == ["rank", "group", "cluster", "representative"]
    summ = pd.read_csv(tmp_path / "reps_summary.csv")
    assert summ["size"].sum() == 8 and set(summ.columns) >= {"size", "representative", "spread"}
    png = (tmp_path / "dendro.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10000
    # a much coarser cut merges the classes; the reported error shows it
    p = run([sys.executable, "-m", "cluster", str(uneven_trace), "-o", str(out),
             "--threshold", "2"])
    assert "1 cluster(s)" in p.stdout
    assert pd.read_csv(out)["error"].max() > 0.3


def test_jacobi_groups_follow_the_grid_position(tmp_path):
    trace(4, tmp_path / "t", [EXAMPLES / "jacobi.py", "--n", "64", "--iters", "10"])
    rv = read_rank_vectors(str(tmp_path / "t"))
    # 2x2 grid: every rank is a different corner (different null neighbours)
    assert rv.table["signature"].nunique() == 4
    rv = read_rank_vectors(str(tmp_path / "t"), peer_mode="none")
    assert rv.table["signature"].nunique() == 1
    assert (rv.table["length"] == rv.table["length"].iloc[0]).all()


def _groups(trace_dir) -> list[set]:
    table = read_rank_vectors(str(trace_dir)).table
    return sorted((set(g) for g in table.groupby("signature")["rank"].agg(list)), key=min)


def test_places_in_mpi4pys_object_collectives_are_roles_where_they_weigh(tmp_path):
    """The tracer counts mpi4py's pickling inside an object collective as time
    in the call, so only the signature can keep a root from being
    represented by a leaf, and lose its unpickling."""
    # gather of 0.9 MB lists to rank 1 (the root unpickles them all), then an
    # allreduce of a float (rank 0 receives most, but a few bytes: no role)
    trace(4, tmp_path / "g", [APPS / "object_gather.py", "--items", "100000",
                              "--iters", "2"])
    assert _groups(tmp_path / "g") == [{0, 2, 3}, {1}]
    table = read_rank_vectors(str(tmp_path / "g")).table
    assert table.loc[table["roles"] > 0, "rank"].tolist() == [1]
    # the same with 9 KB lists: nobody's place weighs, one group
    trace(4, tmp_path / "s", [APPS / "object_gather.py", "--items", "1000", "--iters", "2"])
    assert _groups(tmp_path / "s") == [{0, 1, 2, 3}]
    # allreduce of 1 MiB: mpi4py's rank r receives once per zero bit of r
    # (2, 1, 1 and 0 partial results on 4 ranks)
    trace(4, tmp_path / "a", [APPS / "object_allreduce.py", "objects", "2"])
    assert _groups(tmp_path / "a") == [{0}, {1, 2}, {3}]
    reps = select_representatives(str(tmp_path / "a"))
    assert set(reps.loc[reps["rank"].isin([0, 3]), "representative"]) == {0, 3}
    # a user short of replay time turns the roles off: one group again
    out = run([sys.executable, "-m", "cluster", str(tmp_path / "a"), "-o",
               str(tmp_path / "off.csv"), "--object-roles", "off"]).stdout
    assert "1 group(s)" in out and "place in mpi4py" not in out
    assert pd.read_csv(tmp_path / "off.csv")["group"].nunique() == 1


def test_incomplete_trace_is_refused_naming_ranks(tmp_path):
    out = tmp_path / "t"
    trace(3, out, [APPS / "crash.py", "raise"], check=False, timeout=120)
    with pytest.raises(ClusterError, match=r"incomplete trace: rank\(s\) \[[0-9, ]*1"):
        read_rank_vectors(str(out))
    p = run([sys.executable, "-m", "cluster", str(out), "-o", str(tmp_path / "r.csv")],
            check=False)
    assert p.returncode == 2 and "incomplete trace" in p.stderr
    assert not (tmp_path / "r.csv").exists()
    with pytest.raises(ClusterError, match="no such trace directory"):
        read_rank_vectors(str(tmp_path / "missing"))


# ---- synthetic tables: the algorithm itself ----------------------------------

def synthetic(groups, m=50, seed=0, noise=1e-4):
    """groups: list of (signature, [level, level, ...]) -> table, vectors."""
    rng = np.random.default_rng(seed)
    rows, vectors, rank = [], {}, 0
    for sig, levels in groups:
        for lev in levels:
            vectors[rank] = np.full(m, lev / m) + rng.normal(0, noise, m).clip(-lev / m)
            rows.append((rank, sig, m))
            rank += 1
    return pd.DataFrame(rows, columns=["rank", "signature", "length"]), vectors


def test_groups_then_clusters_with_centroid_representatives():
    table, vec = synthetic([("a", [1, 1, 1, 2, 2]), ("b", [1, 1, 3])])
    reps = select(table, vec)
    assert list(reps["group"]) == [0] * 5 + [1] * 3
    assert list(reps["cluster"]) == [0, 0, 0, 1, 1, 2, 2, 3]
    for _c, g in reps.groupby("cluster"):
        X = np.vstack([vec[r] for r in g["rank"]])
        centroid = X.mean(axis=0)
        d = np.abs(X - centroid).sum(axis=1)
        assert g["representative"].iloc[0] == g["rank"].iloc[int(np.argmin(d))]
    assert reps["error"].max() < 0.01


def test_complete_linkage_bound_holds_for_every_pair():
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 1, (300, 20))
    cut = 2.0
    labels = cluster_group(X, cut)
    for c in np.unique(labels):
        M = X[labels == c]
        d = np.abs(M[:, None, :] - M[None, :, :]).sum(axis=2)
        assert d.max() <= cut + 1e-12


def test_two_stage_path_matches_exact_on_separated_data_and_keeps_bound():
    rng = np.random.default_rng(1)
    centers = rng.uniform(0, 100, (6, 30))
    X = np.vstack([c + rng.uniform(-0.05, 0.05, (200, 30)) for c in centers])
    exact = cluster_group(X, cut=10.0, max_exact=5000)
    staged = cluster_group(X, cut=10.0, max_exact=50)     # forces leaders
    assert len(np.unique(exact)) == 6
    assert (exact == staged).all()
    for c in np.unique(staged):
        M = X[staged == c]
        d = np.abs(M[:, None, :] - M[None, :, :]).sum(axis=2)
        assert d.max() <= 10.0


def test_identical_vectors_are_merged_before_clustering():
    X = np.repeat(np.array([[1.0, 2.0], [5.0, 5.0]]), 1000, axis=0)
    labels = cluster_group(X, cut=0.5, max_exact=10)      # 2 distinct rows only
    assert set(labels[:1000]) == {0} and set(labels[1000:]) == {1}
    assert list(representatives(X, labels)) == [0, 1000]


def test_bad_inputs_give_clear_errors():
    table, vec = synthetic([("a", [1, 1])])
    vec[1] = vec[1][:-1]
    with pytest.raises(ClusterError, match="cannot happen.*damaged"):
        select(table, vec)
    with pytest.raises(ClusterError, match="no ranks"):
        select(table.iloc[:0], vec)
    table, vec = synthetic([("a", [1, 1])])
    with pytest.raises(ClusterError, match="ward linkage needs"):
        select(table, vec, method="ward")
    with pytest.raises(ClusterError, match="unknown metric"):
        select(table, vec, metric="hamming-ish")
    assert select(table, vec, metric="euclidean", method="ward")["cluster"].nunique() == 1


def test_the_automatic_cut_finds_the_classes_where_the_fixed_one_over_splits(tmp_path):
    """From N=32 on, the fixed default cut split the odd class into
    singletons (cluster errors 14-31 %): the host's noise is not a constant.
    The default example, traced at 16 ranks on this 2-core host, yields its
    two work classes with the automatic cut, whatever the load: no cluster
    mixes the classes, and a few at most stand apart (the fixed cut made
    11-13 clusters of these traces).  Beside a CPU-bound neighbour some
    ranks run 1.2-1.5x their class's CPU time (genuinely different
    vectors, which the cut may keep apart); a trace with one at 1.4x or
    more is retaken, twice at most, as the uneven_trace fixture does.
    How many stand apart depends on the load; that the automatic cut
    splits less than the fixed one, on the same trace, does not."""
    for attempt in range(3):
        out = tmp_path / f"t{attempt}"
        trace(16, out, [EXAMPLES / "uneven.py", "--iters", "8", "--work", "60000",
                        "--classes", "2"], timeout=300)
        totals = read_rank_vectors(str(out)).table.set_index("rank")["total"]
        if (totals / totals.groupby(totals.index % 2).transform("median")).max() < 1.4:
            break
    p = run([sys.executable, "-m", "cluster", str(out), "-o", str(tmp_path / "r.csv")])
    assert "auto: in the clearest gap of the dendrogram" in p.stdout, p.stdout
    reps = pd.read_csv(tmp_path / "r.csv")
    classes = reps.groupby("cluster")["rank"].agg(lambda r: set(r % 2))
    assert all(len(c) == 1 for c in classes), p.stdout + reps.to_string()
    run([sys.executable, "-m", "cluster", str(out), "--threshold", "0.05", "-o",
         str(tmp_path / "fixed.csv")])
    fixed = pd.read_csv(tmp_path / "fixed.csv")["cluster"].nunique()
    assert reps["cluster"].nunique() < fixed, (p.stdout, fixed)


def test_a_gap_never_joins_ranks_further_apart_than_the_cut_allows(tmp_path):
    """A trace of the default example taken beside a test suite
    (tests/data/README.md): three of the eight 2-unit ranks ran 1.2-1.4x
    slower still, as far from the other five as those are from the 1-unit
    ranks.  The dendrogram's clearest gap set the three apart and joined
    the other five to the 1-unit class, 89 % from their representative.
    A gap may not join what the automatic cut's own ceiling (half the mean
    total) would keep apart: the classes stay apart."""
    p = run([sys.executable, "-m", "cluster", str(DATA / "uneven-16-ranks-loaded-host"),
             "-o", str(tmp_path / "r.csv")])
    reps = pd.read_csv(tmp_path / "r.csv")
    classes = reps.groupby("cluster")["rank"].agg(lambda r: set(r % 2))
    assert all(len(c) == 1 for c in classes), p.stdout + reps.to_string()
    assert reps["error"].max() < 0.5, p.stdout


def test_a_gap_needs_ranks_to_join_a_pair_above_the_noise(tmp_path):
    """A trace from a noisy 16-core virtual machine (tests/data/README.md):
    four ranks of uneven.py doing 1, 2, 3 and 1 units per iteration, the 2-
    and 3-unit ranks only 27 % apart in CPU time.  Above the noise cut the
    dendrogram has one merge inside the would-be class and one between the
    classes; reading that top merge as the clearest gap joined ranks 1 and
    2, and rank 1 stood for rank 2, the slowest, which sets the run's time
    (the prediction came out 29 % short).  Two ranks are no evidence of a
    class: each work class is its own cluster."""
    p = run([sys.executable, "-m", "cluster", str(DATA / "uneven-4-ranks-kvm16"),
             "-o", str(tmp_path / "r.csv")])
    assert "auto: in the clearest gap of the dendrogram" in p.stdout, p.stdout
    reps = pd.read_csv(tmp_path / "r.csv").set_index("rank")
    assert reps.loc[0, "cluster"] == reps.loc[3, "cluster"]
    assert reps["cluster"].nunique() == 3, reps
    assert reps.loc[2, "representative"] == 2 and reps["error"].max() < 0.1, reps


def test_gap_cut_separates_classes_not_slow_ranks():
    """Ranks slowed as a whole by up to 25 % (a busy core) look like ranks
    with more work, span by span; a class with twice the work still stands
    apart in the dendrogram's heights.  One class alone is not split."""
    from cluster.select import gap_cut
    rng = np.random.default_rng(3)
    base = rng.uniform(1, 2, 40)

    def ranks(n, work):
        slow = rng.uniform(1.0, 1.25, (n, 1))
        return work * base * slow * rng.normal(1, 0.03, (n, 40))
    two = np.vstack([ranks(48, 1.0), ranks(48, 2.0)])
    mean = two.sum(axis=1).mean()
    floor = 0.1 * mean                      # a noise-based cut that over-splits
    assert len(np.unique(cluster_group(two, floor))) > 2
    labels = cluster_group(two, gap_cut(two, floor))
    assert (labels[:48] == labels[0]).all() and (labels[48:] == labels[48]).all()
    assert labels[0] != labels[48]
    one = ranks(48, 1.0)
    assert len(np.unique(cluster_group(one, gap_cut(one, 0.1 * one.sum(axis=1).mean())))) <= 3


def test_light_classes_stay_apart_beside_a_heavy_one(tmp_path):
    """12 ranks on 2 cores, three classes doing 1, 3 and 9 units of work:
    the automatic cut, a fraction of the mean total over all ranks, joined
    the 1- and 3-unit classes (totals 0.021 and 0.036 s beside 0.099 s; 43 %
    clustering error).  Work that differs by half or more is never one
    cluster, whatever the other classes weigh: three clusters, each one
    class, every member within 1.5x of its representative."""
    trace(12, tmp_path / "t", [EXAMPLES / "uneven.py", "--iters", "6", "--work", "20000",
                               "--units", "1,3,9"], timeout=300)
    p = run([sys.executable, "-m", "cluster", str(tmp_path / "t"), "-o", str(tmp_path / "r.csv")])
    reps = pd.read_csv(tmp_path / "r.csv")
    classes = reps.groupby("cluster")["rank"].agg(lambda r: set(r % 3))
    assert all(len(c) == 1 for c in classes), p.stdout + reps.to_string()
    assert reps["cluster"].nunique() >= 3
    assert (reps["total"] / reps["rep_total"]).between(1 / 1.5, 1.5).all(), reps.to_string()


def test_split_by_magnitude_keeps_a_slowed_class_together():
    """Totals 1.7x apart split; ranks of one class slowed up to 1.4x (a busy
    core) stay one cluster; ranks that hardly compute do not split over
    their noise."""
    from cluster.select import split_by_magnitude
    X = np.array([[1.0], [1.05], [1.7], [1.75], [9.0], [9.0 * 1.4], [1e-6], [3e-6]])
    labels = np.array([0, 0, 0, 0, 1, 1, 2, 2])
    out = split_by_magnitude(X, labels, 1.5, 0.02 * X.sum(axis=1).mean())
    assert out[0] == out[1] != out[2] == out[3]
    assert out[4] == out[5] and out[6] == out[7]
    assert len(set(out)) == 4
