#!/usr/bin/env bash
# Old code against new on the same inputs: a refactoring must not change
# what any stage writes.  Takes two source trees (e.g. a `git worktree` of
# the old commit, and this one) and the results directory of one main job
# (`snakemake -c2`); reruns every stage whose output is determined by its
# input with each tree and compares the outputs byte for byte (a
# prediction without the simulator's own run time and the platform's
# path).  The trace and the message log are made anew by each tree from
# the same application and compared on their non-timing content; each
# tree's replay reads the other's message log.
#
#   bash bench/probes/old_against_new.sh OLD_TREE NEW_TREE RESULTS [OUT]
set -euo pipefail
old=$(realpath "$1"); new=$(realpath "$2"); res=$(realpath "$3"); out=${4:-/tmp/old_against_new}
here=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-$here/.venv/bin/python}
mpiexec=$(dirname "$py")/mpiexec
app=(examples/uneven.py --iters 8 --work 60000 --classes 2)
rm -rf "$out"; mkdir -p "$out"
"$py" - "$new/config/platforms/ib-cluster.yaml" "$out/goal.yaml" <<'PY'
import sys, yaml
p = yaml.safe_load(open(sys.argv[1])); p["collectives"] = {"default": "binomial"}
yaml.safe_dump(p, open(sys.argv[2], "w"))
PY
for side in old new; do
  tree=${!side}; o=$out/$side; mkdir -p "$o"
  run() { (cd "$tree" && PYTHONPATH=$tree "$@"); }
  # from the same inputs: the main job's trace, replays and platforms
  run "$py" -m cluster "$res/trace" -o "$o/representatives.csv" --summary "$o/summary.csv" \
      --vector cpu --threshold auto > "$o/cluster.log" 2>&1
  run "$py" -m replay.expand "$res/trace" "$res/representatives.csv" "$res/replay" \
      -o "$o/compute.csv" --variability "$o/variability.csv" > "$o/expand.log" 2>&1
  for p in "$tree"/config/platforms/*.yaml; do
    b=$(basename "$p" .yaml)
    run "$py" -m netsim "$res/trace" --platform "$p" --compute "$res/compute.csv" \
        --variability "$res/variability.csv" --samples 15 --seed 0 -o "$o/$b.json" \
        --timeline "$o/${b}_timeline.json" > "$o/netsim_$b.log" 2>&1 || rm -f "$o/$b.json"
  done
  # the schedule itself, on a platform whose collectives GOAL can express
  run "$py" -m netsim "$res/trace" --platform "$out/goal.yaml" --compute "$res/compute.csv" \
      -o "$o/goal.json" --goal-out "$o/schedule.goal" > "$o/goal.log" 2>&1
  # made anew: traces and message logs of the same applications (the
  # example, and the test programs that together call every op of the table)
  for a in uneven table_ops coverage; do
    [ $a = uneven ] && cmd=("${app[@]}") || cmd=("$new/tests/apps/$a.py")
    run "$mpiexec" -n 4 "$py" -m instrument trace -o "$o/trace_$a" --force "${cmd[@]}" \
        > "$o/trace_$a.log" 2>&1
    run "$mpiexec" -n 4 "$py" -m instrument record --ranks 0,1,2,3 -o "$o/msglog_$a" --force \
        "${cmd[@]}" > "$o/record_$a.log" 2>&1
  done
done
# each tree replays the other's message logs
for pair in "old new" "new old"; do
  set -- $pair; tree=${!1}
  for a in uneven table_ops coverage; do
    [ $a = uneven ] && cmd=("${app[@]}") || cmd=("$new/tests/apps/$a.py")
    (cd "$tree" && PYTHONPATH=$tree "$py" -m replay --ranks 0,1,2,3 --size 4 \
        --log "$out/$2/msglog_$a" -o "$out/replay_$1_of_$2_$a" "${cmd[@]}" \
        > "$out/replay_$1_of_$2_$a.log" 2>&1)
  done
done
"$py" - "$out" <<'PY'
import json, sys, pathlib, filecmp
import pandas as pd
out = pathlib.Path(sys.argv[1]); o, n = out / "old", out / "new"
bad = 0
def same(name, ok):
    global bad
    print(("same     " if ok else "DIFFERS  ") + name); bad += not ok
for f in sorted(o.iterdir()):
    if not (n / f.name).exists():
        same(f.name + " (new lacks it)", False); continue
    if f.suffix in (".csv", ".goal") or f.name.endswith("_timeline.json"):
        same(f.name, filecmp.cmp(f, n / f.name, shallow=False))
    elif f.suffix == ".json":
        a, b = (json.loads(p.read_text()) for p in (f, n / f.name))
        for d in (a, b):   # where it ran and how long the simulator took
            d.get("platform", {}).pop("source", None)
            for k in ("seconds", "events_per_second"):
                d.get("simulation", {}).pop(k, None)
        same(f.name, a == b)
sys.path.insert(0, str(pathlib.Path(__file__).parent) if "__file__" in dir() else ".")
from contracts.trace import load_trace
timing = ["comp", "cpu", "t_start", "t_end", "poll_cpu", "poll_gap", "polls"]
# coverage.py polls (how often depends on timing): its events differ run to run
for app in ("uneven", "table_ops"):
    to, tn = load_trace(str(o / f"trace_{app}")), load_trace(str(n / f"trace_{app}"))
    for t in ("events", "comms", "topology"):
        a, b = getattr(to, t), getattr(tn, t)
        a = a.drop(columns=[c for c in timing if c in a])
        b = b.drop(columns=[c for c in timing if c in b])
        same(f"trace of {app}: {t} (timing columns left out)", a.equals(b))
for app in ("uneven", "table_ops", "coverage"):
    for side in ("old_of_new", "new_of_old"):
        d = out / f"replay_{side}_{app}"
        ref = out / ("new" if side == "old_of_new" else "old")
        printed = all((d / f"rank{r}.out").exists() for r in range(4))
        if app != "coverage":      # without polls: the trace's calls in its order
            ev = load_trace(str(ref / f"trace_{app}")).events
            printed = printed and all(pd.read_csv(d / f"rank{r}.csv")["op"].tolist()
                                      == ev.query("rank == @r")["op"].tolist() for r in range(4))
        same(f"{app}: replay {side.replace('_of_', ' of ')}'s message log", printed)
print("all same" if not bad else f"{bad} differ"); sys.exit(1 if bad else 0)
PY
