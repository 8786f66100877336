"""Every command and subcommand answers --help, and explains every option."""
import re
import sys

import pytest
from conftest import run

COMMANDS = ["instrument trace", "instrument record", "instrument show", "instrument merge",
            "cluster", "replay", "replay.expand", "netsim", "calibrate measure",
            "calibrate fit", "validate", "report", "scaling fit", "scaling metric",
            "scaling hetero", "scaling grids"]


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
