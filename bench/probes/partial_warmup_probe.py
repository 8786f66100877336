"""Why a partial replay predicts more than the whole one: the loop's
iterations on the host trace and in a whole replay, early against late.

    python bench/partial_replay.py --apps fft-navier-stokes --rounds 2   # first
    python bench/probes/partial_warmup_probe.py [APP_DIR] [RANK]

Prints per-iteration computation (ms) of the first iterations, the mean of
the iterations the partial replay measures (after its warm-up) and of the
rest, in the host trace and in every whole replay of the benchmark.
Where the whole replay's early iterations are slower than its later ones
for longer than the host trace showed, the plan's warm-up (chosen from the
host trace) is too short, and the mean of the measured iterations stands
too high for the rest (fft-navier-stokes, 2026-11-29: host +13 % early,
replay +29 %, settling over about 200 iterations).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def iterations(comp: np.ndarray, start: int, period: int, n: int) -> np.ndarray:
    n = min(n, (len(comp) - start) // period)
    return comp[start:start + n * period].reshape(n, period).sum(axis=1)


def main() -> None:
    from contracts.trace import load_trace
    d = Path(sys.argv[1] if len(sys.argv) > 1 else
             ROOT / "bench/out/partial_replay/fft-navier-stokes")
    plan = pd.read_csv(d / "partial.csv")
    row = plan.iloc[0] if len(sys.argv) < 3 else plan[plan["rank"] == int(sys.argv[2])].iloc[0]
    r, st, per, n = int(row["rank"]), int(row["start"]), int(row["period"]), int(row["iterations"])
    lo, hi = int(row["warmup"]), int(row["warmup"]) + int(row["replayed"])
    ev = load_trace(str(d / "trace"), columns=["rank", "seq", "cpu"]).events
    series = {"host trace (cpu)": ev[ev["rank"] == r].sort_values("seq")["cpu"].to_numpy()}
    for w in sorted(d.glob("replay_whole*")):
        series[w.name] = pd.read_csv(w / f"rank{r}.csv")["comp"].to_numpy()
    print(f"rank {r}: loop of {per} calls x {n} from event {st}; measured iterations {lo}-{hi - 1}")
    for name, comp in series.items():
        it = iterations(comp, st, per, n) * 1e3
        print(f"{name:18s} first {np.round(it[:6], 2)}  measured mean {it[lo:hi].mean():.3f}  "
              f"rest {it[hi:].mean():.3f}  ({it[lo:hi].mean() / it[hi:].mean() - 1:+.1%})")


if __name__ == "__main__":
    main()
