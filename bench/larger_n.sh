#!/bin/bash
# The validation tables at larger N, in one run, on a machine with more cores.
#
#   bash bench/larger_n.sh [--ranks "4 8 16"] [--rounds 5] [--apps a,b] [--out DIR]
#                          [--wheels DIR] [--python PY] [--budget SECONDS]
#                          [--app-seconds S] [--no-probe] [--recipes FILE]
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
# An N larger than the cores is validated on virtual cores instead where
# the machine has the cgroup v1 cpu controller and root
# (bench/virtual_cores.py table, an emulated cluster of N slow cores:
# DIR/virtual/), so a 2-core machine gives the table at N=8, 16 too.
# The largest N runs first.  Writes each table's results under DIR/N<N>/
# and all the markdown tables in DIR/TABLES.md (default DIR:
# bench/larger_n/results).  An N larger than
# the cores is skipped: oversubscribed real runs measure nothing.  --apps
# keeps only those examples (jacobi, cg, fft2d, master-worker, uneven,
# rma-halo, parareal) in both tables, and no third-party applications.
#
# --python PY: use PY's own environment instead of a .venv (a machine that
# has NumPy, pandas and the rest but no package index): the wheels of
# --wheels are installed into it without their dependencies, and the
# tracer's C extension must already be built for PY (instrument/_hotpath
# *.so); bench/larger_n_carry.sh prepares both here, for a lent machine.
# --budget S: start no application after S seconds (each runs alone, so
# a lent machine's time ends between them, not inside one).
# --recipes FILE: at each N, one table of FILE's applications (those
# --apps names, or all) in place of the examples and third-party tables:
# bench/apps/virtual.yaml, sized for N = 16, makes the real-core table
# that the virtual-core table (bench/virtual_cores.py) is compared with.
# --no-probe: skip the first step, bench/probes/node_speed_probe.py at the
# largest N, which says how much the node's own speed varies (a floor
# under any error).
#
# Every application runs the rounds of bench/apps/run.py (interleaved:
# replays, one network measurement in the first round, real runs), its
# real runs' ranks bound to cores (--bind; each replay copy is bound to
# a core of its own), and is simulated with the variability model and
# without it on the same replays: the table has both errors and whether
# the model's 5-95 % band holds the measured median.  Each application
# is time-boxed: --app-seconds S (default: the budget shared out over the
# applications and N, at least 60 s; without a budget, none), after
# which it is stopped and its row says so.  The default budget, 660 s,
# fits the whole run in 12 minutes of a 16-core machine.  Where binding
# ranks to cores fails (some sandboxes), the runs go unbound and
# TABLES.md says so.
set -euo pipefail
cd "$(dirname "$0")/.."
RANKS="4 8 16"
ROUNDS=5
OUT=bench/larger_n/results
WHEELS=
APPS=
PYTHON=
BUDGET=660
APP_SECONDS=
PROBE=1
RECIPES=
while [ $# -gt 0 ]; do
    case "$1" in
        --ranks) RANKS="$2"; shift 2 ;;
        --rounds) ROUNDS="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        --wheels) WHEELS="$2"; shift 2 ;;
        --apps) APPS="$2"; shift 2 ;;
        --python) PYTHON="$2"; shift 2 ;;
        --budget) BUDGET="$2"; shift 2 ;;
        --app-seconds) APP_SECONDS="$2"; shift 2 ;;
        --probe) PROBE=1; shift ;;
        --no-probe) PROBE=; shift ;;
        --recipes) RECIPES="$2"; shift 2 ;;
        -h|--help) sed -n '2,54p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "larger_n.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
START=$(date +%s)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
if [ -n "$PYTHON" ]; then
    if [ -n "$WHEELS" ]; then
        # over what the interpreter has: its mpi4py may be built for another MPI
        "$PYTHON" -m pip install -q --no-index --no-deps --force-reinstall "$WHEELS"/*.whl
    fi
    # the project from this checkout, in every stage's process too
    export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
    PY=$("$PYTHON" -c "import sys; print(sys.executable)")
    "$PY" -c "import mpi4py, netsim, instrument._hotpath" || {
        echo "larger_n.sh: $PY lacks a dependency or the built tracer (see --help)" >&2; exit 1; }
else
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
fi
CORES=$(nproc)
VIRTUAL=$($PY -c "from emulate.cores import unavailable; print(unavailable() or 'yes')")
VIRTUAL_N=
EMULATE=$($PY -c "from emulate.isolate import available; print(available() or 'yes')")
# the examples, and the third-party recipes whose sources are here; or
# the applications of --recipes
TABLE_RECIPES=${RECIPES:-bench/apps/examples.yaml}
EXAMPLES=${APPS:-$($PY -c "import sys, yaml; print(','.join(yaml.safe_load(open(sys.argv[1]))))" "$TABLE_RECIPES")}
THIRD=$([ -n "$APPS$RECIPES" ] || $PY - <<'EOF'
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
# MPICH's -bind-to core, where this machine lets a rank be bound
BIND=--bind
if ! timeout 60 "$(dirname "$PY")/mpiexec" -bind-to core -n 2 "$PY" -c pass >/dev/null 2>&1; then
    BIND=
fi
if [ -z "$APP_SECONDS" ] && [ -n "$BUDGET" ]; then
    NAPPS=$(( $(tr , '\n' <<<"$EXAMPLES${THIRD:+,$THIRD}" | grep -c .) ))
    NN=0
    for n in $RANKS; do if [ "$n" -le "$CORES" ]; then NN=$((NN + 1)); fi; done
    APP_SECONDS=$(( BUDGET / ( (NAPPS > 0 ? NAPPS : 1) * (NN > 0 ? NN : 1) ) ))
    if [ "$APP_SECONDS" -lt 60 ]; then APP_SECONDS=60; fi
fi
in_budget() {   # what [file]: say so (in file) and fail once the budget is spent
    if [ -n "$BUDGET" ] && [ $(( $(date +%s) - START )) -ge "$BUDGET" ]; then
        echo "$1: not started, the budget of $BUDGET s is spent" | tee -a "${2:-$OUT/TABLES.md}"
        return 1
    fi
}
table() {  # N, title, log name, command...: one markdown table, app by app
    local n=$1 title=$2 name=$3; shift 3
    { echo; echo "## N=$n: $title"; echo; } >> "$OUT/TABLES.md"
    local rows=$OUT/N$n-$name.rows
    : > "$rows"
    for app in $(tr , ' ' <<<"$LIST"); do
        in_budget "N=$n $name $app" "$rows" || break
        echo "== N=$n: $name, $app"
        local rc=0
        ${APP_SECONDS:+timeout -k 10 "$APP_SECONDS"} "$@" --apps "$app" >> "$OUT/N$n-$name.log" 2>&1 || rc=$?
        if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
            echo "| $app | (stopped after its $APP_SECONDS s) |" >> "$rows"
        elif [ "$rc" != 0 ]; then
            echo "(failed: $app, $OUT/N$n-$name.log)" >> "$rows"
        fi
        grep "^| $app " "$OUT/N$n-$name.log" | tail -1 >> "$rows" || true
    done
    # the header from any table printed, then the rows in the order run
    grep -m2 -E '^\| app |^\|---' "$OUT/N$n-$name.log" >> "$OUT/TABLES.md" 2>/dev/null || true
    cat "$rows" >> "$OUT/TABLES.md"
}
{
    echo "# Validation at larger N"
    echo
    echo "$(date -u +%F), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), rounds $ROUNDS, ${APP_SECONDS:-unlimited} s per application, code $(git rev-parse --short HEAD 2>/dev/null || echo '?')$([ -n "$BIND" ] && echo ", ranks bound to cores" || echo ", ranks NOT bound: -bind-to core failed here")."
} > "$OUT/TABLES.md"
if [ -n "$PROBE" ]; then
    MAXN=$CORES
    for n in $RANKS; do if [ "$n" -le "$CORES" ]; then MAXN=$n; fi; done
    { echo; echo "## The node's own speed (bench/probes/node_speed_probe.py, $MAXN ranks)"; echo; } >> "$OUT/TABLES.md"
    "$(dirname "$PY")/mpiexec" -n "$MAXN" "$PY" bench/probes/node_speed_probe.py | tee -a "$OUT/TABLES.md"
fi
# the largest N first: it is the scarcest evidence, and a budget spent
# early must not leave it out
for N in $(tr ' ' '\n' <<<"$RANKS" | grep . | sort -rn); do
    if [ "$N" -gt "$CORES" ]; then
        if [ "$VIRTUAL" = yes ]; then
            VIRTUAL_N="$VIRTUAL_N $N"
        else
            echo "N=$N: more ranks than the $CORES cores here, and no virtual cores" \
                "($VIRTUAL); skipped" | tee -a "$OUT/TABLES.md"
        fi
        continue
    fi
    LIST=$EXAMPLES table "$N" "$(basename "$TABLE_RECIPES" .yaml) (bench/apps/run.py --recipes $TABLE_RECIPES)" \
        examples $PY bench/apps/run.py --recipes "$TABLE_RECIPES" --ranks "$N" \
        --repeats "$ROUNDS" $BIND --calibrate-once --out "$OUT/N$N/examples" --markdown
    if [ -n "$THIRD" ]; then
        LIST=$THIRD table "$N" "third-party applications" apps $PY bench/apps/run.py \
            --ranks "$N" --repeats "$ROUNDS" $BIND --calibrate-once --out "$OUT/N$N/apps" \
            --markdown
    fi
    if [ -n "$RECIPES" ]; then
        :   # the porting study runs the examples, not --recipes
    elif [ "$EMULATE" = yes ]; then
        # one run: it calibrates every emulated link once for all its apps
        in_budget "N=$N porting study" || continue
        echo "== N=$N: porting study on emulated clusters"
        { echo; echo "## N=$N: porting study (bench/porting_study.py)"; echo; } >> "$OUT/TABLES.md"
        $PY bench/porting_study.py ${APPS:+--apps "$APPS"} --ranks "$N" --rounds "$ROUNDS" \
            --out "$OUT/N$N/porting" --markdown | tee "$OUT/N$N-porting.log" \
            | sed -n '/^| app/,$p' >> "$OUT/TABLES.md" || echo "(failed: $OUT/N$N-porting.log)" >> "$OUT/TABLES.md"
    else
        echo "N=$N: no emulated cluster here ($EMULATE)" | tee -a "$OUT/TABLES.md"
    fi
done
if [ -n "$VIRTUAL_N" ] && in_budget "virtual cores, N =$VIRTUAL_N"; then
    echo "== N =$VIRTUAL_N: on virtual cores (bench/virtual_cores.py table)"
    LEFT=$(( BUDGET > 0 ? BUDGET - ($(date +%s) - START) : 0 ))
    # the --apps that bench/apps/virtual.yaml sizes for virtual cores
    VAPPS=$([ -z "$APPS" ] || $PY -c "import sys, yaml; known = yaml.safe_load(open(
        'bench/apps/virtual.yaml')); print(','.join(a for a in sys.argv[1].split(',') if a in known))" "$APPS")
    $PY bench/virtual_cores.py table --recipes bench/apps/virtual.yaml ${VAPPS:+--apps "$VAPPS"} \
        --ranks "$VIRTUAL_N" --rounds "$ROUNDS" ${BUDGET:+--budget "$LEFT"} \
        --out "$OUT/virtual" > "$OUT/virtual.log" 2>&1 \
        || echo "(failed: $OUT/virtual.log)" >> "$OUT/TABLES.md"
    { echo; echo "## On virtual cores (bench/virtual_cores.py table)"; echo;
      sed 1,2d "$OUT/virtual/TABLES.md" 2>/dev/null; } >> "$OUT/TABLES.md"
fi
echo "tables: $OUT/TABLES.md"
