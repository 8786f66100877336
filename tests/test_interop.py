"""interop: LogGOPSim's GOAL schedules read (every form, line named at
fault, a stretch at a time) and SimGrid's time-independent export, checked
line by line and, where SimGrid is installed, replayed by SimGrid itself."""
import json
import os
import re
import shutil
import sys

import pytest
import yaml
from conftest import EXAMPLES, run, trace
from schedules import collective_schedule, platform

from contracts.trace import load_trace
from interop.goal import read_goal, write_goal
from netsim import ScheduleError
from netsim import run as simulate
from netsim.engine import CALC, RECV, SEND


def test_goal_reader_takes_every_form_and_names_the_line_at_fault(tmp_path):
    g = tmp_path / "forms.goal"
    g.write_text("// LogGOPSim's forms, comments, CRLF, suffixes\r\n"
                 "num_ranks 3\r\n"
                 "rank 0 {\n"
                 "l3 requires l2   // a dependency before the ops it names\n"
                 "l1: calc 1500 cpu 0\n"
                 "l2: send 64b to 2 tag 7 cpu 0 nic 0\n"
                 "l3:recv 8b from -1 tag 3\n"
                 "l4: send 16 to 1\n"
                 "l2 irequires l1\n"
                 "}\n"
                 "rank 1{\n"
                 "a: recv 16b from 0\n"
                 "}\n"
                 "rank 2 {\n"
                 "x: recv 64b from 0 tag 7\n"
                 "y: send 8b to 0 tag 3\n"
                 "y requires x\n"
                 "}\n")
    s = read_goal(str(g))
    assert s.nranks == 3 and list(s.rank) == [0, 0, 0, 0, 1, 2, 2]
    assert list(s.kind) == [CALC, SEND, RECV, SEND, RECV, RECV, SEND]
    assert list(s.peer) == [-1, 2, -1, 1, 0, 0, 0]
    assert list(s.size) == [0, 64, 8, 16, 16, 64, 8]
    assert list(s.tag) == [-1, 7, 3, 0, 0, 7, 3]
    assert s.dur[0] == pytest.approx(1.5e-6)
    # (required, requiring, after start?)
    assert sorted(zip(s.dep_src, s.dep_dst, s.dep_start)) == [(0, 1, True), (1, 2, False),
                                                            (5, 6, False)]
    assert simulate(s, platform()).predicted_time > 0
    bad = {
        "l1: calc 5\n": r"bad.goal:1: expected 'num_ranks N' first",
        "num_ranks 2\nrank 2 {\n}\n": r"bad.goal:2: rank beyond num_ranks 2",
        "num_ranks 2\nl1: calc 5\n": r"bad.goal:2: operation outside a 'rank N \{' block",
        "num_ranks 2\nrank 0 {\nl1: sned 8b to 1\n}\n": r"bad.goal:3: cannot parse 'l1: sned",
        "num_ranks 2\nrank 0 {\nl1: calc 5\nl2 requires l9\n}\n":
            r"bad.goal:4: dependency on a label its rank does not define: 'l2 requires l9'",
        "num_ranks 2\nrank 0 {\nl1: calc 5\nl1: calc 6\n}\n":
            r"bad.goal:4: label defined twice in its rank",
        "num_ranks 2\nrank 0 {\nl1: calc 5\n": r"bad.goal:2: this rank block is not closed",
        "// nothing\n": r"bad.goal: empty GOAL file",
        "num_ranks 2\nrank 0 {\nl1:recv 8b from 5\n}\n": r"bad.goal:3: peer 5 out of range",
        "num_ranks 2\nrank 0 {\nl1: calc 5\nl2: calc 5\nl2 requires l1 l1\n}\n":
            r"bad.goal:5: cannot parse 'l2 requires l1 l1'",
        "num_ranks 2\nrank 0 { 1\n}\n": r"bad.goal:2: cannot parse",
    }
    for text, message in bad.items():
        (tmp_path / "bad.goal").write_text(text)
        with pytest.raises(ScheduleError, match=message):
            read_goal(str(tmp_path / "bad.goal"))
    # labels are per rank: rank 1 cannot require rank 0's l1
    (tmp_path / "bad.goal").write_text("num_ranks 2\nrank 0 {\nl1: calc 5\n}\n"
                                       "rank 1 {\nl2: calc 5\nl2 requires l1\n}\n")
    with pytest.raises(ScheduleError, match=r"bad.goal:7: dependency on a label"):
        read_goal(str(tmp_path / "bad.goal"))
    (tmp_path / "bad.goal").write_text("num_ranks 2\nrank 0 {\nl1: send 8b to 1 tag "
                                       "4294967296\n}\n")
    with pytest.raises(ScheduleError, match=r"bad.goal:3: tag out of range"):
        read_goal(str(tmp_path / "bad.goal"))
    # a comment may start inside a word; a line of blanks and a comment is empty
    (tmp_path / "c.goal").write_text("num_ranks 1\nrank 0{// block\nl1: calc 5//ns\n \t\n"
                                     "  // only a comment\nl2: send 8b to 0 tag 1//x\n}\n")
    s = read_goal(str(tmp_path / "c.goal"))
    assert list(s.dur * 1e9) == pytest.approx([5, 0]) and list(s.tag) == [-1, 1]
    (tmp_path / "bad.goal").write_text("")
    with pytest.raises(ScheduleError, match=r"bad.goal: empty GOAL file"):
        read_goal(str(tmp_path / "bad.goal"))


def test_goal_read_a_stretch_at_a_time_is_the_same_schedule(tmp_path, monkeypatch):
    """The reader pauses between rank blocks once it has read CHUNK bytes and
    lets go of the text behind: with a tiny CHUNK (a pause after every
    block) the schedule, and the line an error names, are the same."""
    import interop.goal
    s = collective_schedule("allreduce", "rabenseifner", 6, 4096)
    write_goal(tmp_path / "s.goal", s)
    whole = read_goal(str(tmp_path / "s.goal"))
    monkeypatch.setattr(interop.goal, "CHUNK", 16)
    pieces = read_goal(str(tmp_path / "s.goal"))
    for col in ("kind", "rank", "peer", "size", "tag", "dur", "dep_src", "dep_dst", "dep_start"):
        assert list(getattr(pieces, col)) == list(getattr(whole, col)), col
    assert len(whole) == len(s) and len(whole.dep_src) == len(s.dep_src)
    lines = (tmp_path / "s.goal").read_text().splitlines()
    at = max(i for i, x in enumerate(lines) if x.startswith("rank 4"))
    lines.insert(at + 2, "l1: sned 8b to 1")
    (tmp_path / "bad.goal").write_text("\n".join(lines) + "\n")
    with pytest.raises(ScheduleError, match=rf"bad.goal:{at + 3}: cannot parse 'l1: sned"):
        read_goal(str(tmp_path / "bad.goal"))


def test_simgrid_time_independent_export(jacobi_trace, tmp_path):
    p = run([sys.executable, "-m", "netsim", str(jacobi_trace), "--platform",
             "config/platforms/ib-cluster.yaml", "-o", str(tmp_path / "p.json"),
             "--simgrid-out", str(tmp_path / "sg")])
    ev = load_trace(str(jacobi_trace)).events
    index = (tmp_path / "sg" / "index.txt").read_text().split()
    assert len(index) == 4
    for r in range(4):
        lines = (tmp_path / "sg" / f"rank{r}.txt").read_text().splitlines()
        assert lines[0] == f"{r} init" and lines[-1] == f"{r} finalize"
        mine = ev[ev["rank"] == r]
        acts = [x.split()[1] for x in lines]
        assert acts.count("isend") == ((mine.op == "isend") & (mine.peer >= 0)).sum()
        assert acts.count("irecv") == ((mine.op == "irecv") & (mine.peer >= 0)).sum()
        # SimGrid keys a request by (src, dst, tag): each completed one is
        # waited for by name, and every one started is completed
        started = {tuple(x.split()[2:4]) for x in lines if x.split()[1] == "isend"}
        waited = [x.split()[2:5] for x in lines if x.split()[1] == "wait"]
        assert len(waited) == acts.count("isend") + acts.count("irecv")
        assert {(d, t) for s, d, t in waited if s == str(r)} == started
        # the Cartesian grid is all ranks in world order: its Allreduce stays
        assert acts.count("allreduce") == (mine.op == "allreduce").sum() > 0
        total = sum(float(x.split()[2]) for x in lines if x.split()[1] == "compute")
        assert total == pytest.approx(mine.loc[mine.op != "init", "cpu"].sum() * 1e9, rel=1e-4)
    assert "left out" not in p.stderr


SMPIRUN = shutil.which("smpirun")


REPLAYER = "/usr/lib/x86_64-linux-gnu/simgrid/smpireplaymain"


@pytest.mark.skipif(SMPIRUN is None or not os.path.exists(REPLAYER),
                    reason="SimGrid's smpirun and replayer (Debian: libsimgrid-dev) not here")
@pytest.mark.parametrize("app, netsim_coll, simgrid_coll", [
    ([EXAMPLES / "jacobi.py", "--n", "64", "--iters", "20", "--check", "1000"],
     "analytic", "default"),
    (["-c", "import numpy as np\nfrom mpi4py import MPI\nw = MPI.COMM_WORLD\n"
      "for i in range(10): w.allreduce(1.0)\n"
      "for i in range(10): w.Allreduce(np.ones(1), np.empty(1))"],
     "recursive_doubling", "rdb")], ids=["halo-exchange", "allreduce"])
def test_an_exported_trace_replays_in_simgrid_as_netsim_predicts(tmp_path, app, netsim_coll,
                                                                 simgrid_coll):
    """SimGrid's own replay (smpirun -replay) of the export, on a cluster
    that the netsim platform describes alike (two 10 us, 1.25 GB/s links
    per route, not shared, as netsim's without contention; SMPI's bandwidth
    and latency factors set to 1, its eager limit 64 KiB, the same
    allreduce algorithm), ends within 1 % of
    netsim's prediction: a halo exchange of nonblocking point-to-point
    messages, and allreduces (of objects: as mpi4py runs them, a binomial
    reduce and broadcast of the sizes and of the pickles; of buffers:
    recursive doubling), communication being most of each 1-3 ms run.
    Eager messages must travel as soon as they are sent in SimGrid too
    (smpi/async-small-thresh): by default a small message waits there for
    its receive to be posted, and SimGrid ended 20-140 us (up to 4 %) later
    depending on how the ranks arrived."""
    trace(4, tmp_path / "t", app)
    (tmp_path / "plat.xml").write_text(
        "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
        "<platform version=\"4.1\"><zone id=\"world\" routing=\"Full\">"
        "<cluster id=\"c\" prefix=\"node-\" suffix=\"\" radical=\"0-3\" speed=\"1Gf\" "
        "bw=\"1.25GBps\" lat=\"10us\" sharing_policy=\"FATPIPE\" loopback_bw=\"100GBps\" "
        "loopback_lat=\"0\"/>"
        "</zone></platform>\n")
    (tmp_path / "hosts").write_text("".join(f"node-{r}\n" for r in range(4)))
    (tmp_path / "matched.yaml").write_text(yaml.safe_dump({
        "name": "simgrid-matched", "nodes": 4, "cores_per_node": 1,
        "network": {"levels": [{"name": "link", "latency": 20e-6, "byte_time": 0.8e-9}],
                    "overhead": {"send": 0.0, "recv": 0.0}, "gap": 0.0,
                    "eager_limit": 65536, "contention": False},
        "collectives": {"default": netsim_coll}}))
    run([sys.executable, "-m", "netsim", str(tmp_path / "t"), "--platform",
         str(tmp_path / "matched.yaml"), "-o", str(tmp_path / "p.json"),
         "--simgrid-out", str(tmp_path / "sg")])
    predicted = json.loads((tmp_path / "p.json").read_text())["predicted_time"]
    p = run([SMPIRUN, "-np", "4", "-platform", "plat.xml", "-hostfile", "hosts", "-replay",
             str(tmp_path / "sg" / "index.txt"), "--cfg=smpi/bw-factor:0:1",
             "--cfg=smpi/lat-factor:0:1", "--cfg=smpi/send-is-detached-thresh:65536",
             "--cfg=smpi/async-small-thresh:65536",
             f"--cfg=smpi/allreduce:{simgrid_coll}", "--cfg=smpi/reduce:binomial",
             "--cfg=smpi/bcast:binomial_tree", REPLAYER], cwd=tmp_path, timeout=300)
    simulated = float(re.search(r"Simulation time ([0-9.eE+-]+)", p.stdout + p.stderr).group(1))
    assert simulated == pytest.approx(predicted, rel=0.01)
