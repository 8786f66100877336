#!/bin/bash
# The validation tables at larger N, in one run, on a machine with more cores.
#
#   bash bench/larger_n.sh [--ranks "4 8 16"] [--rounds 5] [--apps a,b] [--out DIR]
#                          [--wheels DIR]
#
# From a fresh checkout: installs the project (.venv, pip install -e .;
# with --wheels DIR from a folder of wheels, for a machine without the
# package index), then for every N of --ranks that fits the machine's
# cores:
#   - the applications table (bench/apps/run.py) on the repository's
#     examples (bench/apps/examples.yaml) and on the third-party recipes
#     whose sources are installed (bench/apps/install.sh);
#   - where emulated clusters can be made here (root, unshare, ip, tc),
#     the porting study (bench/porting_study.py) at N emulated nodes.
# Writes each table's results under DIR/N<N>/ and all the markdown tables
# in DIR/TABLES.md (default DIR: bench/larger_n/results).  An N larger than
# the cores is skipped: oversubscribed real runs measure nothing.  --apps
# keeps only those examples (jacobi, cg, fft2d, master-worker, uneven) in
# both tables, and no third-party applications.
set -euo pipefail
cd "$(dirname "$0")/.."
RANKS="4 8 16"
ROUNDS=5
OUT=bench/larger_n/results
WHEELS=
APPS=
while [ $# -gt 0 ]; do
    case "$1" in
        --ranks) RANKS="$2"; shift 2 ;;
        --rounds) ROUNDS="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        --wheels) WHEELS="$2"; shift 2 ;;
        --apps) APPS="$2"; shift 2 ;;
        -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "larger_n.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c "import mpi4py, netsim" 2>/dev/null; then
    echo "installing the project into .venv"
    python3 -m venv .venv
    if [ -n "$WHEELS" ]; then
        .venv/bin/pip install -q --no-index --find-links "$WHEELS" -e .
    else
        .venv/bin/pip install -q -e .
    fi
fi
PY=.venv/bin/python
CORES=$(nproc)
EMULATE=$($PY -c "from emulate.isolate import available; print(available() or 'yes')")
# the third-party recipes whose sources are here
ONLY=()
[ -n "$APPS" ] && ONLY=(--apps "$APPS")
THIRD=$([ -n "$APPS" ] || $PY - <<'EOF'
import sys
sys.path.insert(0, "bench/apps")
from run import app_args, load_recipes
ok = []
for name, recipe in load_recipes().items():
    try:
        app_args(recipe)
        ok.append(name)
    except SystemExit:
        pass
print(",".join(ok))
EOF
)
{
    echo "# Validation at larger N"
    echo
    echo "$(date -u +%F), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), rounds $ROUNDS."
} > "$OUT/TABLES.md"
for N in $RANKS; do
    if [ "$N" -gt "$CORES" ]; then
        echo "N=$N: more ranks than the $CORES cores here; skipped" | tee -a "$OUT/TABLES.md"
        continue
    fi
    echo "== N=$N: the examples"
    { echo; echo "## N=$N: examples (bench/apps/run.py --recipes bench/apps/examples.yaml)"; echo; } >> "$OUT/TABLES.md"
    $PY bench/apps/run.py --recipes bench/apps/examples.yaml "${ONLY[@]}" --ranks "$N" --repeats "$ROUNDS" \
        --out "$OUT/N$N/examples" --markdown | tee "$OUT/N$N-examples.log" \
        | sed -n '/^| app/,$p' >> "$OUT/TABLES.md" || echo "(failed: $OUT/N$N-examples.log)" >> "$OUT/TABLES.md"
    if [ -n "$THIRD" ]; then
        echo "== N=$N: third-party applications ($THIRD)"
        { echo; echo "## N=$N: third-party applications"; echo; } >> "$OUT/TABLES.md"
        $PY bench/apps/run.py --apps "$THIRD" --ranks "$N" --repeats "$ROUNDS" \
            --out "$OUT/N$N/apps" --markdown | tee "$OUT/N$N-apps.log" \
            | sed -n '/^| app/,$p' >> "$OUT/TABLES.md" || echo "(failed: $OUT/N$N-apps.log)" >> "$OUT/TABLES.md"
    fi
    if [ "$EMULATE" = yes ]; then
        echo "== N=$N: porting study on emulated clusters"
        { echo; echo "## N=$N: porting study (bench/porting_study.py)"; echo; } >> "$OUT/TABLES.md"
        $PY bench/porting_study.py "${ONLY[@]}" --ranks "$N" --rounds "$ROUNDS" --out "$OUT/N$N/porting" \
            --markdown | tee "$OUT/N$N-porting.log" \
            | sed -n '/^| app/,$p' >> "$OUT/TABLES.md" || echo "(failed: $OUT/N$N-porting.log)" >> "$OUT/TABLES.md"
    else
        echo "N=$N: no emulated cluster here ($EMULATE)" | tee -a "$OUT/TABLES.md"
    fi
done
echo "tables: $OUT/TABLES.md"
