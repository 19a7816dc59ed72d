"""The device option on a real GPU (skipped without CuPy and a visible GPU).

Run on a GPU machine with ``pytest -m gpu tests/gpu``.  The float tolerance is that of
float32 features computed by a different BLAS/libm (cuBLAS, CUDA's ``cos``): relative
1e-5 on features.
"""

from __future__ import annotations

import dask
import numpy as np
import pytest

cupy = pytest.importorskip("cupy")

from distsketch import (  # noqa: E402
    NystromKernelRidge,
    RandomFourierFeatures,
    SketchedKernelRidge,
)
from distsketch.errors import ConfigError  # noqa: E402
from distsketch.graph import cluster_resources  # noqa: E402
from distsketch.io import open_array, write_array  # noqa: E402
from distsketch.ops.device import require_cupy  # noqa: E402

try:
    require_cupy()
except ConfigError as exc:  # CuPy installed, no GPU
    pytest.skip(str(exc), allow_module_level=True)

pytestmark = pytest.mark.gpu


@pytest.fixture
def store(tmp_path):
    X = np.random.default_rng(7).normal(size=(4000, 16)).astype(np.float32)
    return write_array(X, tmp_path / "x.zarr", chunk_rows=500), X


def test_a_cuda_path_reads_cupy_blocks(store):
    path, X = store
    A = open_array(path, device="cuda", block_rows=1000)
    assert isinstance(A._meta, cupy.ndarray)
    block = A.blocks[2].compute()
    assert isinstance(block, cupy.ndarray)
    np.testing.assert_array_equal(cupy.asnumpy(block), X[2000:3000])


def test_a_cuda_path_writes_the_cpu_zarr_output(store, tmp_path):
    path, _ = store
    want = RandomFourierFeatures(n_components=64, random_state=0).fit(path)
    cpu = open_array(write_array(want.transform(path), tmp_path / "cpu.zarr")).compute()
    with dask.config.set({"distsketch.device": "cuda"}):
        est = RandomFourierFeatures(n_components=64, random_state=0).fit(path)
        out = write_array(est.transform(path), tmp_path / "gpu.zarr")
    gpu = open_array(out).compute()
    assert type(gpu) is np.ndarray
    np.testing.assert_allclose(gpu, cpu, rtol=1e-5, atol=1e-5)


def test_blocks_are_planned_from_the_gpus_memory():
    total = cupy.cuda.Device().mem_info[1]
    with dask.config.set({"distsketch.device": "cuda", "num_workers": 2}):
        res = cluster_resources()
    assert res.task_bytes == int(total * 0.5 / 2) and "CuPy mem_info" in res.source


@pytest.mark.parametrize("make", [
    lambda: SketchedKernelRidge(features=RandomFourierFeatures(n_components=64, random_state=0),
                                random_state=0),
    lambda: NystromKernelRidge(n_centers=64, alpha=1e-3, random_state=0),
], ids=["rff-ridge", "falkon"])
def test_targets_from_a_path_are_read_on_the_gpu_beside_x(store, tmp_path, make):
    # the documented call: fit("X.zarr", "y.zarr") with device="cuda" reads both there
    path, X = store
    y = write_array(np.sin(X[:, 0]).astype(np.float64), tmp_path / "y.zarr")
    want = make().fit(path, y).predict(X)
    with dask.config.set({"distsketch.device": "cuda"}):
        got = make().fit(path, y).predict(X)
    # float32 rows through another libm and BLAS, then a ridge solve
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
