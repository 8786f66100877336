"""bench/apps/run.py's own errors, without the applications installed (the
runs themselves are the ``apps`` tier's, tests/test_apps.py)."""
import json
import subprocess
import sys
import time

from conftest import ROOT

RUNNER = ROOT / "bench" / "apps" / "run.py"


def _resimulate(out, apps):
    return subprocess.run([sys.executable, str(RUNNER), "--resimulate", "--apps", apps,
                           "--out", str(out)], capture_output=True, text=True, timeout=120)


def test_resimulate_names_what_is_missing_and_keeps_the_other_rows(tmp_path):
    # one app finished earlier (its row stays in the table), one has no
    # rounds at all, one has its replays but not the real runs' seconds
    done = {"app": "osu-bw", "predicted": 1.0, "measured": 1.0, "error": 0.0}
    (tmp_path / "osu-bw").mkdir()
    (tmp_path / "osu-bw" / "row.json").write_text(json.dumps(done))
    (tmp_path / "osu-alltoall").mkdir()
    (tmp_path / "osu-allgather" / "replay" / "repeat1").mkdir(parents=True)
    p = _resimulate(tmp_path, "osu-alltoall,osu-allgather")
    assert p.returncode == 1, p.stdout + p.stderr
    assert (f"osu-alltoall: FAILED: {tmp_path / 'osu-alltoall'}: no rounds to resimulate"
            in p.stderr), p.stderr
    assert (f"osu-allgather: FAILED: {tmp_path / 'osu-allgather' / 'runs.json'}: missing"
            in p.stderr), p.stderr
    assert "failed: osu-alltoall, osu-allgather" in p.stderr
    # nothing already written is lost: the finished app's row is still the table
    assert json.loads((tmp_path / "osu-bw" / "row.json").read_text()) == done
    assert "osu-bw" in (tmp_path / "results.csv").read_text()
    assert "osu-bw" in p.stdout


def test_a_stage_that_hangs_is_stopped_with_everything_it_started(tmp_path):
    """Every stage runs under a timeout: a hung MPI job (here ranks that
    sleep) is killed, ranks included, and named with its log."""
    marker = f"hung-{tmp_path.name}"
    code = (f"import sys; sys.path.insert(0, {str(RUNNER.parent)!r}); import run, pathlib\n"
            f"try:\n"
            f"    run.sh([run.MPIEXEC, '-n', '2', sys.executable, '-c',\n"
            f"            'import time; time.sleep(60) # {marker}'],\n"
            f"           pathlib.Path({str(tmp_path / 'stage.log')!r}), timeout=3)\n"
            f"except RuntimeError as e:\n"
            f"    print('stopped:', str(e).splitlines()[0])\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       cwd=ROOT)
    assert "did not finish in 3 s" in p.stdout, p.stdout + p.stderr
    assert (tmp_path / "stage.log").exists()
    # SIGKILLed processes take a moment to go on a loaded machine
    deadline = time.time() + 30
    while True:
        left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
        if not left.strip() or time.time() > deadline:
            break
        time.sleep(0.2)
    assert not left.strip(), f"processes left running: {left}"
