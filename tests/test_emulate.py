"""The emulated cluster target (python -m emulate): placement of ranks,
links that really are shaped, nothing left behind, and the workflow
calibrating and validating on it.

The cluster tests need root, unshare, ip and tc; each runs isolated in a
private network and mount namespace (emulate.isolate), so the machine's
own network and /run are untouched whatever happens; elsewhere they are
skipped."""
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import ROOT, mpirun, run

from emulate import Cluster, EmulateError, command, placement
from emulate.__main__ import parse_rate
from emulate.isolate import available

PY = sys.executable
EMULATE = [PY, "-m", "emulate"]
WHY = available()
needs_isolation = pytest.mark.skipif(WHY is not None, reason=f"emulated cluster: {WHY}")


def host_network() -> tuple[str, str]:
    """The machine's interfaces and named namespaces, to compare before and after."""
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    spaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return links, spaces


def test_ranks_fill_node_after_node():
    c = Cluster("t", nodes=3, cores_per_node=2, rate=1e9)
    assert placement(c, 5) == [2, 2, 1]
    assert placement(c, 2) == [2]
    with pytest.raises(EmulateError, match="3 nodes x 2 cores = 6 ranks"):
        placement(c, 7)
    cmd = command(c, 3, ["python", "app.py"], mpiexec="mpiexec")
    # hydra's MPMD form, one part per node, MPICH forced onto the network
    assert cmd[cmd.index("MPIR_CVAR_NOLOCAL") + 1] == "1"
    parts = " ".join(cmd).split(" : ")
    assert len(parts) == 2
    assert parts[0].endswith("-n 2 ip netns exec rr-t-n0 python app.py")
    assert parts[1] == "-n 1 ip netns exec rr-t-n1 python app.py"


def test_rates_and_bad_requests_are_explained():
    assert parse_rate("1gbit") == 1e9 and parse_rate("100mbit") == 1e8
    assert parse_rate("2.5e9") == 2.5e9 and parse_rate("10g") == 1e10
    p = run(EMULATE + ["up", "--nodes", "2", "--rate", "fast"], check=False)
    assert p.returncode == 2 and "a rate such as 1gbit" in p.stderr
    p = run(EMULATE + ["up", "--name", "Bad-Name", "--nodes", "2", "--rate", "1g"], check=False)
    assert p.returncode == 2 and "1 to 8 lower-case letters or digits" in p.stderr
    p = run(EMULATE + ["mpiexec", "--name", "nosuch", "-n", "2", "true"], check=False)
    assert p.returncode == 2 and "no emulated cluster 'nosuch'" in p.stderr


PINGPONG = textwrap.dedent("""
    import json, subprocess, sys, time
    import numpy as np
    from mpi4py import MPI
    w = MPI.COMM_WORLD
    buf = np.zeros(1 << 20, np.uint8)
    w.Barrier()
    t0 = MPI.Wtime()
    for _ in range(3):
        if w.rank == 0:
            w.Send(buf, 1); w.Recv(buf, 1)
        else:
            w.Recv(buf, 0); w.Send(buf, 0)
    one_way = (MPI.Wtime() - t0) / 6
    # 8 KiB after the link was idle: a NIC still needs its wire time
    small = buf[:8192]
    w.Barrier()
    time.sleep(0.05)
    t0 = MPI.Wtime()
    if w.rank == 0:
        w.Send(small, 1); w.Recv(small[:1], 1)
    else:
        w.Recv(small, 0); w.Send(small[:1], 0)
    after_idle = MPI.Wtime() - t0
    addr = subprocess.run(["ip", "-br", "addr", "show", "eth0"], capture_output=True,
                          text=True).stdout.split()[2]
    with open(f"{sys.argv[1]}/rank{w.rank}.json", "w") as f:    # ranks' lines would mix
        json.dump({"rank": w.rank, "one_way": one_way, "after_idle": after_idle,
                   "addr": addr}, f)
""")


@needs_isolation
def test_ranks_talk_over_shaped_links_and_nothing_is_left(tmp_path):
    app = tmp_path / "pingpong.py"
    app.write_text(PINGPONG)
    before = host_network()
    p = run(EMULATE + ["run", "--nodes", "2", "--rate", "100mbit", "--",
                       "sh", "-c", f'"$EMULATE_MPIEXEC" -n 2 {PY} {app} {tmp_path}'],
            timeout=120)
    rows = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert sorted(r["rank"] for r in rows) == [0, 1]
    # one rank per node: two addresses of the emulated network
    assert len({r["addr"] for r in rows}) == 2
    assert all(r["addr"].startswith("10.200.0.") for r in rows)
    # 1 MiB over a 100 Mbit/s link takes at least its 84 ms on the wire
    # (shared memory: well under 1 ms); a busy machine only adds to it
    assert min(r["one_way"] for r in rows) > 0.9 * (1 << 20) * 8 / 1e8
    # and 8 KiB after an idle spell at least half its 655 us: the token
    # bucket holds two frames, not the 16 KiB that once let it through free.
    # Rank 0's round trip: rank 1 starts its clock after its own sleep, and
    # on a busy machine the message can be in before it does (199 us seen)
    assert rows[0]["after_idle"] > 0.5 * 8192 * 8 / 1e8
    assert "removed 3 namespaces" in p.stdout + p.stderr
    assert host_network() == before


@needs_isolation
def test_a_failed_bring_up_removes_what_it_made(tmp_path):
    # a tc that fails, as on a kernel without tbf: up stops naming the
    # command, and no namespace of the half-made cluster remains
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "tc").write_text("#!/bin/sh\necho 'Error: Specified qdisc kind is unknown.' >&2\n"
                             "exit 2\n")
    (fake / "tc").chmod(0o755)
    script = tmp_path / "fail.py"
    script.write_text(textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(ROOT)!r})
        from emulate import Cluster, EmulateError, up
        from emulate.cluster import existing
        from emulate.isolate import enter
        enter()
        os.environ["PATH"] = {str(fake)!r} + os.pathsep + os.environ["PATH"]
        try:
            up(Cluster("half", 3, 1, 1e9))
        except EmulateError as e:
            print("refused:", e)
        print("left:", existing("half"), os.path.exists("/run/repreplay-emulate/half"))
    """))
    before = host_network()
    p = run(EMULATE[:1] + ["-c", "import sys; from emulate.isolate import isolated; "
                                 f"sys.exit(isolated([sys.executable, {str(script)!r}]))"],
            timeout=60)
    assert "refused:" in p.stdout and "qdisc kind is unknown" in p.stdout
    assert "left: [] False" in p.stdout
    assert host_network() == before


@needs_isolation
def test_a_killed_run_leaves_nothing():
    before = host_network()
    proc = subprocess.Popen(EMULATE + ["run", "--nodes", "2", "--rate", "1gbit", "--",
                                       "sleep", "60"], stdout=subprocess.PIPE, text=True,
                            start_new_session=True, cwd=ROOT)
    assert "launcher" in proc.stdout.readline()        # the cluster is up
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    time.sleep(0.5)
    assert host_network() == before


@needs_isolation
def test_workflow_calibrates_and_validates_on_the_emulated_cluster(tmp_path):
    res = tmp_path / "results"
    launcher = Cluster("emu", 2, 1, 1e9).mpiexec        # where `emulate run` puts it
    config = {"results": str(res), "ranks": 2,
              "app": {"script": "examples/jacobi.py", "args": ["--n", "256", "--iters", "40"]},
              "platforms": ["calibrated"],
              "calibrate": {"enabled": True, "ranks": 2, "cores_per_node": 1, "nodes": 2,
                            "max_bytes": 65536},
              "validate": {"enabled": True, "platform": "calibrated", "repeats": 1},
              "target": {"mpiexec": launcher}}
    (tmp_path / "config.yaml").write_text(json.dumps(config))     # JSON is YAML
    run(EMULATE + ["run", "--nodes", "2", "--rate", "1gbit", "--", PY, "-m", "snakemake",
                   "-c2", "--configfile", str(tmp_path / "config.yaml")], timeout=900)
    from netsim import load_platform
    plat = load_platform(str(res / "calibrate" / "calibrated.yaml"))
    fabric = plat.levels[-1]
    # the calibration measured the emulated link, not this machine's
    # shared memory: 64 KiB take at least their time on a 1 Gbit/s wire
    assert plat.nodes == 2 and fabric.name == "fabric"
    size, seconds = fabric.one_way[-1]
    assert size == 65536 and seconds > 0.9 * 65536 * 8 / 1e9
    v = json.loads((res / "validate.json").read_text())
    assert v["ranks"] == 2 and v["measured"] > 0 and v["platform"] == "calibrated"


# --- virtual cores (emulate.cores) -------------------------------------------

def test_virtual_cores_are_placed_and_refused_when_they_do_not_fit():
    from emulate.cores import CoreError, check_fits, period_us
    from emulate.launch import split_mpiexec_args
    c = Cluster("v", nodes=2, cores_per_node=2, rate=1e9, core_share=0.2, core_period=10000)
    cmd = " ".join(command(c, 3, ["python", "app.py"], mpiexec="mpiexec"))
    # every rank enters its core (node's first rank and core given) before its node
    node0, node1 = cmd.split(" : ")
    assert node0.endswith("-n 2 -env EMULATE_RANK0 0 -env EMULATE_CORE0 0 "
                          f"{c.core} - ip netns exec rr-v-n0 python app.py")
    assert node1 == (f"-n 1 -env EMULATE_RANK0 2 -env EMULATE_CORE0 2 {c.core} - "
                     "ip netns exec rr-v-n1 python app.py")
    # -ppn: fewer ranks per node than cores, as mpiexec takes it
    assert split_mpiexec_args(["-n", "2", "-ppn", "1", "a.out", "-x"]) == (2, 1, ["a.out", "-x"])
    assert placement(c, 2, per_node=1) == [1, 1]
    with pytest.raises(EmulateError, match="-ppn 3: between 1 and the 2 cores"):
        placement(c, 2, per_node=3)
    # the quota period: 10 ms, longer where the quota would be under 1 ms
    assert period_us(0.2) == 10000 and period_us(0.05) == 20000
    with pytest.raises(CoreError, match="a share of 0.05 needs at least 20000 us"):
        period_us(0.05, 10000)
    with pytest.raises(CoreError, match="16 virtual cores at 0.5 of a core need 8 CPUs"):
        check_fits(16, 0.5, 2)
    with pytest.raises(CoreError, match="between 0 and 1"):
        check_fits(2, 1.5, 2)
    # the command line refuses before it makes anything
    p = run(EMULATE + ["up", "--nodes", "32", "--core-share", "0.5", "--rate", "1g"],
            check=False)
    assert p.returncode == 2 and "virtual cores at 0.5 of a core need 16 CPUs" in p.stderr


def test_replay_reports_a_virtual_cores_spans_in_its_own_clock(monkeypatch):
    from emulate.cores import PERIOD_ENV, SHARE_ENV
    from replay.run import on_core_share
    # (seq, op, wall span, CPU span, polls, CPU of the polls)
    rows = [(1, "Send", 0.5, 0.05, 0, 0.0), (2, "Recv", 0.7, 0.1, 3, 0.02),
            (3, "Wait", 2.5, 0.1, 0, 0.0)]
    monkeypatch.delenv(SHARE_ENV, raising=False)
    assert on_core_share(rows) == rows
    monkeypatch.setenv(SHARE_ENV, "0.1")
    monkeypatch.setenv(PERIOD_ENV, "0.01")
    out = on_core_share(rows)
    # CPU / F, whatever the wall span says within a period of it (the
    # quota's pauses fell in the calls around the span, or in it) ...
    assert [r[3] for r in out] == pytest.approx([0.5, 1.0, 1.0])
    assert [r[2] for r in out[:2]] == pytest.approx([0.5, 1.0])
    # ... and a wait beyond CPU / F by more than a period is kept
    assert out[2][2] == pytest.approx(1.0 + (2.5 - 1.0 - 0.01))
    assert out[1][5] == pytest.approx(0.2) and out[1][:2] == rows[1][:2]


@needs_isolation
def test_a_missing_cpu_controller_is_refused_and_nothing_is_left(tmp_path):
    script = tmp_path / "nocontroller.py"
    script.write_text(textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(ROOT)!r})
        import emulate.cores
        from emulate import Cluster, EmulateError, up
        from emulate.cluster import existing
        from emulate.isolate import enter
        enter()
        emulate.cores.CPU_CONTROLLER = {str(tmp_path / "no-cgroup")!r}
        try:
            up(Cluster("nocpu", 2, 1, 1e9, core_share=0.2))
        except EmulateError as e:
            print("refused:", e)
        print("left:", existing("nocpu"), os.path.exists("/run/repreplay-emulate/nocpu"))
    """))
    p = run(EMULATE[:1] + ["-c", "import sys; from emulate.isolate import isolated; "
                                 f"sys.exit(isolated([sys.executable, {str(script)!r}]))"],
            timeout=60)
    assert "refused: no cgroup v1 cpu controller" in p.stdout
    assert "left: [] False" in p.stdout


# Making CPU-quota groups changes the machine's cgroup tree while a test
# runs (they are removed after): only where asked, as CI asks.
needs_cgroups = pytest.mark.skipif(
    WHY is not None or os.environ.get("REPREPLAY_TEST_CGROUPS") != "1",
    reason="virtual cores make CPU-quota groups: only when asked, REPREPLAY_TEST_CGROUPS=1 "
           "(.ci/run sets it under CI)")

WHERE = """
import os, sys
from mpi4py import MPI
group = [l.split(":", 2)[2].strip() for l in open("/proc/self/cgroup") if ":cpu:" in l][0]
line = (f"rank {MPI.COMM_WORLD.rank} group {group} cpus "
        f"{','.join(map(str, sorted(os.sched_getaffinity(0))))} "
        f"share {os.environ.get('REPREPLAY_CORE_SHARE')}")
print(line, flush=True)
if len(sys.argv) > 1:        # one file per rank: the ranks' lines do not interleave
    with open(f"{sys.argv[1]}/where{MPI.COMM_WORLD.rank}.txt", "w") as f:
        f.write(line)
"""
# the quota of the group a command runs in (the cgroup tree is not visible
# inside a node's namespace: ip netns exec mounts a sysfs of its own)
QUOTA = ("g=$(grep :cpu: /proc/self/cgroup | cut -d: -f3); echo quota $(cat "
         "/sys/fs/cgroup/cpu$g/cpu.cfs_quota_us) period $(cat /sys/fs/cgroup/cpu$g/"
         "cpu.cfs_period_us) in $g")


def groups_left() -> list[str]:
    from emulate.cores import ROOT as GROUPS
    return sorted(f for f in os.listdir(GROUPS)
                  if os.path.isdir(os.path.join(GROUPS, f))) if os.path.isdir(GROUPS) else []


@needs_cgroups
def test_every_rank_runs_on_a_virtual_core_of_its_own(tmp_path):
    app = tmp_path / "where.py"
    app.write_text(WHERE)
    before = groups_left()
    script = (f'"$EMULATE_MPIEXEC" -n 4 {PY} {app} {tmp_path}; '
              f'{PY} -m emulate up --name two --nodes 1 --core-share 0.1 --rate 1g; '
              f'"$EMULATE_CORE" 3 sh -c \'{QUOTA}\'; '
              f'"$EMULATE_CORE" 4 true')
    p = run(EMULATE + ["run", "--nodes", "2", "--cores-per-node", "2", "--core-share", "0.2",
                       "--rate", "1gbit", "--", "sh", "-c", script], timeout=180, check=False)
    files = sorted(tmp_path.glob("where*.txt"))
    assert len(files) == 4, p.stdout + p.stderr
    lines = {int(f.stem[len("where"):]): f.read_text() for f in files}
    for r, line in lines.items():
        f = line.split()
        assert f[3].endswith(f"/core{r}")                 # its own group
        assert len(f[5].split(",")) == 1                  # pinned to one CPU
        assert f[7] == "0.2"
    # one CPU after the other, as -bind-to core would place them
    cpus = [lines[r].split()[5] for r in range(4)]
    assert cpus[0] != cpus[1] and cpus[0] == cpus[2]
    # a second cluster with virtual cores is refused while this one lives
    assert "another emulated cluster has virtual cores" in p.stderr
    # the core script runs a command on a given core (0.2 of every 10 ms),
    # and refuses one it lacks
    assert re.search(r"quota 2000 period 10000 in /repreplay-emulate/emu-\d+/core3\n",
                     p.stdout)
    assert "no core 4: cluster emu has 4 (0-3)" in p.stderr
    # down removed every group
    assert groups_left() == before


@needs_cgroups
def test_a_killed_run_leaves_no_virtual_cores_after_the_next_down():
    before = groups_left()
    proc = subprocess.Popen(EMULATE + ["run", "--nodes", "1", "--cores-per-node", "2",
                                       "--core-share", "0.1", "--rate", "1gbit", "--",
                                       "sleep", "60"], stdout=subprocess.PIPE, text=True,
                            start_new_session=True, cwd=ROOT)
    assert "launcher" in proc.stdout.readline()        # the cluster is up
    stale = [g for g in groups_left() if g not in before]
    assert len(stale) == 1 and stale[0].startswith("emu-")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    time.sleep(0.5)
    # its owner is gone: the next down (of any cluster) removes its groups
    run(EMULATE + ["down", "--name", "other"])
    assert groups_left() == before


@needs_cgroups
def test_a_replay_runs_its_copies_on_one_nodes_virtual_cores(tmp_path):
    app = tmp_path / "where.py"
    app.write_text(WHERE)
    mpirun(2, ["-m", "instrument", "record", "--ranks", "0", "-o", str(tmp_path / "log"), app])
    script = (f'{PY} -m replay --rank 0 --log {tmp_path / "log"} -o {tmp_path / "out"} '
              f'--load 2 --bind-command "$EMULATE_CORE" {app}')
    run(EMULATE + ["run", "--nodes", "2", "--cores-per-node", "2", "--core-share", "0.2",
                   "--rate", "1gbit", "--", "sh", "-c", script], timeout=180)
    first = (tmp_path / "out" / "rank0.out").read_text()
    second = (tmp_path / "out" / "copies" / "copy1" / "rank0.out").read_text()
    assert "/core0 cpus" in first and "share 0.2" in first
    assert "/core1 cpus" in second
    assert (tmp_path / "out" / "rank0.csv").exists()


def test_a_replay_bind_command_that_is_not_there_is_refused(tmp_path):
    p = run([PY, "-m", "replay", "--rank", "0", "--log", str(tmp_path / "log"), "-o",
             str(tmp_path / "out"), "--bind-command", str(tmp_path / "nosuch"), "app.py"],
            check=False)
    assert p.returncode == 2
    assert f"--bind-command {tmp_path / 'nosuch'}: not an executable command" in p.stderr
    assert "Traceback" not in p.stderr and not (tmp_path / "out").exists()
