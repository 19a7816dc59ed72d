#!/usr/bin/env bash
# Run bench_scaling.py on a machine without a package index: its Python has NumPy,
# SciPy, scikit-learn, psutil, threadpoolctl and PyYAML, and the other dependencies
# (dask, distributed, zarr, numcodecs, donfig, partd, locket, tblib, zict, tornado,
# google-crc32c) come as wheels downloaded elsewhere for that machine's Python.
#
# Usage, from the repository root:
#   bash benchmarks/run_offline.sh WHEELS_DIR OUTDIR [bench_scaling.py arguments...]
# OUTDIR receives machine.txt (cores, memory, disk, BLAS) and log.txt.
set -euo pipefail
wheels=$1
out=$2
shift 2
site=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$site" "$wheels"/*.whl
export PYTHONPATH=$site:$PWD PYTHONUNBUFFERED=1
mkdir -p "$out"
{ nproc; free -g; df -h /tmp | tail -1; python3 -c "import numpy; numpy.show_runtime()"; } \
    > "$out/machine.txt" 2>&1 || true
python3 benchmarks/bench_scaling.py --workdir /tmp/bench-scaling "$@" 2>&1 \
    | grep -v -e Warning -e warnings.warn | tee "$out/log.txt"
