"""Why a bundle's replay measures other times than a local one on the same
node: the same log replayed alternately by the host's venv and by the
bundle's (run.sh's) venv, each in the workflow's environment and in a bare
one (`env -i`), two rounds.

    python bench/bundle_roundtrip.py --apps jacobi     # makes the bundle first
    python bench/probes/bundle_env_probe.py [DIR]      # DIR: bench/out/bundle_roundtrip/jacobi

Prints, per variant, the replayed computation (wall, CPU) summed over the
representatives, over the first variant's.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def replay(d: Path, py: str, env: dict, out: Path) -> tuple[float, float]:
    from contracts.replayed import read_replayed
    man = json.loads((d / "target" / "bundle" / "manifest.json").read_text())
    app = man["app"]["argv"]
    subprocess.run([py, "-m", "replay", "--ranks", ",".join(map(str, man["ranks"])), "--log",
                    str(d / "msglog"), "-o", str(out), "--load", "2", "--force", *app],
                   cwd=ROOT, env=env, check=True, capture_output=True)
    comp = cpu = 0.0
    for r in man["ranks"]:
        t = read_replayed(str(out / f"rank{r}.csv"))
        comp, cpu = comp + t["comp"].sum(), cpu + t["cpu"].sum()
    return comp, cpu


def main() -> None:
    d = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "bench/out/bundle_roundtrip/jacobi")
    bundle_py = str(d / "target" / "bundle" / "venv" / "bin" / "python")
    work = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                MKL_NUM_THREADS="1", MPIR_CVAR_ENABLE_HEAVY_YIELD="1")
    bare = {"PATH": "/usr/bin:/bin", "HOME": str(d), "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    variants = {
        "host venv, workflow env": (sys.executable, work | {"PYTHONPATH": str(ROOT)}),
        "host venv, bare env": (sys.executable, bare | {"PYTHONPATH": str(ROOT)}),
        "bundle venv, workflow env": (bundle_py, work | {"PYTHONPATH": str(ROOT)}),
        "bundle venv, bare env": (bundle_py, bare | {"PYTHONPATH": str(ROOT)}),
    }
    res: dict = {k: [] for k in variants}
    for rnd in range(2):
        for k, (py, env) in variants.items():
            res[k].append(replay(d, py, env, d / "probe" / f"{rnd}_{k.replace(' ', '_')}"))
    first = res[next(iter(res))]
    base = [sum(x[i] for x in first) / len(first) for i in (0, 1)]
    for k, v in res.items():
        comp = sum(x[0] for x in v) / len(v)
        cpu = sum(x[1] for x in v) / len(v)
        print(f"{k:28s} comp {comp / base[0]:.3f}  cpu {cpu / base[1]:.3f}  "
              f"(rounds: {', '.join(f'{x[0]:.3f}' for x in v)} s)")


if __name__ == "__main__":
    main()
