#!/usr/bin/env bash
# The README's test command, K times in a row (default 10), beside a
# CPU-bound neighbour (one spinning process): no test may depend on the
# machine being quiet.  Runs on a git worktree of HEAD, so that editing
# the checkout meanwhile changes nothing.  Prints one line per run.
set -u
K=${1:-10}
cd "$(dirname "$0")/.."
ROOT=$PWD
WT=$(mktemp -d /tmp/under-load-XXXX)
git worktree add -f -q "$WT" HEAD
cp instrument/_hotpath*.so "$WT/instrument/"
python3 -c "while True: pass" &
BURN=$!
trap 'kill $BURN; git -C "$ROOT" worktree remove --force "$WT"' EXIT
for i in $(seq 1 "$K"); do
    start=$(date +%s)
    (cd "$WT" && PYTHONPATH="$WT" "$ROOT/.venv/bin/python" -m pytest -q -p no:cacheprovider \
        > "$WT/run$i.log" 2>&1)
    echo "run $i: rc $? in $(( $(date +%s) - start )) s: $(tail -1 "$WT/run$i.log")"
done
