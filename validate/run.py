"""Real runs of the application, untraced, timed as a prediction is."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def measure(target: list[str], ranks: int, repeats: int, mpiexec: str | None = None,
            env: dict | None = None, log=print, timeout: float | None = None,
            launcher_options: tuple = ()) -> dict:
    """Run ``target`` (python arguments: app.py [args], -m mod ..., -c cmd ...)
    untraced at ``ranks`` ranks ``repeats`` times (each within ``timeout``
    seconds, if given; ``launcher_options`` go to mpiexec, e.g. MPICH's
    ``-bind-to core``); returns
    ``{measured, runs, wall}`` (seconds; measured = min of runs)."""
    mpiexec = mpiexec or os.path.join(os.path.dirname(sys.executable), "mpiexec")
    # a dedicated run, one rank per core: MPI's default busy-polling waits,
    # not the yielding that oversubscribed tracing needs (with it the OSU and
    # FFT apps ran 2x slower here); calibrate measures the network that way too
    env = dict(os.environ if env is None else env)
    env["MPIR_CVAR_ENABLE_HEAVY_YIELD"] = "0"
    runs, wall = [], []
    for i in range(repeats):
        out = tempfile.mkdtemp(prefix="validate-")
        try:
            cmd = [mpiexec, *launcher_options, "-n", str(ranks), sys.executable, "-m",
                   "validate.clock",
                   "--out", out] + list(target)
            t0 = time.perf_counter()
            p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True, env=env, timeout=timeout)
            wall.append(time.perf_counter() - t0)
            if p.returncode:
                raise RuntimeError(f"run {i + 1} of {' '.join(cmd)} exited {p.returncode}: "
                                   f"{p.stderr[-2000:]}")
            spans = []
            for r in range(ranks):
                with open(os.path.join(out, f"rank{r}.json")) as f:
                    spans.append(json.load(f)["span"])
        finally:
            shutil.rmtree(out, ignore_errors=True)
        runs.append(max(spans))
        log(f"run {i + 1}/{repeats}: {runs[-1]:.4f} s (whole command {wall[-1]:.4f} s)")
    return {"measured": min(runs), "runs": runs, "wall": wall}
