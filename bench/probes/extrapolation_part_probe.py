"""How much of an extrapolated prediction's error is the extrapolation?

    python bench/probes/extrapolation_part_probe.py X64_DIR APP [--ranks 64]

``X64_DIR`` is a saved run of ``bench/virtual_cores.py extrapolate``
(OUT/X64).  The probe applies the method at the target N itself, without
extrapolating: APP traced at N on the host, clustered and recorded, its
representatives replayed on a cluster of N virtual cores brought up
anew (one replay unkept first, as the extrapolation does), expanded,
and simulated on the platform fitted in that run (X64_DIR/APP/
platform.yaml), with and without the copies' variability.  Against the
run's real median (X64_DIR/APP/row.json): what the method errs at N
with a real trace; the rest of the extrapolated row's error is the
extrapolation's.  It prints the replayed computation a copy beside it.

Found 2026-12-01 (cg, 16/32 -> 64, +22.5 %): replayed at 64, 3.23 and
2.84 s of computation a copy (two runs of the probe), where the
extrapolation had 3.25; the method on the real trace at 64, +20.1 and
+17.6 % (without variability +16.5 and +16.3 %).  cg's error at
64 is not its extrapolation but the time its Sendrecv chain and
Allreduces wait on cores of 0.025 CPU (a 40 ms quota period).

Needs root and the cgroup v1 cpu controller (as virtual cores do).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path[:0] = [str(ROOT), str(HERE.parent), str(HERE.parent / "apps")]
from run import (  # noqa: E402
    PY,
    app_args,
    app_environment,
    expand_round,
    host_stages,
    load_recipes,
    page_reporting_off,
    replay_round,
    sh,
)
from virtual_cores import (  # noqa: E402
    HOST_MPI,
    TIMEOUT,
    replayed_total,
    share_for,
    virtual_cluster,
    warm_up_replay,
)

from emulate.isolate import MARK, enter, isolated  # noqa: E402


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("saved", type=Path, help="a saved extrapolation run, OUT/X<N>")
    ap.add_argument("app")
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--recipes", default=str(HERE.parent / "apps" / "virtual_extrapolate.yaml"))
    a = ap.parse_args(argv)
    if os.environ.get(MARK) != "1":
        return isolated([PY, str(Path(__file__).resolve())] + argv)
    enter()
    n = a.ranks
    recipe = dict(load_recipes(Path(a.recipes))[a.app], ranks=n)
    app = app_args(recipe)
    d = Path(tempfile.mkdtemp(prefix=f"extrapolation_part.{a.app}."))
    with app_environment(recipe):
        host_stages(app, d, n, timeout=TIMEOUT, mpi_env=HOST_MPI)
        with page_reporting_off(False), \
                virtual_cluster("vcp", n, 2, 1e9, share_for(n), log=lambda s: None) as c:
            warm_up_replay(app, d, n, n, c)
            replay_round(app, d, n, 1, timeout=TIMEOUT, load=n, bind=c.core)
    print(f"replay at N={n}: {replayed_total(d / 'replay' / 'repeat1'):.3f} s of computation "
          f"a copy", flush=True)
    compute = expand_round(d, 1, variability=True)
    saved = json.loads((a.saved / a.app / "row.json").read_text())
    for what, extra in (("without variability", []),
                        ("with variability", ["--variability", str(d / "variability1.csv")])):
        out = d / "prediction.json"
        sh([PY, "-m", "netsim", str(d / "trace"), "--platform",
            str(a.saved / a.app / "platform.yaml"), "--compute", str(compute), *extra,
            "-o", str(out)], d / "simulate.log")
        t = json.loads(out.read_text())["predicted_time"]
        print(f"the method at N={n}, {what}: {t:.3f} s, {100 * (t / saved['measured'] - 1):+.1f} "
              f"% (extrapolated: {100 * saved['error' if extra else 'error_plain']:+.1f} %)",
              flush=True)
    shutil.rmtree(d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
