"""bench/apps/run.py's own errors, without the applications installed (the
runs themselves are the ``apps`` tier's, tests/test_apps.py)."""
import json
import subprocess
import sys
import time

import pytest
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


def test_the_output_check_compares_each_representatives_own_line(tmp_path):
    """At N=16 rank 0 of examples/uneven.py was no representative, and the
    column said "NO: <missing>" for a replay that printed what it should:
    a {rank} pattern checks every representative's own line, and a line of
    a rank that no representative replays is compared traced against
    untraced only, saying so."""
    sys.path.insert(0, str(RUNNER.parent))
    from run import same_output
    lines = "".join(f"rank {r} class {r % 3} acc {r}.5\n" for r in range(6))
    (tmp_path / "rank2.out").write_text("rank 2 class 2 acc 2.5\n")
    (tmp_path / "rank4.out").write_text("rank 4 class 1 acc 4.5\n")
    traced = "instrument: trace: rank 0 finished\n" + lines
    assert same_output("rank {rank} class .*", traced, lines, tmp_path, [2, 4]) == "yes"
    assert same_output("rank 0 class .*", traced, lines, tmp_path, [2, 4]) == \
        "yes (traced and untraced; no representative prints it)"
    (tmp_path / "rank4.out").write_text("rank 4 class 1 acc 4.25\n")
    assert same_output("rank {rank} class .*", traced, lines, tmp_path, [2, 4]) == \
        "NO: rank 4 class 1 acc 4.25 | rank 4 class 1 acc 4.5"
    # a replay that printed nothing is a difference, not a pass
    (tmp_path / "rank4.out").unlink()
    assert same_output("rank {rank} class .*", traced, lines, tmp_path, [2, 4]).startswith(
        "NO: <missing>")
    assert same_output("rank 0 class .*", traced, lines.replace("0.5", "0.25"), tmp_path,
                       [2]) == "NO: rank 0 class 0 acc 0.25 | rank 0 class 0 acc 0.5"


def run_one_failing(tmp_path, name: str, package: str, what: str, app: str):
    """The runner on a one-recipe file whose application it cannot
    predict: its exit (1, checked), and the application's row."""
    recipes = tmp_path / "recipes.yaml"
    recipes.write_text(f"{name}:\n  package: {package}\n  what: {what}\n"
                       f"  ranks: 2\n  app: {app}\n")
    p = subprocess.run([sys.executable, str(RUNNER), "--recipes", str(recipes), "--out",
                        str(tmp_path / "out"), "--repeats", "1", "--no-calibrate", "--markdown"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 1, p.stdout + p.stderr
    return p, json.loads((tmp_path / "out" / name / "row.json").read_text())


def test_an_application_that_cannot_be_predicted_is_a_row_with_its_reason(tmp_path):
    """A stage that refuses an application (here the recording: every rank
    calls MPI_Alltoallw through ctypes on libmpi's handle, a call below
    Python that the C log cannot answer) puts its one-line reason in the
    table, and the runner exits non-zero."""
    p, row = run_one_failing(tmp_path, "ctypes-send", "ctypes", "a send below Python",
                             "[tests/apps/ctypes_mpi.py, alltoallw]")
    assert row["outcome"].startswith("refused: ") and \
        "MPI_Alltoallw (called from " in row["outcome"] and \
        "the C-level recorder cannot log it" in row["outcome"], row
    assert "| ctypes-send | ctypes | a send below Python | 2 | - |" in p.stdout and \
        "| refused: " in p.stdout
    assert "Traceback" not in p.stderr
    # the table again from what is saved, running nothing
    t = subprocess.run([sys.executable, str(RUNNER), "--recipes", str(tmp_path / "recipes.yaml"),
                        "--out", str(tmp_path / "out"), "--table", "--markdown"],
                       capture_output=True, text=True, timeout=60)
    assert t.returncode == 0 and "| ctypes-send | ctypes | a send below Python | 2 | - |" \
        in t.stdout, t.stdout + t.stderr


def test_an_application_that_fails_untraced_is_blamed_not_a_stage(tmp_path):
    """An application that fails by itself (rank 1 raises) fails its trace
    too; the runner runs it once without the tool and the table says the
    application fails, with its last words, not that a stage refused."""
    _, row = run_one_failing(tmp_path, "crash", "tests", "raises on rank 1",
                             "[tests/apps/crash.py, raise]")
    assert row["outcome"].startswith("the application fails without the tool too") and \
        "deliberate failure on rank 1" in row["outcome"], row


def test_the_table_gives_each_errors_noise_floor(tmp_path):
    """Beside each error, the spread of the untraced runs against each
    other: an error inside it is marked so, and an application whose runs
    spread wider than the goal is reported apart in the summary."""
    sys.path.insert(0, str(ROOT / "bench" / "apps"))
    import pandas as pd
    from run import markdown, noise_floor
    steady = [1.00, 1.01, 0.99, 1.00, 1.01]
    noisy = [1.0, 1.3, 0.8, 1.2, 0.9]
    assert noise_floor(steady) < 0.02 < 0.05 < noise_floor(noisy)
    rows = [{"app": "steady", "package": "p", "N": 2, "events": 10, "representatives": 1,
             "fidelity": 0.0, "predicted": 1.03, "predicted_each": [1.03] * 5,
             "measured": 1.0, "measured_each": steady, "error": 0.03, "invisible": 0,
             "same_output": "-"},
            {"app": "noisy", "package": "q", "N": 2, "events": 10, "representatives": 1,
             "fidelity": 0.0, "predicted": 1.08, "predicted_each": [1.08] * 5,
             "measured": 1.0, "measured_each": noisy, "error": 0.08, "invisible": 0,
             "same_output": "-"}]
    table = markdown(pd.DataFrame(rows))
    steady_row = next(line for line in table.splitlines() if line.startswith("| steady"))
    noisy_row = next(line for line in table.splitlines() if line.startswith("| noisy"))
    assert "inside the floor" not in steady_row and "inside the floor" in noisy_row
    assert steady_row.endswith("| predicted |")
    assert "Noise floor wider than 5 % (untraced runs against each other) on 1: noisy; " \
        "without them: |error| mean 3.0 %, max 3.0 % over 1." in table


def test_rounds_brought_back_from_a_larger_machine_are_compared(tmp_path):
    """Rounds of N larger than this machine's cores (a lent machine's,
    predicted here after its time box stopped them): a real pipeline at N
    = 4, oversubscribed, has no real runs to compare; once the real runs'
    seconds are saved beside its rounds, --resimulate compares them."""
    out = tmp_path / "out"
    base = [sys.executable, str(RUNNER), "--recipes", str(ROOT / "bench" / "apps" /
            "examples.yaml"), "--apps", "uneven", "--ranks", "4", "--out", str(out)]
    p = subprocess.run(base + ["--repeats", "1"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    row = json.loads((out / "uneven" / "row.json").read_text())
    assert row["measured"] != row["measured"]              # NaN: nothing to compare here
    predicted = row["predicted"]
    # the real runs' seconds, as the larger machine measured them
    (out / "uneven" / "runs.json").write_text(json.dumps([predicted * 1.1, predicted * 1.2]))
    p = subprocess.run(base + ["--resimulate"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    row = json.loads((out / "uneven" / "row.json").read_text())
    assert row["measured"] == pytest.approx(predicted * 1.15)
    assert row["error"] == pytest.approx(row["predicted"] / row["measured"] - 1)
