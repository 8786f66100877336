"""Running the application inside a tool (launch/): every way an
application imports mpi4py is traced, recorded and replayed, and a rank
that is stuck is stopped with where it is, never left hanging."""
from __future__ import annotations

import sys

import pandas as pd
import pytest
from conftest import APPS, host_lines, mpirun, record, run

from contracts.trace import load_trace

# (label, python arguments, the directory they run in)
IMPORTS = [
    ("plain", [APPS / "import_paths.py", "plain"], None),
    ("nested", [APPS / "import_paths.py", "nested"], None),
    ("deferred", [APPS / "import_paths.py", "deferred"], None),
    ("pyomo", [APPS / "import_paths.py", "pyomo"], None),
    ("module", ["-m", "lazy_mpi.main"], APPS),
    # MPI initialised (and finalised) by the application itself, as Devito does
    ("init", [APPS / "deferred_init.py", "--init", "init"], None),
    ("init-thread", [APPS / "deferred_init.py", "--init", "init_thread"], None),
]


@pytest.mark.parametrize("label,app,cwd", IMPORTS, ids=[i[0] for i in IMPORTS])
def test_every_way_of_importing_mpi4py_is_traced_recorded_and_replayed(tmp_path, label, app,
                                                                          cwd):
    """A package importing mpi4py.MPI while it is itself imported, Pyomo's
    deferred import (mpi4py.MPI imported from inside the import of the
    mpi4py package: the tool's set-up then waited for an import lock the
    application's thread held, and every rank hung), ``-m`` modules: each
    traced with its allreduce and barrier, recorded and replayed with the
    same output.  An application that sets ``mpi4py.rc.initialize = False``
    and initialises MPI itself later (the tool's set-up then used MPI before
    it existed, and every rank aborted), and finalises it itself (the
    replay's last overhead probe then called MPI after it).  --watchdog
    stops a run that hangs all the same."""
    kw = {"cwd": cwd} if cwd else {}
    t = mpirun(2, ["-m", "instrument", "trace", "--watchdog", "60", "-o", tmp_path / "t"]
               + app, timeout=240, **kw)
    ev = load_trace(str(tmp_path / "t")).events
    for r in (0, 1):
        assert {"allreduce", "barrier"} <= set(ev.loc[ev["rank"] == r, "op"]), label
    record(2, tmp_path / "log", [1], app, timeout=240, **kw)
    p = run([sys.executable, "-m", "replay", "--rank", "1", "--log", str(tmp_path / "log"),
             "-o", str(tmp_path / "rep")] + [str(a) for a in app], timeout=240, **kw)
    assert host_lines(p.stdout, "rank ")[1] == host_lines(t.stdout, "rank ")[1]
    assert "allreduce" in set(pd.read_csv(tmp_path / "rep" / "rank1.csv")["op"])


@pytest.mark.parametrize("stage", ["trace", "record"])
def test_a_rank_stuck_without_mpi_or_computation_is_stopped_with_where(tmp_path, stage):
    """Rank 1 sleeps after a barrier, rank 0 waits for it: with
    --watchdog 3 the run ends (it would hang for an hour), rank 1 saying
    how many events it made, that it sleeps, and the application's line."""
    opts = ["-o", str(tmp_path / "out")] + (["--ranks", "1"] if stage == "record" else [])
    p = mpirun(2, ["-m", "instrument", stage, "--watchdog", "3"] + opts + [APPS / "stuck.py"],
               check=False, timeout=300)
    assert p.returncode != 0
    said = [ln for ln in p.stderr.splitlines() if "no MPI call and no computation" in ln]
    assert said, p.stderr[-3000:]
    assert f"instrument {stage}: rank 1: error:" in said[0]
    assert "sleeping" in said[0] and "stuck.py:" in said[0] and "in <module>" in said[0]
    assert "Traceback" not in p.stderr


def test_a_rank_computing_longer_than_the_watchdog_is_not_stopped(tmp_path):
    """Computing is progress: rank 1 computes 4 CPU seconds between two
    barriers, with --watchdog 2, and the run completes."""
    p = mpirun(2, ["-m", "instrument", "trace", "--watchdog", "2", "-o", tmp_path / "t",
                   APPS / "stuck.py", "--compute", "4"], timeout=300)
    assert "rank 1 done" in p.stdout
    bad = mpirun(2, ["-m", "instrument", "trace", "--watchdog", "-1", "-o", tmp_path / "u",
                     APPS / "stuck.py"], check=False)
    assert bad.returncode == 2 and "--watchdog must be >= 0" in bad.stderr
