#!/bin/bash
# What a lent machine without the package index needs for bench/larger_n.sh,
# prepared here, with the package index:
#
#   bash bench/larger_n_carry.sh [--python-version 3.12] [--out .whl]
#
# - the wheels, for that Python on x86-64 Linux, of MPICH, mpi4py,
#   jsonschema and what the applications of bench/apps/virtual.yaml import
#   (emcee, schwimmbad, numba-mpi, pylops-mpi, mpipool, heat), at the
#   versions this checkout's .venv has, into --out (default .whl);
# - the tracer's C extension built for that Python
#   (instrument/_hotpath.cpython-3XY-x86_64-linux-gnu.so), from the headers of
#   pyenv's or the system's python3.X.
#
# The lent machine must have Python 3.X with NumPy, pandas, pyarrow,
# SciPy, scikit-learn, numba, PyYAML, Matplotlib and (for heat) torch.
# Then, on it, from the checkout (with .whl and the built extension
# carried beside it):
#
#   bash bench/larger_n.sh --python python3 --wheels .whl --ranks 16 \
#       --recipes bench/apps/virtual.yaml --rounds 3 --no-probe \
#       --budget 370 --app-seconds 120 --out /tmp/r
#
# Seen on a lent 16-core machine (2026-11-30): 90-120 s an application
# at 3 rounds, so 15 minutes hold about six.  Bring the results back
# without the message logs (tar --exclude='*/msglog/*'), and predict any
# application stopped after its rounds with bench/apps/run.py
# --resimulate here.
set -euo pipefail
cd "$(dirname "$0")/.."
VER=3.12
OUT=.whl
while [ $# -gt 0 ]; do
    case "$1" in
        --python-version) VER="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "larger_n_carry.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
PIP=.venv/bin/pip
[ -x "$PIP" ] || { echo "larger_n_carry.sh: no .venv here (see README)" >&2; exit 1; }
NAMES="mpich mpi4py jsonschema jsonschema-specifications referencing rpds-py
       emcee schwimmbad multiprocess dill numba-mpi pylops pylops-mpi pyproximal
       mpipool errr tblib heat"
mkdir -p "$OUT"
for name in $NAMES; do
    version=$($PIP show "$name" 2>/dev/null | sed -n 's/^Version: //p')
    spec=$name${version:+==$version}
    # pip matches a manylinux tag exactly: offer the common ones
    python3 -m pip download -q --no-deps --only-binary=:all: -d "$OUT" \
        --python-version "$VER" --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
        --platform manylinux_2_5_x86_64 "$spec" 2>&1 | grep -v WARNING || true
    ls "$OUT" | grep -qi "^$(tr - _ <<<"$name")-" \
        || echo "larger_n_carry.sh: no wheel of $spec for Python $VER (left out)" >&2
done
# the tracer, built for that Python
TAG=$(tr -d . <<<"$VER")
INC=
for prefix in $(pyenv prefix "$VER" 2>/dev/null || true) $(ls -d "$HOME/.pyenv/versions/$VER"* 2>/dev/null) /usr; do
    if [ -f "$prefix/include/python$VER/Python.h" ]; then INC=$prefix/include/python$VER; break; fi
done
[ -n "$INC" ] || { echo "larger_n_carry.sh: no Python.h of Python $VER here (pyenv install $VER, or python$VER-dev)" >&2; exit 1; }
gcc -shared -fPIC -O2 -I"$INC" instrument/_hotpath.c \
    -o "instrument/_hotpath.cpython-$TAG-x86_64-linux-gnu.so"
echo "carry: $OUT ($(du -sh "$OUT" | cut -f1)) and instrument/_hotpath.cpython-$TAG-x86_64-linux-gnu.so"
