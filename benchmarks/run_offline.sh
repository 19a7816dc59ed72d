#!/usr/bin/env bash
# Run a benchmark on a machine without a package index: its Python has NumPy,
# SciPy, scikit-learn, psutil, threadpoolctl and PyYAML, and the other dependencies
# (dask, distributed, zarr, numcodecs, donfig, partd, locket, tblib, zict, tornado,
# google-crc32c, array-api-compat) come as wheels downloaded elsewhere for that
# machine's Python.  The project itself is this checkout (on PYTHONPATH).
#
# Usage, from the repository root:
#   bash benchmarks/run_offline.sh WHEELS_DIR OUTDIR [bench_scaling.py arguments...]
#   bash benchmarks/run_offline.sh WHEELS_DIR OUTDIR bench_gpu.py [bench_gpu.py arguments...]
# The script defaults to bench_scaling.py; a first argument naming a benchmarks/*.py
# script runs that one instead.  OUTDIR receives machine.txt (cores, memory, disk,
# BLAS, and nvidia-smi where there is one) and log.txt.
#
# For bench_gpu.py on a GPU node, WHEELS_DIR also holds CuPy for the node's CUDA and
# its dependency, e.g. for CUDA 12 and Python 3.12:
#   pip download --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
#       -d WHEELS_DIR cupy-cuda12x fastrlock dask distributed zarr array-api-compat
# (docs/gpu.md names the CuPy wheel for each CUDA version; bench_gpu.py needs no dask-cuda).
set -euo pipefail
wheels=$1
out=$2
shift 2
script=bench_scaling.py
if [[ $# -gt 0 && $1 == *.py && -f benchmarks/$1 ]]; then
    script=$1
    shift
fi
site=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$site" "$wheels"/*.whl
export PYTHONPATH=$site:$PWD PYTHONUNBUFFERED=1
mkdir -p "$out"
{ nproc; free -g; df -h /tmp | tail -1; python3 -c "import numpy; numpy.show_runtime()";
  if command -v nvidia-smi > /dev/null; then nvidia-smi; fi; } > "$out/machine.txt" 2>&1 || true
if [[ $script == bench_scaling.py ]]; then
    set -- --workdir /tmp/bench-scaling "$@"
fi
python3 "benchmarks/$script" "$@" 2>&1 | grep -v -e Warning -e warnings.warn | tee "$out/log.txt"
