"""Rebuild the CSV files of this folder from their public sources.

    python bench/scaling_data/convert.py EXTRAP_CHECKOUT WAVETRISK_SPEEDUP_M ARCHER_CHECKOUT

EXTRAP_CHECKOUT is a checkout of github.com/extra-p/extrap,
WAVETRISK_SPEEDUP_M the file post/scaling/speedup.m of
github.com/kevlahan/wavetrisk_hydrostatic, and ARCHER_CHECKOUT a checkout of
github.com/hpc-uk/archer-benchmarks (archer.csv, machines.csv and opensbli.csv; commits
in SOURCES.md).  Every output has the columns ``series, procs, time``
(and ``size`` where the source varies a second parameter), one row per
measured run.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).parent


def mpi_collectives(extrap: Path) -> pd.DataFrame:
    """Median latency (us) of 7 collectives in two MPI libraries, 32-512 ranks."""
    d = pd.read_csv(extrap / "tests/data/mpi_data.csv")
    return pd.DataFrame({"series": d["mpi"] + " " + d["variable"], "procs": d["Ranks"],
                         "time": d["median"]})


def relearn(extrap: Path) -> pd.DataFrame:
    """Extra-P's text format: POINTS (p n), then per REGION one DATA line per point."""
    text = (extrap / "tests/data/text/mpa/relearn_data.txt").read_text()
    points = [tuple(map(float, m)) for m in re.findall(r"POINTS \( (\S+) (\S+) \)", text)]
    rows = []
    for block in re.split(r"\n(?=REGION)", text)[1:]:
        region = block.splitlines()[0].removeprefix("REGION").strip()
        data = re.findall(r"^DATA (.*)$", block, flags=re.M)
        for (p, n), line in zip(points, data):
            for v in line.split():
                rows.append({"series": region, "procs": int(p), "size": int(n),
                             "time": float(v)})
    return pd.DataFrame(rows)


def wavetrisk(speedup_m: Path) -> pd.DataFrame:
    """Strong scaling of a climate dynamical core on three machines (cpu s per run)."""
    text = speedup_m.read_text()
    first, rest = re.split(r"^% 640 domains", text, maxsplit=1, flags=re.M)
    blocks = {"2560 domains": first, "640 domains": rest.split("%% Results")[0]}
    rows = []
    for label, block in blocks.items():
        for tag, machine in (("bb", "bbserv"), ("nia", "niagara"), ("orme", "orme"),
                             ("nia_old", "niagara 2018"),
                             ("nia_adapt_old", "niagara 2018 adaptive")):
            cores = re.search(rf"^cores_{tag}\s*=\s*\[([^\]]*)\]", block, flags=re.M)
            cpu = re.search(rf"^cpu_{tag}\s*=\s*\[([^\]]*)\]", block, flags=re.M)
            if not (cores and cpu):
                continue
            nums = lambda s: [float(x) for x in s.replace("...", " ").split()]
            for q, t in zip(nums(cores.group(1)), nums(cpu.group(1)), strict=True):
                rows.append({"series": f"{machine}, {label}", "procs": int(q), "time": t})
    return pd.DataFrame(rows)


# per application: its folder, what the file name says (nodes, variant), the
# line with the run's wall seconds, and the series the variant makes
_ARCHER = (
    ("apps/CASTEP/DNA", r"\.(\d+)nodes\.(\d+)threads", r"Total time\s*=\s*([\d.]+) s",
     "CASTEP DNA, {} thread(s)"),
    ("apps/GROMACS/large", r"_(\d+)nodes(\d)smt", r"^\s+Time:\s+[\d.]+\s+([\d.]+)",
     "GROMACS large, {} SMT"),
    ("apps/CP2K/LiH_HFX", r"CP2K_(\d+)\.()", r"^ CP2K\s+1\s.*\s([\d.]+)\s*$",
     "CP2K LiH_HFX"),
)


def archer(checkout: Path) -> pd.DataFrame:
    """ARCHER's baseline runs of three applications: nodes, wall seconds, repeats."""
    rows = []
    for folder, name_re, time_re, series in _ARCHER:
        for f in sorted((checkout / folder / "results/ARCHER_baseline").iterdir()):
            m = re.search(name_re, f.name)
            t = re.findall(time_re, f.read_text(errors="replace"), flags=re.M)
            if m and t:                      # runs that stopped early have none
                rows.append({"series": series.format(m[2]), "procs": int(m[1]),
                             "time": float(t[-1])})
    return pd.DataFrame(rows)


def _runs(folder: Path, names: bool = False):
    """(machine, text) of every file under ``folder``, the machine being the
    first folder below it; (machine, file name, text) with ``names``."""
    for f in sorted(folder.rglob("*")):
        if f.is_file():
            machine, text = f.relative_to(folder).parts[0], f.read_text(errors="replace")
            yield (machine, f.name, text) if names else (machine, text)


def machines(checkout: Path) -> pd.DataFrame:
    """GROMACS (1.4M atoms) and CASTEP (al3x3) on the other machines of the
    same repository: one series per application and machine (build
    variants and runs of one machine together; the benchmark keeps the
    fastest run per process count).  GROMACS: nodes, and seconds per
    simulated ns (its hours/ns: runs differ in step count); GPU runs left
    out.  CASTEP: MPI processes, and the run's total seconds."""
    rows = []
    for machine, text in _runs(checkout / "apps/GROMACS/1400k-atoms/results"):
        nodes = re.search(r"Running on (\d+) nodes? with total [^\n]*", text)
        perf = re.findall(r"^Performance:\s+[\d.]+\s+([\d.]+)", text, flags=re.M)
        if nodes and perf and "GPU" not in nodes[0]:
            rows.append({"series": f"GROMACS 1400k, {machine}", "procs": int(nodes[1]),
                         "time": float(perf[-1]) * 3600})
    for machine, text in _runs(checkout / "apps/CASTEP/al3x3/results"):
        procs = re.search(r"Calculation parallelised over\s+(\d+) process", text)
        t = re.findall(r"^Total time\s*=\s*([\d.]+) s", text, flags=re.M)
        if procs and t:
            rows.append({"series": f"CASTEP al3x3, {machine}", "procs": int(procs[1]),
                         "time": float(t[-1])})
    return pd.DataFrame(rows)


def opensbli(checkout: Path) -> pd.DataFrame:
    """OpenSBLI's Taylor-Green vortex (512^3 and 1024^3 grid points) on the
    same repository's machines: one series per grid and machine (compilers
    and thread counts of one machine together), nodes from the file name,
    and the seconds one time step took (runs differ in step count)."""
    rows = []
    for case in ("TGV512ss", "TGV1024ss"):
        for machine, name, text in _runs(checkout / f"apps/OpenSBLI/{case}/results",
                                         names=True):
            nodes = re.search(r"[_-](\d+)nodes", name)
            t = re.findall(r"^Time taken for 1 iteration, ([\d.]+)", text, flags=re.M)
            if nodes and t:                  # job logs without a node count are left out
                rows.append({"series": f"OpenSBLI {case}, {machine}",
                             "procs": int(nodes[1]), "time": float(t[-1])})
    return pd.DataFrame(rows)


if __name__ == "__main__":
    extrap, speedup = Path(sys.argv[1]), Path(sys.argv[2])
    archer(Path(sys.argv[3])).to_csv(HERE / "archer.csv", index=False)
    machines(Path(sys.argv[3])).to_csv(HERE / "machines.csv", index=False)
    opensbli(Path(sys.argv[3])).to_csv(HERE / "opensbli.csv", index=False)
    mpi_collectives(extrap).to_csv(HERE / "mpi_collectives.csv", index=False)
    relearn(extrap).to_csv(HERE / "relearn.csv", index=False)
    wavetrisk(speedup).to_csv(HERE / "wavetrisk.csv", index=False)
