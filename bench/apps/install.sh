#!/bin/bash
# Install the third-party applications of bench/apps/recipes.yaml into the
# project's virtual environment and unpack the source distributions whose
# examples and demos the recipes run (into bench/apps/src/, not committed).
#
#   bash bench/apps/install.sh            (after the README's setup command)
#
# mpi4py-fft builds against FFTW: Debian's libfftw3-dev (installed here when
# run as root).  heat pins torch<2.11.1; on x86_64 PyPI only has CUDA builds
# in that range (about 4 GB; they run on the CPU).  Where the PyTorch index is
# reachable, install the CPU build first to save the download:
#   .venv/bin/pip install torch==2.11.0 torchvision==0.26.0 \
#       --index-url https://download.pytorch.org/whl/cpu
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PY="${PY:-$ROOT/.venv/bin/python}"

if [ ! -e /usr/include/fftw3.h ]; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && apt-get install -y -qq libfftw3-dev
    else
        echo "install.sh: mpi4py-fft needs FFTW's headers: apt-get install libfftw3-dev" >&2
        exit 2
    fi
fi
"$PY" -m pip install -q mpi4py-fft pylops-mpi==0.8.0 heat emcee schwimmbad mpipool pySDC

# applications whose MPI is below Python (bench/below_python.py): numba-mpi,
# and Devito, whose examples ship in its wheel.  Devito 4.8 pins
# numpy<=2.4.3, which would take the project's NumPy back below what the
# SLURM executor plugin requires; it runs with the project's NumPy, so its
# other requirements are installed and NumPy left as it is.  Devito itself
# goes into a folder of its own (bench/apps/src/devito-site, on PYTHONPATH
# only for its recipes): where it is importable, `import pylops` imports it,
# and Devito turns mpi4py's automatic MPI initialisation off, so that every
# pylops-mpi application fails at its first MPI call.
"$PY" -m pip install -q numba-mpi
"$PY" -m pip uninstall -q -y devito 2>/dev/null || true
"$PY" -m pip install -q --no-deps --upgrade --target "$HERE/src/devito-site" devito==4.8.23
"$PY" -m pip install -q "sympy>=1.12.1,<1.15" "psutil>=5.1,<8" "py-cpuinfo<10" \
    "cgen>=2020.1,<2026" "codepy>=2019.1,<2025" "multidict<6.3" "anytree>=2.4.3,<=2.13.0"

# PETSc and petsc4py, built from PyPI's sources against the mpich wheel's
# mpicc, without Fortran and with Debian's BLAS/LAPACK (PETSc's configure
# cannot download its own here): about 40 minutes on 2 cores, so only with
# WITH_PETSC=1.  bench/below_python.py runs petsc4py's poisson2d demo.
if [ "${WITH_PETSC:-0}" = 1 ]; then
    if [ ! -e /usr/lib/x86_64-linux-gnu/liblapack.so ] && [ "$(id -u)" = 0 ]; then
        apt-get update -qq && apt-get install -y -qq liblapack-dev libblas-dev
    fi
    PETSC_VERSION=3.26.1
    MPICC="$(dirname "$PY")/mpicc" PETSC_CONFIGURE_OPTIONS="--with-fc=0 --with-cxx=0 \
--with-debugging=0 COPTFLAGS=-O2 --with-blaslapack-lib=[/usr/lib/x86_64-linux-gnu/liblapack.so,\
/usr/lib/x86_64-linux-gnu/libblas.so]" "$PY" -m pip install -q --no-deps "petsc==$PETSC_VERSION"
    "$PY" -m pip install -q wheel "cython>=3"
    PETSC_DIR="$("$PY" -c 'import petsc; print(petsc.get_petsc_dir())')" \
        MPICC="$(dirname "$PY")/mpicc" \
        "$PY" -m pip install -q --no-deps --no-build-isolation "petsc4py==$PETSC_VERSION"
    (cd "$HERE/src" && if [ ! -d "petsc4py-$PETSC_VERSION" ]; then
        "$PY" -m pip download -q --no-deps --no-binary :all: --no-build-isolation \
            "petsc4py==$PETSC_VERSION" -d . && tar xzf "petsc4py-$PETSC_VERSION.tar.gz" && \
            rm -f "petsc4py-$PETSC_VERSION.tar.gz"; fi && ln -sfn "petsc4py-$PETSC_VERSION" petsc4py)
fi

# the examples and demos live in the source distributions, not the wheels
mkdir -p "$HERE/src"
cd "$HERE/src"
MPI4PY_VERSION="$("$PY" -c 'import mpi4py; print(mpi4py.__version__)')"
for spec in "pylops-mpi==0.8.0:pylops_mpi-0.8.0:pylops_mpi" \
            "mpi4py==$MPI4PY_VERSION:mpi4py-$MPI4PY_VERSION:mpi4py"; do
    IFS=: read -r req dir link <<< "$spec"
    if [ ! -d "$dir" ]; then
        # the source of this package only (:all: would build every build
        # dependency from source too: minutes)
        "$PY" -m pip download -q --no-deps --no-binary "${req%%=*}" "$req" -d .
        tar xzf "$dir.tar.gz"
        rm -f "$dir.tar.gz"
    fi
    ln -sfn "$dir" "$link"
done
echo "bench/apps: installed; sources in $HERE/src"
