#!/bin/bash
# Does the emulated network's latency on virtual cores depend on the
# cluster (the phase of each core's quota period) or on the launch?
# Brings up an 8 x 2 cluster of 0.1-CPU cores three times in turn and
# measures rank 0's ping-pongs with ranks 1 to RANKS-1 (default 4 ranks)
# twice in each (root; about 6 minutes at 4 ranks).  Found 2026-11-30: a
# pair's one-way time is 0.02 ms, 1.5-1.7 ms or 4.4-5.0 ms (a round trip
# per quota period), the same in both launches within a cluster,
# different from one cluster to the next, on one CPU as on two: the quota
# periods keep their phases.  With RANKS=16 (one launch, one cluster)
# rank 0 took 5.0 ms to 13 of its 15 peers, 0.14 ms to rank 2, 1.1 ms to
# rank 7.  On a quiet host only: run beside the test suite, launches
# within one cluster differed too (rank 3: 1.0 then 5.0 ms).
set -e
cd "$(dirname "$0")/../.."
P=${PYTHON:-.venv/bin/python}
RANKS=${RANKS:-4}
# a failed measurement still takes the cluster down
trap '$P -m emulate down --name vcp > /dev/null 2>&1 || true' EXIT
for cluster in A B C; do
    $P -m emulate up --name vcp --nodes 8 --cores-per-node 2 --core-share 0.1 \
        --rate 10gbit > /dev/null
    for launch in 1 2; do
        out=$(mktemp --suffix .csv)
        MPIR_CVAR_ENABLE_HEAVY_YIELD=0 /run/repreplay-emulate/vcp/mpiexec -n "$RANKS" \
            $P -m calibrate measure --repeats 3 --max-bytes 4 -o "$out" > /dev/null
        $P - "$out" "$cluster" "$launch" <<'PY'
import sys
import pandas as pd
rows = pd.read_csv(sys.argv[1])
one_way = rows[rows["what"] == "pingpong"].groupby("peer")["one_way"].median() * 1e3
print(f"cluster {sys.argv[2]} launch {sys.argv[3]}: one way, ms: "
      + ", ".join(f"rank {p} {t:.3f}" for p, t in one_way.items()))
PY
        rm -f "$out"
    done
    $P -m emulate down --name vcp > /dev/null
done
