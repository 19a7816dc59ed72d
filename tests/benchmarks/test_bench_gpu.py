"""``benchmarks/bench_gpu.py``: a CPU-only smoke run, and a clear exit without a GPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_gpu.py"
ROOT = SCRIPT.parents[1]


def _run(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=600)


def test_a_cpu_smoke_run_prints_every_pipeline_with_a_rate(tmp_path):
    proc = _run("--device", "cpu", "--rows", "3000", "--cols", "8", "--m", "16,32",
                "--sketch-size", "8", "--falkon-m", "64", "--falkon-iters", "2",
                "--cpu-cluster", "threads", "--workdir",
                str(tmp_path / "w"), tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "store read + decode" in out and "float32 GEMM (cpu)" in out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "pipeline" not in line]
    names = [r.split("|")[1].strip() for r in rows]
    assert names == ["RFF -> Zarr (m=16)", "RFF KRR (m=16)", "RFF KRR (m=32)",
                     "SKPCA fd (m=16, l=8)", "SKPCA rnca (m=16, l=8)",
                     "Nystrom features (m=16) -> Zarr", "Falkon (M=64, 2 CG passes)"]
    for row in rows:
        cells = [c.strip() for c in row.split("|")[2:4]]
        assert all(float(c.replace(",", "")) > 0 for c in cells), row
    assert "Machine:" in out and "logical cores" in out


def test_without_cupy_the_gpu_run_exits_saying_what_is_missing(tmp_path):
    try:
        import cupy  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("CuPy is installed here: the GPU run would start")
    proc = _run("--rows", "100", tmp_path=tmp_path)
    assert proc.returncode == 2
    assert "needs CuPy" in proc.stderr and "--device cpu" in proc.stderr
    assert proc.stdout == ""
