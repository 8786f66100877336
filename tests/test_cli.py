"""Every command and subcommand answers --help, and explains every option."""
import re
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import run

COMMANDS = ["instrument trace", "instrument record", "instrument show", "instrument merge",
            "cluster", "replay", "replay.expand", "netsim", "calibrate measure",
            "calibrate fit", "validate", "report", "scaling fit", "scaling metric",
            "scaling hetero", "scaling grids", "emulate up", "emulate down", "emulate status",
            "emulate run"]


ROOT = Path(__file__).resolve().parent.parent


def entry_points() -> list[str]:
    """Every ``python -m`` entry point of the installed packages: each
    package with a ``__main__`` and each module that runs as a script."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    found = []
    for pkg in meta["tool"]["setuptools"]["packages"]:
        for f in sorted((ROOT / pkg).glob("*.py")):
            if f.name == "__main__.py":
                found.append(pkg)
            elif 'if __name__ == "__main__":' in f.read_text():
                found.append(f"{pkg}.{f.stem}")
    return found


@pytest.mark.parametrize("module", entry_points())
def test_every_entry_point_answers_help_with_what_it_does(module):
    p = run([sys.executable, "-m", module, "--help"], check=False)
    assert p.returncode == 0, f"python -m {module} --help exited {p.returncode}: {p.stderr}"
    # more than a usage line: what the command does
    text = [ln for ln in p.stdout.splitlines() if ln.strip() and not ln.startswith("usage")]
    assert len(text) >= 2, f"python -m {module} --help says only:\n{p.stdout}"


def test_the_entry_points_are_found():
    assert {"replay", "validate.clock", "replay.expand", "emulate"} <= set(entry_points())


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_is_explained(command):
    out = run([sys.executable, "-m"] + command.split() + ["--help"]).stdout
    lines = out.splitlines()
    bare = []
    for i, line in enumerate(lines):
        # an option (or positional) alone on its line, with no help text after it
        if re.match(r"^  -?[-\w]+(,? [-\w ,\[\].]+)?$", line) and "  " not in line.strip() \
                and (i + 1 == len(lines) or not lines[i + 1].startswith("    ")):
            bare.append(line.strip())
    assert not bare, f"python -m {command}: options without help: {bare}"


def test_a_measurement_capped_below_one_byte_is_refused(tmp_path):
    p = run([sys.executable, "-m", "calibrate", "measure", "--max-bytes", "0", "-o",
             str(tmp_path / "m.csv")], check=False)
    assert p.returncode == 2 and "--max-bytes must be at least 1" in p.stderr
    assert not (tmp_path / "m.csv").exists()
