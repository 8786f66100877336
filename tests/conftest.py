"""Shared helpers: real mpiexec runs of real programs (no mocked MPI)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
APPS = Path(__file__).resolve().parent / "apps"
DATA = Path(__file__).resolve().parent / "data"   # recorded inputs: tests/data/README.md
BIN = Path(sys.executable).parent
MPIEXEC = str(BIN / "mpiexec") if (BIN / "mpiexec").exists() else "mpiexec"


def mpi_env() -> dict:
    env = dict(os.environ)
    # waiting ranks yield their core: runs with more ranks than cores behave
    env.setdefault("MPIR_CVAR_ENABLE_HEAVY_YIELD", "1")
    # one BLAS thread per rank: several ranks on 2 cores already share them
    for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(v, "1")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run(cmd: list[str], timeout: float = 300, check: bool = True, **kw):
    """Run a command; on failure show its output in the assertion message."""
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       env=kw.pop("env", mpi_env()), cwd=kw.pop("cwd", ROOT), **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} exited {p.returncode}\n"
                             f"--- stdout\n{p.stdout[-4000:]}\n--- stderr\n{p.stderr[-4000:]}")
    return p


def mpirun(n: int, args: list[str], **kw):
    return run([MPIEXEC, "-n", str(n), sys.executable] + [str(a) for a in args], **kw)


def trace(n: int, out: Path, app: list, **kw):
    """mpiexec -n N python -m instrument trace -o OUT app..."""
    return mpirun(n, ["-m", "instrument", "trace", "-o", str(out)] + [str(a) for a in app], **kw)


@pytest.fixture(scope="session")
def coverage_trace(tmp_path_factory):
    """One traced run of tests/apps/coverage.py at 4 ranks, shared by tests."""
    out = tmp_path_factory.mktemp("cov") / "trace"
    p = trace(4, out, [APPS / "coverage.py"])
    from contracts.trace import load_trace
    return load_trace(str(out)), p


def record(n: int, out: Path, ranks, app: list, options=(), **kw):
    """mpiexec -n N python -m instrument record --ranks R -o OUT [options] app..."""
    return mpirun(n, ["-m", "instrument", "record", "--ranks", ",".join(map(str, ranks)),
                      "-o", str(out), *options] + [str(a) for a in app], **kw)


def host_lines(stdout: str, prefix: str) -> dict:
    """rank -> its output line from a run whose lines start ``rank <r> ``."""
    out = {}
    for line in stdout.replace("rank ", "\nrank ").splitlines():
        if line.startswith(prefix):
            out[int(line.split()[1])] = line.strip()
    return out


@pytest.fixture(scope="session")
def jacobi_trace(tmp_path_factory):
    """A 4-rank trace of examples/jacobi.py (64 x 64, 20 iterations), read
    by the simulator's and the exports' tests."""
    out = tmp_path_factory.mktemp("jac") / "t"
    trace(4, out, [EXAMPLES / "jacobi.py", "--n", "64", "--iters", "20", "--check", "5"])
    return out
