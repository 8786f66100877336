"""The fuzz tier: every file a stage reads, damaged a thousand ways.

``pytest -m fuzz`` runs it alone; the README's test command runs it too.
The engine and a larger run are bench/fuzz.py (results in bench/RESULTS.md).
Goal: no traceback, no hang, no silent wrong answer.
"""
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import fuzz  # noqa: E402

pytestmark = pytest.mark.fuzz


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return fuzz.build_base(tmp_path_factory.mktemp("fuzz"))


def test_a_thousand_mutations_give_no_traceback_no_hang_no_silent_change(base):
    df = fuzz.campaign(base, mutations=1020, seed=1, replays=6)
    bad = df[df["outcome"].isin(["traceback", "hang"]) | df["silent"]]
    with pd.option_context("display.width", 250, "display.max_colwidth", 150):
        assert bad.empty, f"\n{fuzz.summary(df)}\n{bad.to_string()}"
    # every file type was damaged both ways, and most damage is refused
    kinds = df.groupby("file")["family"].agg(set)
    assert set(kinds.index) == set(fuzz.FILES)
    assert all({"damage"} <= fams for fams in kinds)
    assert (df["outcome"] == "error").mean() > 0.5
    # a directory in a file's place is refused by every reader of every file
    # (a rank's raw status file, as when it is damaged, is warned about and
    # the rank counted incomplete)
    moved = df[df["family"] == "directory"]
    assert len(moved) == sum(len(f[2]) for f in fuzz.FILES.values())
    assert (moved["outcome"] == "error").sum() == len(moved) - 1, moved.to_string()
    assert moved[moved["outcome"] != "error"]["file"].tolist() == ["raw .json"]
    # the crafted message-log records were replayed for real and refused
    crafted = df[df["family"] == "crafted"]
    assert len(crafted) == 6 and crafted["outcome"].isin(["error", "same"]).all()
