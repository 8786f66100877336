"""The replay bundle: packed here, run by its own run.sh in a fresh
directory with a fresh virtual environment and none of this checkout's
paths, unpacked, and compared with a local replay of the same log; its
refusals; and the workflow that stops at the bundle and resumes from its
results."""
import hashlib
import json
import shutil
import sys
import tarfile

import pytest
from conftest import EXAMPLES, record, run

from contracts.replayed import read_replayed

UNEVEN = [EXAMPLES / "uneven.py", "--iters", "6", "--work", "150000", "--classes", "2"]
PY = sys.executable
SNAKEMAKE = [PY, "-m", "snakemake"]


def clean_env(home) -> dict:
    """What a fresh login on another node has: no venv, no PYTHONPATH."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}


def untar(archive, dest):
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as t:
        t.extractall(dest, filter="data")


@pytest.fixture(scope="module")
def bundled(tmp_path_factory):
    """uneven at 4 ranks recorded for ranks 1 and 2, packed with its wheels,
    and run on a 'target': a fresh directory, a fresh venv, a bare
    environment."""
    d = tmp_path_factory.mktemp("bundle")
    record(4, d / "msglog", [1, 2], UNEVEN)
    run([PY, "-m", "replay", "pack", "--log", str(d / "msglog"), "-o", str(d / "bundle.tar.gz"),
         "--wheels"])
    target = d / "target"
    untar(d / "bundle.tar.gz", target)
    p = run(["bash", "bundle/run.sh"], cwd=target, env=clean_env(target), timeout=600)
    return d, target, p


def test_a_bundle_replays_in_a_fresh_environment_as_it_does_here(bundled):
    d, target, p = bundled
    man = json.loads((target / "bundle" / "manifest.json").read_text())
    assert man["ranks"] == [1, 2] and man["size"] == 4
    assert man["app"]["argv"][0] == "examples/uneven.py"     # relative: no host path
    assert any(r.startswith("mpi4py==") for r in man["requirements"])
    assert (target / "bundle" / "venv" / "bin" / "python").exists()
    assert "results.tar.gz" in p.stderr and (target / "results.tar.gz").exists()
    run([PY, "-m", "replay", "unpack", str(target / "results.tar.gz"), "--bundle",
         str(d / "bundle.tar.gz"), "-o", str(d / "from_bundle")])
    nodes = json.loads((d / "from_bundle" / "nodes.json").read_text())
    assert nodes["host"]["machine"] and nodes["target"]["speed_probe_s"] > 0
    run([PY, "-m", "replay", "--ranks", "1,2", "--log", str(d / "msglog"), "-o",
         str(d / "local"), *map(str, UNEVEN)])
    for r in (1, 2):
        there = read_replayed(str(d / "from_bundle" / f"rank{r}.csv"))
        here = read_replayed(str(d / "local" / f"rank{r}.csv"))
        # the same calls, answered from the same log
        assert list(there["op"]) == list(here["op"])
        # CPU seconds of the same work on the same machine: within the
        # replay's noise (a busy neighbour moves wall time, much less CPU)
        ratio = there["cpu"].sum() / here["cpu"].sum()
        assert 0.5 < ratio < 2.0, ratio


def test_a_changed_truncated_or_foreign_archive_is_refused_naming_the_file(bundled, tmp_path):
    d, target, _ = bundled
    venv_py = str(target / "bundle" / "venv" / "bin" / "python")
    copy = tmp_path / "bundle"
    shutil.copytree(target / "bundle", copy, ignore=shutil.ignore_patterns("venv"))
    with open(copy / "msglog" / "rank1.log", "r+b") as f:
        f.seek(200)
        b = f.read(1)
        f.seek(200)
        f.write(bytes([b[0] ^ 0xFF]))
    env = clean_env(tmp_path) | {"PYTHONPATH": str(copy / "project")}
    p = run([venv_py, "-m", "replay", "run-bundle", str(copy), "-o", str(tmp_path / "r.tar.gz")],
            env=env, check=False)
    assert p.returncode == 2 and "msglog/rank1.log: changed" in p.stderr
    assert not (tmp_path / "r.tar.gz").exists()
    data = (target / "results.tar.gz").read_bytes()
    (tmp_path / "cut.tar.gz").write_bytes(data[: len(data) // 2])
    p = run([PY, "-m", "replay", "unpack", str(tmp_path / "cut.tar.gz"), "-o",
             str(tmp_path / "out")], check=False)
    assert p.returncode == 2 and "truncated or damaged" in p.stderr
    assert not (tmp_path / "out").exists()
    # results of another bundle (packed again, with other options)
    run([PY, "-m", "replay", "pack", "--log", str(d / "msglog"), "-o",
         str(tmp_path / "other.tar.gz"), "--repeats", "2"])
    p = run([PY, "-m", "replay", "unpack", str(target / "results.tar.gz"), "--bundle",
             str(tmp_path / "other.tar.gz"), "-o", str(tmp_path / "out")], check=False)
    assert p.returncode == 2 and "another bundle" in p.stderr


def test_pack_refuses_what_it_cannot_carry_and_writes_nothing(bundled, tmp_path):
    d, _, _ = bundled
    out = tmp_path / "b.tar.gz"
    p = run([PY, "-m", "replay", "pack", "--log", str(d / "msglog"), "-o", str(out),
             "--include", "/etc/hostname"], check=False)
    assert p.returncode == 2 and "--include /etc/hostname: outside the recorded" in p.stderr
    p = run([PY, "-m", "replay", "pack", "--log", str(tmp_path), "-o", str(out)], check=False)
    assert p.returncode == 2 and "record.json: missing" in p.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_another_version_of_a_requirement_or_of_the_project_is_refused(bundled, tmp_path):
    _, target, _ = bundled
    venv_py = str(target / "bundle" / "venv" / "bin" / "python")
    copy = tmp_path / "bundle"
    shutil.copytree(target / "bundle", copy, ignore=shutil.ignore_patterns("venv"))
    man = json.loads((copy / "manifest.json").read_text())
    man["requirements"] = [("numpy==0.1" if r.startswith("numpy==") else r)
                           for r in man["requirements"]]
    (copy / "manifest.json").write_text(json.dumps(man))
    env = clean_env(tmp_path) | {"PYTHONPATH": str(copy / "project")}
    p = run([venv_py, "-m", "replay", "run-bundle", str(copy), "-o", str(tmp_path / "r.tar.gz")],
            env=env, check=False)
    assert p.returncode == 2 and "recorded with 0.1" in p.stderr and "numpy" in p.stderr
    # a representative that called MPI below Python, recorded with another
    # MPI library: its C log would be answered through another ABI
    (copy / "msglog" / "rank1.clog").write_bytes(b"recorded below Python")
    man["requirements"] = [r for r in man["requirements"] if not r.startswith("numpy==")]
    man["files"]["msglog/rank1.clog"] = hashlib.sha256(b"recorded below Python").hexdigest()
    man["host"]["mpi"]["vendor"] = "Open MPI"
    (copy / "manifest.json").write_text(json.dumps(man))
    p = run([venv_py, "-m", "replay", "run-bundle", str(copy), "-o", str(tmp_path / "r.tar.gz")],
            env=env, check=False)
    assert p.returncode == 2 and "rank1.clog: recorded below Python with Open MPI" in p.stderr
    # this checkout's replay on a bundle packed by another version
    man["project"] = "0" * 64
    (copy / "manifest.json").write_text(json.dumps(man))
    p = run([PY, "-m", "replay", "run-bundle", str(copy), "-o", str(tmp_path / "r.tar.gz")],
            check=False)
    assert p.returncode == 2 and "another version of repreplay" in p.stderr


def test_a_requirement_that_will_not_install_is_named_by_run_sh(bundled, tmp_path):
    _, target, _ = bundled
    copy = tmp_path / "bundle"
    shutil.copytree(target / "bundle", copy, ignore=shutil.ignore_patterns("venv"))
    with open(copy / "requirements.txt", "a") as f:
        f.write("no-such-distribution-anywhere==1.0\n")
    env = clean_env(tmp_path) | {"VENV": str(target / "bundle" / "venv")}
    p = run(["bash", str(copy / "run.sh")], cwd=tmp_path, env=env, check=False)
    assert p.returncode == 2 and "a requirement will not install here" in p.stderr
    assert "no-such-distribution-anywhere" in p.stderr and "install.log" in p.stderr
    assert not (tmp_path / "results.tar.gz").exists()


def test_the_workflow_stops_at_the_bundle_and_resumes_from_its_results(bundled, tmp_path):
    _, first, _ = bundled
    res, bdir = tmp_path / "results", tmp_path / "bundles"
    cfg = tmp_path / "bundle.yaml"
    cfg.write_text(f"results: {res}\nranks: 4\ntarget: {{bundle: {bdir}}}\n"
                   "calibrate: {enabled: false}\nplatforms: [config/platforms/ib-cluster.yaml]\n"
                   "variability: {samples: 3}\nreplay: {repeats: 1, load: 0}\n")
    p = run(SNAKEMAKE + ["-c2", "--configfile", "config/config.yaml", str(cfg)], timeout=600)
    assert (bdir / "bundle.tar.gz").exists() and not (res / "report.html").exists()
    assert "run snakemake again" in p.stdout + p.stderr
    untar(bdir / "bundle.tar.gz", bdir)
    # the first target's venv and wheels: installing again is tested above
    env = clean_env(tmp_path) | {"VENV": str(first / "bundle" / "venv"), "PIP_NO_INDEX": "1",
                                 "PIP_FIND_LINKS": str(first / "bundle" / "wheels")}
    run(["bash", str(bdir / "bundle" / "run.sh")], cwd=tmp_path, env=env, timeout=600)
    assert (bdir / "results.tar.gz").exists()
    run(SNAKEMAKE + ["-c2", "--configfile", "config/config.yaml", str(cfg)], timeout=600)
    html = (res / "report.html").read_text()
    assert "Predicted performance at 4 ranks" in html and "Replayed on a node elsewhere" in html
