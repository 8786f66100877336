"""Faults that must end cleanly: a full disk while tracing or recording.

The full disk is real: a 192 KiB tmpfs mounted in a private mount
namespace (``unshare -m``), so that nothing of the machine changes and the
mount goes with the process.  Needs root; skipped otherwise.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import EXAMPLES, MPIEXEC, ROOT, mpi_env


def _can_mount() -> bool:
    if os.geteuid() != 0:
        return False
    p = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs tmpfs /mnt"],
                       capture_output=True)
    return p.returncode == 0


pytestmark = pytest.mark.skipif(not _can_mount(), reason="needs root and unshare -m "
                                                         "(a private tmpfs as a full disk)")


def on_full_disk(tmp_path, commands: list[list[str]]) -> list[subprocess.CompletedProcess]:
    """Run each command with a 192 KiB tmpfs at tmp_path/full; returns
    each one's result (the commands share the mount)."""
    full = tmp_path / "full"
    full.mkdir()
    script = tmp_path / "run.sh"
    lines = [f"mount -t tmpfs -o size=192k tmpfs {full}"]
    for i, cmd in enumerate(commands):
        quoted = " ".join(f"'{c}'" for c in map(str, cmd))
        lines.append(f"timeout -k 10 120 {quoted} >{tmp_path}/out{i} 2>{tmp_path}/err{i}; "
                     f"echo $? >{tmp_path}/rc{i}")
    script.write_text("\n".join(lines) + "\n")
    subprocess.run(["unshare", "-m", "bash", str(script)], env=mpi_env(), cwd=ROOT,
                   timeout=600, check=True)
    return [subprocess.CompletedProcess(cmd, int((tmp_path / f"rc{i}").read_text()),
                                        (tmp_path / f"out{i}").read_text(),
                                        (tmp_path / f"err{i}").read_text())
            for i, cmd in enumerate(commands)]


APP = [EXAMPLES / "jacobi.py", "--n", "64", "--iters", "3000"]


def test_a_full_disk_stops_the_trace_with_the_file_named(tmp_path):
    """It used to surface as six tracebacks inside the application's
    Allreduce, then hang until killed."""
    out = tmp_path / "full" / "t"
    p, = on_full_disk(tmp_path, [[MPIEXEC, "-n", "2", sys.executable, "-m", "instrument",
                                  "trace", "-o", out] + APP])
    assert p.returncode not in (0, 124, 137), (p.returncode, p.stderr)   # ended, no hang
    assert "Traceback" not in p.stderr, p.stderr
    errors = [ln for ln in p.stderr.splitlines() if ": error: " in ln]
    assert errors and all("No space left on device" in ln for ln in errors), p.stderr
    assert all(f"{out}/raw/r00000" in ln for ln in errors), errors


def test_a_full_disk_stops_the_record_and_replay_refuses_its_log(tmp_path):
    log = tmp_path / "full" / "log"
    rec, rep = on_full_disk(tmp_path, [
        [MPIEXEC, "-n", "2", sys.executable, "-m", "instrument", "record", "--ranks", "0",
         "-o", log] + APP,
        [sys.executable, "-m", "replay", "--rank", "0", "--log", log, "-o",
         tmp_path / "rep"] + APP])
    assert rec.returncode not in (0, 124, 137), (rec.returncode, rec.stderr)
    assert "Traceback" not in rec.stderr, rec.stderr
    errors = [ln for ln in rec.stderr.splitlines() if ": error: " in ln]
    assert len(errors) == 1, rec.stderr              # one message, the file and record named
    assert f"{log}/rank0.log: cannot write record" in errors[0]
    assert "No space left on device" in errors[0]
    # the cut log is refused before the application runs
    assert rep.returncode == 2, rep.stderr
    assert "its recording did not finish" in rep.stderr
    assert not (tmp_path / "rep" / "rank0.out").exists()


def test_outputs_to_a_full_disk_fail_with_the_file_named_and_nothing_half_written(tmp_path):
    """cluster and expand left 0-byte outputs; netsim, cluster, expand and
    replay ended in tracebacks."""
    from conftest import record, run, trace
    app = [EXAMPLES / "jacobi.py", "--n", "64", "--iters", "4"]
    t, log, rep = tmp_path / "t", tmp_path / "log", tmp_path / "rep"
    trace(2, t, app)
    run([sys.executable, "-m", "cluster", t, "-o", tmp_path / "reps.csv"])
    record(2, log, [0, 1], app)
    run([sys.executable, "-m", "replay", "--ranks", "0,1", "--log", log, "-o", rep]
        + [str(a) for a in app])
    run([sys.executable, "-m", "replay.expand", t, tmp_path / "reps.csv", rep, "-o",
         tmp_path / "compute.csv"])
    full = tmp_path / "full"
    py = [sys.executable, "-m"]
    results = on_full_disk(tmp_path, [
        ["dd", "if=/dev/zero", f"of={full}/filler", "bs=4k"],
        py + ["cluster", t, "-o", full / "reps.csv", "--plot", full / "d.png"],
        py + ["replay.expand", t, tmp_path / "reps.csv", rep, "-o", full / "c.csv"],
        py + ["netsim", t, "--platform", "config/platforms/ib-cluster.yaml", "--compute",
              tmp_path / "compute.csv", "-o", full / "p.json", "--timeline", full / "tl.json"],
        py + ["replay", "--rank", "0", "--log", log, "-o", full / "rep"] + app,
    ])
    for p, out in zip(results[1:], ["reps.csv", "c.csv", "p.json", "rep/rank0.csv"]):
        assert p.returncode == 2, (p.args, p.stderr)
        assert "Traceback" not in p.stderr, p.stderr
        assert f"{full / out}: cannot write (No space left on device)" in p.stderr, p.stderr
