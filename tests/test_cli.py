"""Every command and subcommand answers --help, and explains every option."""
import re
import sys

import pytest
from conftest import run

COMMANDS = ["instrument trace", "instrument record", "instrument show", "instrument merge",
            "cluster", "replay", "replay.expand", "netsim", "calibrate measure",
            "calibrate fit", "validate", "report", "scaling fit", "scaling metric",
            "scaling hetero", "scaling grids", "emulate up", "emulate down", "emulate status",
            "emulate run"]


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
