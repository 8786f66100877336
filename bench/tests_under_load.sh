#!/usr/bin/env bash
# The README's test command, K times in a row (default 10), beside B
# CPU-bound neighbours (spinning processes, default 1):
#     bash bench/tests_under_load.sh [K] [B]
# no test may depend on the machine being quiet.  Runs on a git worktree of HEAD, so that editing
# the checkout meanwhile changes nothing.  Prints one line per run.
set -u
K=${1:-10}
cd "$(dirname "$0")/.."
ROOT=$PWD
WT=$(mktemp -d /tmp/under-load-XXXX)
git worktree add -f -q "$WT" HEAD
cp instrument/_hotpath*.so "$WT/instrument/"
B=${2:-1}
BURN=""
for _ in $(seq 1 "$B"); do
    python3 -c "while True: pass" &
    BURN="$BURN $!"
done
trap 'kill $BURN; git -C "$ROOT" worktree remove --force "$WT"' EXIT
for i in $(seq 1 "$K"); do
    start=$(date +%s)
    (cd "$WT" && PYTHONPATH="$WT" "$ROOT/.venv/bin/python" -m pytest -q -p no:cacheprovider \
        > "$WT/run$i.log" 2>&1)
    echo "run $i: rc $? in $(( $(date +%s) - start )) s: $(tail -1 "$WT/run$i.log")"
done
