#!/bin/sh
# Replay this bundle's representatives on this node (made by python -m replay pack).
#   bash run.sh [run-bundle options: --load K --repeats K --bind-command CMD --any-version]
# Makes its own virtual environment (VENV, default: venv beside this file), installs
# the pinned requirements (from wheels/ when carried, else from the package index,
# PIP_INDEX_URL honoured), then writes RESULTS (default: results.tar.gz beside this
# directory).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-python3}
VENV=${VENV:-$HERE/venv}
if [ ! -x "$VENV/bin/python" ]; then
    echo "run.sh: making $VENV with $PYTHON" >&2
    if ! "$PYTHON" -m venv "$VENV"; then
        echo "run.sh: error: $PYTHON -m venv $VENV failed; set PYTHON to a python3 with venv" >&2
        exit 2
    fi
fi
if [ -d "$HERE/wheels" ]; then FROM="--no-index --find-links $HERE/wheels"; else FROM=""; fi
echo "run.sh: installing the requirements (log: $HERE/install.log)" >&2
# shellcheck disable=SC2086
if ! "$VENV/bin/python" -m pip install --disable-pip-version-check $FROM \
        -r "$HERE/requirements.txt" > "$HERE/install.log" 2>&1; then
    echo "run.sh: error: a requirement will not install here: $(grep -m1 -E '^ERROR' "$HERE/install.log")" >&2
    echo "run.sh: see $HERE/install.log; pack again with --wheels for an offline node, or install it in $VENV by hand and rerun" >&2
    exit 2
fi
RESULTS=${RESULTS:-$(dirname "$HERE")/results.tar.gz}
PYTHONPATH="$HERE/project" exec "$VENV/bin/python" -m replay run-bundle "$HERE" -o "$RESULTS" "$@"
