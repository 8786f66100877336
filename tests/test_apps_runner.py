"""bench/apps/run.py's own errors, without the applications installed (the
runs themselves are the ``apps`` tier's, tests/test_apps.py)."""
import json
import subprocess
import sys

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
