"""calibrate: a target's network measured (calibrate measure) and fitted to
a platform file (calibrate fit), from real and from written measurements."""
import sys

import pandas as pd
import pytest
from conftest import APPS, host_lines, mpirun, run

from netsim import load_platform


def test_calibrate_fits_into_a_template(tmp_path):
    """fit --template: the user's machine with the measured innermost level."""
    rows = ["peer,bytes,one_way,what"] + [f"1,{n},{3e-6 + n * 0.5e-9!r},pingpong"
                                          for n in (0, 64, 4096)]
    (tmp_path / "pp.csv").write_text("\n".join(rows) + "\n")
    run([sys.executable, "-m", "calibrate", "fit", str(tmp_path / "pp.csv"),
         "--cores-per-node", "2", "--template", "config/platforms/ib-cluster.yaml",
         "-o", str(tmp_path / "p.yaml")])
    got, template = load_platform(str(tmp_path / "p.yaml")), load_platform(
        "config/platforms/ib-cluster.yaml")
    assert (got.name, got.nodes, got.cores_per_node) == ("ib-cluster", 256, 64)
    assert got.levels[1:] == template.levels[1:]
    # the template's per-message overheads are part of the measured one-way time
    o = template.o_send + template.o_recv
    assert got.levels[0].latency == pytest.approx(3e-6 - o, rel=1e-6)
    assert got.levels[0].byte_time == pytest.approx(0.5e-9, rel=1e-6)
    bad = run([sys.executable, "-m", "calibrate", "fit", str(tmp_path / "pp.csv"),
               "--cores-per-node", "2", "--template", str(tmp_path / "none.yaml"),
               "-o", str(tmp_path / "q.yaml")], check=False)
    assert bad.returncode == 2 and "none.yaml" in bad.stderr and not (tmp_path / "q.yaml").exists()


def test_calibrate_fits_eager_and_rendezvous_rates_apart(tmp_path):
    # a shared-memory MPI: small copies at 2 GB/s, large messages streamed at 5
    rows = ["peer,bytes,one_way,what"]
    for n in (0, 8, 64, 512, 4096, 32768):
        rows.append(f"1,{n},{3e-6 + n * 0.5e-9!r},pingpong")
    for n in (262144, 1048576, 4194304):
        rows.append(f"1,{n},{12e-6 + n * 0.2e-9!r},pingpong")
    (tmp_path / "pp.csv").write_text("\n".join(rows) + "\n")
    p = run([sys.executable, "-m", "calibrate", "fit", str(tmp_path / "pp.csv"),
             "--cores-per-node", "2", "-o", str(tmp_path / "p.yaml")])
    assert "5.00 GB/s over the eager limit" in p.stdout
    lv = load_platform(str(tmp_path / "p.yaml")).levels[0]
    assert lv.latency == pytest.approx(3e-6, rel=1e-6)
    assert lv.byte_time == pytest.approx(0.5e-9, rel=1e-6)
    assert lv.rendezvous_byte_time == pytest.approx(0.2e-9, rel=1e-6)
    assert load_platform(str(tmp_path / "p.yaml")).call_overhead == 0.0
    # with the binding's per-call cost measured (peer -1), it becomes the
    # platform's call overhead and comes off the per-message latency
    (tmp_path / "pp.csv").write_text("\n".join(rows + ["-1,0,5e-07,call"]) + "\n")
    p = run([sys.executable, "-m", "calibrate", "fit", str(tmp_path / "pp.csv"),
             "--cores-per-node", "2", "-o", str(tmp_path / "p.yaml")])
    assert "call overhead 0.500 us per call" in p.stdout
    plat = load_platform(str(tmp_path / "p.yaml"))
    assert plat.call_overhead == 5e-7
    assert plat.levels[0].latency == pytest.approx(2.5e-6, rel=1e-6)
    # an Iprobe count no MPI gives (the message was still on its way: cores
    # of a few per cent of a CPU) is left out with a note, not written into
    # a platform its own schema refuses
    (tmp_path / "pp.csv").write_text("\n".join(rows + ["-1,1541,0,probe_late"]) + "\n")
    p = run([sys.executable, "-m", "calibrate", "fit", str(tmp_path / "pp.csv"),
             "--cores-per-node", "2", "-o", str(tmp_path / "p.yaml")])
    assert "Iprobe missed an arrived message 1541 times" in p.stderr
    assert load_platform(str(tmp_path / "p.yaml")).probe_late_polls == 0
    # with the local copy and the two-rank collectives measured as well
    rows = rows + ["-1,0,5e-07,call"]
    rows += [f"-1,{n},{n * 0.1e-9 + 1e-7!r},copy" for n in (65536, 1048576, 4194304)]
    # the model's exchange of 8 bytes: 3 us + 8 * 0.5 ns = 3.004 us (the
    # call included); the timing loop costs 0.1 us of every measured call
    rows += ["-1,8,5e-06,sendrecv", "-1,8,6.104e-06,alltoall", "-1,8,4.604e-06,allgather",
             "-1,8,3.404e-06,allgather_inplace", "-1,0,1e-07,loop"]
    (tmp_path / "pp.csv").write_text("\n".join(rows) + "\n")
    p = run([sys.executable, "-m", "calibrate", "fit", str(tmp_path / "pp.csv"),
             "--cores-per-node", "2", "--alltoall-self-limit", "0", "-o", str(tmp_path / "p.yaml")])
    assert "local copy 10.00 GB/s + 1.200 us per copy" in p.stdout, p.stdout
    assert "alltoall: 1.800 us per call" in p.stdout, p.stdout
    plat = load_platform(str(tmp_path / "p.yaml"))
    assert plat.copy_byte_time == pytest.approx(0.1e-9, rel=1e-3)
    # allgather: in place, beyond the exchange; alltoall: net of the copy
    assert plat.copy_overhead == pytest.approx(1.2e-6, rel=1e-6)
    assert plat.collective_overhead == pytest.approx({"alltoall": 1.8e-6, "allgather": 0.3e-6})
    assert plat.levels[0].latency == pytest.approx(2.5e-6, rel=1e-6)
    assert plat.alltoall_self_limit == 0
    assert plat.pack_byte_time == 0.0          # no alltoallw rows
    # an Alltoallw of subarrays against the same bytes contiguous: 0.1 ns
    # per byte sent and received (the median over the sizes; the largest
    # size's cache misses do not move it)
    pack = []
    for n, extra in ((270336, 0.1e-9), (1081344, 0.1e-9), (4325376, 0.3e-9)):
        contig = 2e-6 + n * 0.1e-9
        pack += [f"-1,{n},{contig!r},alltoall_contig",
                 f"-1,{n},{contig + 2 * n * extra!r},alltoallw"]
    (tmp_path / "pp.csv").write_text("\n".join(rows + pack) + "\n")
    p = run([sys.executable, "-m", "calibrate", "fit", str(tmp_path / "pp.csv"),
             "--cores-per-node", "2", "--alltoall-self-limit", "0", "-o", str(tmp_path / "p.yaml")])
    assert "packing non-contiguous datatypes 0.100 ns per byte" in p.stdout, p.stdout
    assert "calibrate: note" not in p.stderr
    plat = load_platform(str(tmp_path / "p.yaml"))
    assert plat.pack_byte_time == pytest.approx(0.1e-9, rel=1e-6)
    # measured beside a neighbour's load, the contiguous transfer came out
    # the slower one: packing is charged nothing, and the fit says so
    slow = []
    for n in (270336, 1081344):
        contig = 2e-6 + n * 0.1e-9
        slow += [f"-1,{n},{3 * contig!r},alltoall_contig", f"-1,{n},{contig!r},alltoallw"]
    (tmp_path / "slow.csv").write_text("\n".join(rows + slow) + "\n")
    p = run([sys.executable, "-m", "calibrate", "fit", str(tmp_path / "slow.csv"),
             "--cores-per-node", "2", "-o", str(tmp_path / "slow.yaml")])
    assert "calibrate: note: the packed Alltoallw was not slower" in p.stderr, p.stderr
    assert load_platform(str(tmp_path / "slow.yaml")).pack_byte_time == 0.0
    # the packing rows are not two-rank collectives: the overheads stand
    assert plat.collective_overhead == pytest.approx({"alltoall": 1.8e-6, "allgather": 0.3e-6})
    # by default MPICH's alltoall sends its own 8 bytes to itself: counted
    # as a one-way trip less the call (2.504 us), not as the copy (1.2 us)
    p = run([sys.executable, "-m", "calibrate", "fit", str(tmp_path / "pp.csv"),
             "--cores-per-node", "2", "-o", str(tmp_path / "p.yaml")])
    plat = load_platform(str(tmp_path / "p.yaml"))
    assert plat.alltoall_self_limit == 32768
    assert plat.collective_overhead["alltoall"] == pytest.approx(0.496e-6, rel=1e-6)
    # the level keeps its measured curve; an exchange (both directions at
    # once) slower than the ping-pong beyond its fixed extra cost (1.5 us
    # up to 4 KiB) sets the curve there: 4 MiB exchanged at 2.5 GB/s
    assert plat.levels[0].one_way[1] == (8, pytest.approx(3.004e-6))
    ex = [f"1,{n},{3e-6 + n * 0.5e-9 + 1.5e-6!r},exchange" for n in (0, 8, 64, 512, 4096)]
    ex.append(f"1,4194304,{12e-6 + 4194304 * 0.4e-9 + 1.5e-6!r},exchange")
    (tmp_path / "pp.csv").write_text("\n".join(rows + ex) + "\n")
    run([sys.executable, "-m", "calibrate", "fit", str(tmp_path / "pp.csv"),
         "--cores-per-node", "2", "-o", str(tmp_path / "p.yaml")])
    curve = dict(load_platform(str(tmp_path / "p.yaml")).levels[0].one_way)
    assert curve[4194304] == pytest.approx(12e-6 + 4194304 * 0.4e-9, rel=1e-9)
    assert curve[1048576] == pytest.approx(12e-6 + 1048576 * 0.2e-9, rel=1e-9)
    assert curve[512] == pytest.approx(3e-6 + 512 * 0.5e-9, rel=1e-9)
    # a window's messages (stream) less the loop's own cost per message
    # (stream_loop, 0.3 us) make the level's stream curve; neither is a
    # two-rank collective
    assert load_platform(str(tmp_path / "p.yaml")).levels[0].stream is None
    st = [f"1,{n},{1e-6 + n * 0.15e-9!r},stream" for n in (8, 4096, 4194304)]
    (tmp_path / "pp.csv").write_text("\n".join(rows + ex + st + ["-1,8,3e-07,stream_loop"]) + "\n")
    run([sys.executable, "-m", "calibrate", "fit", str(tmp_path / "pp.csv"),
         "--cores-per-node", "2", "-o", str(tmp_path / "p.yaml")])
    plat = load_platform(str(tmp_path / "p.yaml"))
    assert dict(plat.levels[0].stream) == pytest.approx(
        {n: 0.7e-6 + n * 0.15e-9 for n in (8, 4096, 4194304)}, rel=1e-9)
    assert plat.collective_overhead["alltoall"] == pytest.approx(0.496e-6, rel=1e-6)


def test_calibration_sends_written_data_on_ordinary_pages():
    """The curve is measured from buffers like an application's: holding
    data (a never-written np.zeros is one shared zero page, sent from
    cache 30 % faster at 1 MiB) and on 4 KiB pages (NumPy puts arrays from
    4 MiB up on transparent huge pages, which MPICH copied 30 % faster)."""
    from calibrate.measure import message_buffer
    n = 8 << 20
    buf = message_buffer(n)
    assert len(buf) == n and buf.min() == 1 and len(message_buffer(0)) == 0
    rss, huge = _smaps_over(buf.ctypes.data, n)
    assert rss >= n // 1024                      # written: resident (kB)
    assert huge == 0


def _smaps_over(addr: int, n: int) -> tuple[int, int]:
    """(Rss, AnonHugePages) in kB of this process's mappings that overlap
    [addr, addr + n) (madvise splits a huge-page region into several)."""
    rss = huge = 0
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            lo, dash, hi = head.partition("-")
            if dash and all(c in "0123456789abcdef" for c in lo + hi):
                inside = int(lo, 16) < addr + n and addr < int(hi, 16)
            elif inside and head == "Rss:":
                rss += int(line.split()[1])
            elif inside and head == "AnonHugePages:":
                huge += int(line.split()[1])
    return rss, huge


def test_calibrate_fits_a_new_connections_warm_up(tmp_path):
    """The warmup rows' first half, beyond the median of the second half,
    becomes the level's warm-up over the first half's bytes (combined over
    several files), the first exchange's excess over the second apart (the
    connection's opening, paid by its first message); within 1 % of that
    half's time it is noise and none is written.  Each level has its own,
    from the rows of the peers it joins to rank 0."""
    mib = 1 << 20

    def fitted(*firsts, peer=1, cores=1, near=None):
        head = ["peer,bytes,one_way,what"] + [f"{q},{n},{1e-5 + n * 1e-8!r},pingpong"
                                              for q in range(1, peer + 1) for n in (0, 8, mib)]
        paths = []
        for i, first in enumerate(firsts):
            warm = [f"{peer},{mib},{t!r},warmup" for t in list(first) + [10e-3] * len(first)]
            warm += [f"1,{mib},{t!r},warmup" for t in list(near or [])
                     + [10e-3] * len(near or [])]
            paths.append(tmp_path / f"pp{i}.csv")
            paths[-1].write_text("\n".join(head[:1] + warm + head[1:]) + "\n")
        run([sys.executable, "-m", "calibrate", "fit", *map(str, paths), "--combine", "mean",
             "--cores-per-node", str(cores), "--nodes", "2", "-o", str(tmp_path / "p.yaml")])
        return [lv.warmup for lv in load_platform(str(tmp_path / "p.yaml")).levels]
    # the opening less the 1-byte message's one-way time (1e-5 s here),
    # which the first exchange's timing holds and an application's does not
    go = 1e-5
    assert fitted([17e-3, 14e-3, 13e-3, 12e-3])[-1] == \
        (4 * mib, pytest.approx(13e-3 + go), pytest.approx(3e-3 - go))
    assert fitted([17e-3, 14e-3, 13e-3, 12e-3], [13e-3, 12e-3, 11e-3, 12e-3])[-1] == \
        (4 * mib, pytest.approx(10e-3 + go), pytest.approx(2e-3 - go))
    # a steady warm-up, no opening cost: all of it spread over the bytes
    assert fitted([14e-3, 14e-3, 13e-3, 12e-3])[-1] == (4 * mib, pytest.approx(13e-3), 0.0)
    assert fitted([10.1e-3, 9.9e-3, 10.2e-3, 10.1e-3])[-1] is None
    # two cores a node: peer 1 shares rank 0's node, peer 2 is the network's
    node, fabric = fitted([40e-3, 14e-3, 13e-3, 12e-3], peer=2, cores=2,
                          near=[10.1e-3, 9.9e-3, 10.2e-3, 10.1e-3])
    assert node is None and \
        fabric == (4 * mib, pytest.approx(13e-3 + go), pytest.approx(26e-3 - go))


def test_calibrate_measures_the_eager_limit_one_sided_calls_and_late_probes(tmp_path):
    """MPICH on shared memory hands a Send over before the receive is posted
    only up to one 8 KiB cell less its header (8112 bytes; the platform said
    65536, so the simulator let 16 KiB sends of futures-julia's workers
    return before their receiver): measure bisects it, fit writes it unless
    --eager-limit says otherwise.  A one-sided call costs MPI's own work
    beyond the binding's call: measured, fitted as rma_overhead.  An Iprobe
    loop notices an arrived message one call late under MPICH."""
    raw = tmp_path / "pp.csv"
    mpirun(2, ["-m", "calibrate", "measure", "--repeats", "3", "-o", str(raw)])
    rows = pd.read_csv(raw)
    limit = int(rows.loc[rows["what"] == "eager_limit", "bytes"].iloc[0])
    assert 1024 <= limit < 1 << 22
    # first of all, the new connection's exchanges: 32 MiB of 4 MiB each way
    first = rows.head(8)
    assert (first["what"] == "warmup").all() and (first["peer"] == 1).all()
    assert (first["bytes"] == 1 << 22).all() and (rows["what"] == "warmup").sum() == 16
    for extra, want in (([], limit), (["--eager-limit", "65536"], 65536)):
        run([sys.executable, "-m", "calibrate", "fit", str(raw), "--cores-per-node", "2",
             "-o", str(tmp_path / "p.yaml")] + extra)
        assert load_platform(str(tmp_path / "p.yaml")).eager_limit == want
    rma, call = (float(rows.loc[rows["what"] == w, "one_way"].iloc[0]) for w in ("rma", "call"))
    assert 0 < rma < 1e-3
    fitted = load_platform(str(tmp_path / "p.yaml"))
    assert fitted.rma_overhead == pytest.approx(max(rma - call, 0.0))
    # MPICH's first Iprobe after a message came reports nothing (it only
    # queues it): measured as one late poll, fitted as probe_late_polls
    late = rows.loc[rows["what"] == "probe_late", "bytes"]
    assert list(late) == [1]
    assert fitted.probe_late_polls == 1
    # a rendezvous over an intercommunicator moves some KiB per sender call
    per_poll = int(rows.loc[rows["what"] == "intercomm_poll_bytes", "bytes"].iloc[0])
    assert 1024 <= per_poll <= 1 << 17
    assert fitted.intercomm_poll_bytes == per_poll
    # a blocking Send of limit bytes returns with its receiver late, one
    # more byte waits for it
    p = mpirun(2, [APPS / "eager_probe.py", limit])
    assert host_lines(p.stdout, "rank 0")[0].split()[2:] == ["eager", "waited"], p.stdout


def test_calibrated_curve_never_falls_with_size(tmp_path):
    """Measured one after the other, the small sizes' trips read 2.3-3.2 us
    in no order (the machine drifting between them; the simulator then
    priced a 1-byte alltoall's self message 0.5 us above its 2-byte
    exchange): fit pools points out of order to their mean."""
    pts = {0: 3.0, 1: 2.8, 2: 2.2, 4: 2.6, 8: 2.4, 64: 2.6, 4096: 3.7, 8192: 7.8, 16384: 7.4,
           65536: 12.0}
    rows = ["peer,bytes,one_way,what"] + [f"1,{n},{t * 1e-6!r},pingpong" for n, t in pts.items()]
    (tmp_path / "pp.csv").write_text("\n".join(rows) + "\n")
    run([sys.executable, "-m", "calibrate", "fit", str(tmp_path / "pp.csv"),
         "--cores-per-node", "2", "-o", str(tmp_path / "p.yaml")])
    curve = load_platform(str(tmp_path / "p.yaml")).levels[0].one_way
    t = [v * 1e6 for _, v in curve]
    assert t == pytest.approx([2.6] * 6 + [3.7, 7.6, 7.6, 12.0])


def test_calibrate_times_trips_after_work_apart_from_the_work(tmp_path):
    """measure --spacing: every ping-pong and exchange is timed alone after
    some work on both ranks, the work not in the time (20 ms of it against
    trips of microseconds on this host), and the measurement says so in a
    ``spacing`` row.  fit then prices the two-rank collectives, timed back
    to back, against the Sendrecv timed beside them, not against the
    after-work curve (which would make a 12 us Alltoall cost nothing)."""
    raw = tmp_path / "pp.csv"
    mpirun(2, ["-m", "calibrate", "measure", "--repeats", "3", "--max-bytes", "4",
               "--spacing", "0.02", "-o", str(raw)])
    rows = pd.read_csv(raw)
    assert rows.loc[rows["what"] == "spacing", "one_way"].tolist() == [0.02]
    trips = rows[rows["what"].isin(["pingpong", "exchange"])]
    assert sorted(set(trips["bytes"])) == [0, 1, 2, 4]
    assert (trips["one_way"] > 0).all() and (trips["one_way"] < 0.005).all(), trips
    bad = run([sys.executable, "-m", "calibrate", "measure", "--spacing", "-1",
               "-o", str(tmp_path / "x.csv")], check=False)
    assert bad.returncode == 2 and "--spacing" in bad.stderr

    def overhead(spaced: bool) -> float:
        lines = ["peer,bytes,one_way,what", "1,0,1e-3,pingpong", "1,8,1e-3,pingpong",
                 "1,4096,1.2e-3,pingpong", "-1,8,10e-6,sendrecv", "-1,8,12e-6,alltoall",
                 "-1,8,0.1e-6,loop"] + (["-1,0,0.02,spacing"] if spaced else [])
        (tmp_path / "w.csv").write_text("\n".join(lines) + "\n")
        run([sys.executable, "-m", "calibrate", "fit", str(tmp_path / "w.csv"),
             "--cores-per-node", "2", "-o", str(tmp_path / "w.yaml")])
        return load_platform(str(tmp_path / "w.yaml")).collective_overhead.get("alltoall", 0.0)
    assert overhead(False) == 0.0
    assert overhead(True) == pytest.approx(2e-6)


def test_calibrate_times_cpu_costs_in_a_virtual_cores_own_clock(tmp_path):
    """On a virtual core of share F (the emulated cluster's core script sets
    REPREPLAY_CORE_SHARE), the CPU costs (a call, a copy) are timed in the
    core's own clock, CPU seconds / F, as replay times computation there.
    Here F = 0.01 on a real core: they come out about 100 times a plain
    run's (in wall time they read a burst at the real CPU's speed, or a
    wait for the quota, at random)."""
    from conftest import mpi_env

    def measured(env) -> pd.DataFrame:
        raw = tmp_path / "pp.csv"
        mpirun(2, ["-m", "calibrate", "measure", "--repeats", "3", "--max-bytes", "4",
                   "-o", str(raw)], env=env)
        rows = pd.read_csv(raw)
        return rows.groupby("what")["one_way"].median()
    plain = measured(mpi_env())
    slow = measured(dict(mpi_env(), REPREPLAY_CORE_SHARE="0.01"))
    for what in ("call", "copy", "stream_loop"):
        assert slow[what] > 20 * plain[what], (what, slow[what], plain[what])


def test_every_pair_meets_once_in_the_tournament():
    """calibrate measure --only-pingpongs pairs the ranks round by round:
    every pair exactly once, no rank twice in a round, an odd count with
    one rank out each round."""
    from calibrate.measure import partner, rounds
    for size in range(1, 12):
        met = []
        for k in range(rounds(size)):
            seen = {r: partner(r, size, k) for r in range(size)}
            for r, o in seen.items():
                assert o is None or (o != r and seen[o] == r), (size, k, r, o)
            assert sum(o is None for o in seen.values()) == size % 2
            met += [(r, o) for r, o in seen.items() if o is not None and r < o]
        assert sorted(met) == [(a, b) for a in range(size) for b in range(a + 1, size)]


def test_calibrate_fit_moves_each_level_to_its_median_pair(tmp_path):
    """calibrate fit --peers: a real measurement of one peer per level (3
    ranks: rank 1 on rank 0's node of 2 cores, rank 2 across), a real
    small-message one of every pair (6 ranks, 3 nodes); each level's
    latency and curve move by its pairs' median intercept less its own; a
    file of rank 0's pairs alone (no rank column, as earlier versions
    wrote) moves them by rank 0's; a file with no ping-pongs is refused in
    one line."""
    import yaml

    from calibrate.fit import _line
    for name, n, only in (("pingpong1.csv", 3, []), ("peers1.csv", 6, ["--only-pingpongs"])):
        p = mpirun(n, ["-m", "calibrate", "measure", "--repeats", "1", "--max-bytes", "128",
                       *only, "-o", str(tmp_path / name)], timeout=300)
        assert p.returncode == 0, p.stderr
    peers = pd.read_csv(tmp_path / "peers1.csv")     # each pair's ping-pongs, nothing else
    assert set(peers["what"]) == {"pingpong"}
    pairs = sorted(set(zip(peers["rank"], peers["peer"])))
    assert pairs == [(a, b) for a in range(6) for b in range(a + 1, 6)]
    old = peers[peers["rank"] == 0].drop(columns="rank")
    old.to_csv(tmp_path / "rank0.csv", index=False)

    def intercept(csv, a, b):
        d = pd.read_csv(csv)
        d = d[(d["what"] == "pingpong") & (d["peer"] == b) &
              ((d["rank"] == a) if "rank" in d.columns else (a == 0))]
        return _line(d.groupby("bytes", as_index=False)["one_way"].min())[0]
    node = [(0, 1), (2, 3), (4, 5)]
    for csv, by_level in ((tmp_path / "peers1.csv", (node, [q for q in pairs if q not in node])),
                          (tmp_path / "rank0.csv", ([(0, 1)], [(0, q) for q in range(2, 6)]))):
        levels = {}
        for key, extra in (("before", []), ("after", ["--peers", str(csv)])):
            out = tmp_path / f"{key}.yaml"
            p = run([sys.executable, "-m", "calibrate", "fit", str(tmp_path / "pingpong1.csv"),
                     "--cores-per-node", "2", "--nodes", "3", *extra, "-o", str(out)])
            levels[key] = yaml.safe_load(out.read_text())["network"]["levels"]
            said = p.stderr
        for i, (mine, own) in enumerate(zip(by_level, (1, 2))):
            lv0, lv1 = levels["before"][i], levels["after"][i]
            typical = float(pd.Series([intercept(csv, a, b) for a, b in mine]).median())
            shift = typical - intercept(tmp_path / "pingpong1.csv", 0, own)
            assert lv1["latency"] == pytest.approx(max(lv0["latency"] + shift, 0.0), abs=1e-12)
            assert [t for _, t in lv1["one_way"]] == pytest.approx(
                [max(t + shift, 0.0) for _, t in lv0["one_way"]], abs=1e-12)
            assert f"{lv1['name']} {shift * 1e3:+.3f} ms (median of {len(mine)} pairs" in said
    pd.read_csv(tmp_path / "pingpong1.csv").query("what != 'pingpong'").to_csv(
        tmp_path / "none.csv", index=False)
    p = run([sys.executable, "-m", "calibrate", "fit", str(tmp_path / "pingpong1.csv"),
             "--cores-per-node", "2", "--nodes", "3", "--peers", str(tmp_path / "none.csv"),
             "-o", str(tmp_path / "x.yaml")], check=False)
    assert p.returncode == 2 and "no ping-pongs of a pair" in p.stderr
    assert "Traceback" not in p.stderr and not (tmp_path / "x.yaml").exists()


def test_a_pairs_file_whose_rank_column_is_wrong_is_refused(tmp_path):
    """calibrate fit --peers refuses a pairs file whose rank is its peer
    (or negative) in one line naming the file, and writes nothing."""
    good = tmp_path / "pingpong.csv"
    good.write_text("peer,bytes,one_way,what\n1,0,1e-6,pingpong\n1,8,2e-6,pingpong\n")
    bad = tmp_path / "pairs.csv"
    bad.write_text("peer,bytes,one_way,what,rank\n1,0,1e-6,pingpong,1\n")
    p = run([sys.executable, "-m", "calibrate", "fit", str(good), "--cores-per-node", "2",
             "--peers", str(bad), "-o", str(tmp_path / "x.yaml")], check=False)
    assert p.returncode == 2 and f"{bad}: column rank must hold the timing rank" in p.stderr
    assert "Traceback" not in p.stderr and not (tmp_path / "x.yaml").exists()
