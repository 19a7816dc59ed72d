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
# BLAS, and nvidia-smi where there is one) and log.txt; for bench_gpu.py also
# bench_gpu.json (every number, unless the arguments name another --json).  A
# WHEELS_DIR without wheels installs nothing (every dependency is already there).
#
# For bench_gpu.py on a GPU node whose Python has no CuPy, WHEELS_DIR also holds CuPy
# for the node's CUDA and its dependency fastrlock (docs/gpu.md names the wheel for
# each CUDA version; bench_gpu.py needs no dask-cuda).  An image that has CuPy (the
# H200 machines here: Python 3.12, cupy-cuda13x, NumPy, SciPy, scikit-learn) needs
# only the wheels above, downloaded where pip reaches an index:
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#       --platform manylinux2014_x86_64 -d WHEELS_DIR dask==2026.7.0 distributed==2026.7.0 \
#       zarr==3.1.6 numcodecs==0.16.6 donfig==0.8.1.post1 partd==1.4.2 locket==1.0.0 \
#       tblib==3.2.2 zict==3.0.0 tornado==6.6.1 google-crc32c==1.9.0 array-api-compat==1.16.0
# (13 MB).  The whole GPU run, warm-up included, takes --budget-seconds (default 300):
#   bash benchmarks/run_offline.sh WHEELS_DIR OUTDIR bench_gpu.py
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
shopt -s nullglob
whls=("$wheels"/*.whl)
shopt -u nullglob
if [[ ${#whls[@]} -gt 0 ]]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$site" "${whls[@]}"
fi
export PYTHONPATH=$site:$PWD PYTHONUNBUFFERED=1
mkdir -p "$out"
{ nproc; free -g; df -h /tmp | tail -1; python3 -c "import numpy; numpy.show_runtime()";
  if command -v nvidia-smi > /dev/null; then nvidia-smi; fi; } > "$out/machine.txt" 2>&1 || true
if [[ $script == bench_scaling.py ]]; then
    set -- --workdir /tmp/bench-scaling "$@"
fi
if [[ $script == bench_gpu.py && " $* " != *" --json "* ]]; then
    set -- "$@" --json "$out/bench_gpu.json"
fi
python3 "benchmarks/$script" "$@" 2>&1 | grep -v -e Warning -e warnings.warn | tee "$out/log.txt"
