"""The apps tier: the whole method on third-party applications.

    bash bench/apps/install.sh && .venv/bin/python -m pytest -m apps

Not in the default run (installing the applications downloads several GB,
heat's torch above all, and the tier takes about half an hour here).  Each
recipe of bench/apps/recipes.yaml goes through trace (with the C-level call
counter), cluster, record, replay, expand and simulate, then one untraced
run, then the prediction again from the saved rounds (``run.py
--resimulate``); the test checks that every stage succeeds, that tracing
and replay leave the application's output unchanged, that no MPI call
escaped the tracer, and that the saved rounds give the same row again.
How close the predictions are is a benchmark's business (``python
bench/apps/run.py``, figures in bench/RESULTS.md), not a timed test's.
"""
import math
import subprocess
import sys

import pytest
from conftest import ROOT

pytestmark = pytest.mark.apps
sys.path.insert(0, str(ROOT / "bench" / "apps"))


@pytest.fixture(scope="session")
def installed():
    """Install the applications (idempotent) the first time the tier runs."""
    p = subprocess.run(["bash", str(ROOT / "bench" / "apps" / "install.sh")],
                       capture_output=True, text=True, timeout=3000,
                       env={**__import__("os").environ, "PY": sys.executable})
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    import run as apps_run
    return apps_run


def _recipes():
    import yaml
    with open(ROOT / "bench" / "apps" / "recipes.yaml") as f:
        return sorted(yaml.safe_load(f))


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", _recipes())
def test_the_method_runs_on_a_third_party_application(installed, name, tmp_path):
    recipe = installed.load_recipes()[name]
    if "requires" in recipe:            # petsc4py: built from source with WITH_PETSC=1
        pytest.importorskip(recipe["requires"], reason=f"{name} needs {recipe['requires']} "
                            f"(WITH_PETSC=1 bash bench/apps/install.sh)")
    with installed.app_environment(recipe):
        row = installed.validate_app(name, recipe, tmp_path, repeats=1)
    assert row["invisible"] == 0, f"{name}: MPI calls below Python"
    assert row["same_output"] == "-" or row["same_output"].startswith("yes"), \
        f"{name}: {row['same_output']}"
    assert row["representatives"] >= 1 and row["events"] > 0
    assert row["predicted"] > 0 and math.isfinite(row["fidelity"])
    if recipe.get("compare", True):
        assert row["measured"] > 0
    # the saved rounds alone give the same row again (run.py --resimulate)
    again = installed.resimulate(name, recipe, tmp_path, installed.PLATFORM)
    for key in ("predicted", "predicted_each", "measured", "measured_each", "same_output"):
        assert again[key] == row[key] or (key == "measured" and math.isnan(row[key])), key
