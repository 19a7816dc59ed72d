#!/usr/bin/env bash
# Run bench_scaling.py on a bare 16-core machine that has Python 3.12 with NumPy,
# SciPy, scikit-learn, psutil, threadpoolctl and PyYAML but no dask/distributed/zarr.
#
# Layout expected in the current directory (the repository root):
#   .whl/      wheels: dask, distributed, zarr, numcodecs, donfig, partd, locket,
#              tblib, zict, tornado, google-crc32c (Python 3.12, manylinux x86_64)
#   .devwork/  a copy of distsketch/ and benchmarks/ to run
# Usage: bash .devwork/benchmarks/device_run.sh OUTDIR [bench_scaling.py arguments...]
set -euo pipefail
out=$1
shift
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/.devwork PYTHONUNBUFFERED=1
mkdir -p "$out"
{ nproc; free -g; df -h /tmp | tail -1; python3 -c "import numpy; numpy.show_runtime()"; } \
    > "$out/machine.txt" 2>&1 || true
python3 .devwork/benchmarks/bench_scaling.py --workdir /tmp/bench-scaling "$@" 2>&1 \
    | grep -v -e Warning -e warnings.warn | tee "$out/log.txt"
