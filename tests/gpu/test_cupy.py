"""The benchmark's pipelines on CuPy: dask arrays of CuPy blocks and CuPy arrays.

Skipped without CuPy (CI has no GPU); run on a GPU machine with ``pytest -m gpu``.
GPU and CPU results agree to float rounding only: cuBLAS and CuPy's reductions sum in
another order than NumPy's BLAS, so float64 results are compared at rtol 1e-8 (the
NumPy and array-api-strict paths, which share the summation order more closely, agree to
1e-10 in tests/estimators/test_array_namespace.py).
"""

from __future__ import annotations

import numpy as np
import pytest

cp = pytest.importorskip("cupy")
da = pytest.importorskip("dask.array")

import distsketch as ds  # noqa: E402

pytestmark = pytest.mark.gpu

RTOL, ATOL = 1e-8, 1e-10

X = np.random.default_rng(3).normal(size=(2000, 8))
Y = X[:, 0] - 0.5 * X[:, 1] ** 2


def _dask_of_cupy(a: np.ndarray, rows: int = 500):
    return da.from_array(cp.asarray(a), chunks=(rows, a.shape[1]), asarray=False)


def _assert_learned_numpy(model) -> None:
    for name, value in vars(model).items():
        if name.endswith("_") and not name.startswith("_"):
            assert not type(value).__module__.startswith("cupy"), name


PIPELINES = [
    ("rff", lambda: ds.RandomFourierFeatures(n_components=64, gamma=0.1, random_state=0),
     "transform"),
    # "auto" sums the exact covariance on a GPU: the NumPy reference asks for it by name
    ("skpca-fd", lambda: ds.StreamingKernelPCA(n_components=3, n_random_features=64,
                                               sketch_size=16, gamma=0.1, random_state=0,
                                               state="covariance"),
     "transform"),
    ("skpca-fd-sketch", lambda: ds.StreamingKernelPCA(n_components=3, n_random_features=64,
                                                      sketch_size=16, gamma=0.1,
                                                      random_state=0, state="sketch"),
     "transform"),
    ("skpca-rnca", lambda: ds.StreamingKernelPCA(n_components=3, n_random_features=64,
                                                 method="rnca", gamma=0.1, random_state=0),
     "transform"),
    ("krr", lambda: ds.SketchedKernelRidge(
        features=ds.RandomFourierFeatures(n_components=64, gamma=0.1, random_state=0),
        alpha=1e-2, random_state=0), "predict"),
]


@pytest.mark.parametrize("name,make,method", PIPELINES, ids=[p[0] for p in PIPELINES])
def test_dask_of_cupy_fit_and_output_equal_numpy(name, make, method):
    # the reference reads the same blocks (an FD sketch depends on them within its guarantee)
    supervised = method == "predict"
    Xh = da.from_array(X, chunks=(500, X.shape[1]))
    ref = make().fit(Xh, da.from_array(Y, chunks=500)) if supervised else make().fit(Xh)
    Xg = _dask_of_cupy(X)
    got = make().fit(Xg, _dask_of_cupy(Y[:, None])[:, 0]) if supervised else make().fit(Xg)
    _assert_learned_numpy(got)
    out = getattr(got, method)(Xg)
    assert isinstance(out, da.Array) and isinstance(out._meta, cp.ndarray)
    host = cp.asnumpy(out.compute())
    np.testing.assert_allclose(host, getattr(ref, method)(X), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name,make,method", PIPELINES, ids=[p[0] for p in PIPELINES])
def test_cupy_array_fit_and_output_equal_numpy(name, make, method):
    supervised = method == "predict"
    ref = make().fit(X, Y) if supervised else make().fit(X)
    got = make().fit(cp.asarray(X), cp.asarray(Y)) if supervised else make().fit(cp.asarray(X))
    _assert_learned_numpy(got)
    out = getattr(got, method)(cp.asarray(X))
    assert isinstance(out, cp.ndarray)
    np.testing.assert_allclose(cp.asnumpy(out), getattr(ref, method)(X), rtol=RTOL, atol=ATOL)


def test_numpy_and_cupy_blocks_together_are_an_input_error():
    with pytest.raises(ds.InputError, match="different array libraries"):
        ds.SketchedKernelRidge().fit(cp.asarray(X), Y)
