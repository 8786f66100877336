#!/bin/sh
# Build LogGOPSim and its txt2bin converter from the public source, with
# -O3, for the side-by-side benchmarks (bench/netsim_speed.py --loggopsim,
# bench/loggopsim_compare.py).
#
#   bench/build_loggopsim.sh [SOURCE_DIR] [OUT_DIR]
#
# SOURCE_DIR: a checkout of https://github.com/spcl/LogGOPSim (default: cloned
# into OUT_DIR/src).  OUT_DIR (default bench/out/loggopsim) receives the
# LogGOPSim and txt2bin binaries.  Needs g++, gengetopt, re2c and graphviz's
# cgraph headers (Debian: gengetopt re2c libgraphviz-dev; installed here when
# run as root and missing).  The repository's own Makefile builds with -O0.
set -eu
OUT=$(realpath -m "${2:-bench/out/loggopsim}")
SRC=${1:-}
mkdir -p "$OUT"
if [ -z "$SRC" ]; then
    SRC=$OUT/src
    [ -d "$SRC" ] || git clone --depth 1 https://github.com/spcl/LogGOPSim "$SRC"
fi
SRC=$(realpath "$SRC")
# bench/loggopsim_speed.py finds LogGOPSim's schedule generator there
[ -e "$OUT/src" ] || ln -s "$SRC" "$OUT/src"
missing=""
command -v gengetopt >/dev/null || missing="$missing gengetopt"
command -v re2c >/dev/null || missing="$missing re2c"
[ -f /usr/include/graphviz/cgraph.h ] || missing="$missing libgraphviz-dev"
if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
    else
        echo "build_loggopsim.sh: missing:$missing" >&2
        exit 2
    fi
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$SRC"/src/LogGOPSim/* "$work"/
cd "$work"
# its loop's own time, to the microsecond (it prints whole seconds): read by
# bench/loggopsim_speed.py to compare the loops alone
sed -i 's|^\(\s*\)unsigned long int diff = tend.tv_sec - tstart.tv_sec;|&\n\1fprintf(stderr, "LOOP_SECONDS %.6f\\n", (tend.tv_sec - tstart.tv_sec) + 1e-6 * (tend.tv_usec - tstart.tv_usec));|' LogGOPSim.cpp
grep -q LOOP_SECONDS LogGOPSim.cpp || { echo "build_loggopsim.sh: could not add the loop timer" >&2; exit 2; }
gengetopt -F loggopsim_cmdline -i loggopsim_cmdline.ggo
gengetopt -F txt2bin_cmdline -i txt2bin_cmdline.ggo
re2c -o txt2bin.cpp txt2bin.re
g++ -std=c++11 -O3 -DNDEBUG -w -I/usr/include/graphviz LogGOPSim.cpp loggopsim_cmdline.c \
    -o "$OUT/LogGOPSim" -lcgraph
g++ -O3 -w txt2bin.cpp txt2bin_cmdline.c -o "$OUT/txt2bin"
echo "built $OUT/LogGOPSim and $OUT/txt2bin from $SRC ($(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo 'no git'))"
