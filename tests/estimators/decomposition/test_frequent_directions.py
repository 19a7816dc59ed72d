"""FrequentDirections estimator: the FD guarantee on NumPy, dask and Zarr input,
partial_fit and merge, the certified bound, persistence and errors."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp

import distsketch
from distsketch import FrequentDirections
from distsketch.errors import ConfigError, InputError, NotFittedError
from distsketch.io import write_array


def _data(n=3000, d=24, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(n, d)) * 0.85 ** np.arange(d)[None, :]).astype(np.float32)


def _check_guarantee(A, fd, ell):
    single = np.asarray(A).dtype == np.float32 if not sp.issparse(A) else A.dtype == np.float32
    A = np.asarray(A, dtype=np.float64)
    B = fd.sketch_
    scale = float(np.sum(A * A))
    err = np.linalg.norm(A.T @ A - B.T @ B, 2)
    s2 = np.linalg.svd(A, compute_uv=False) ** 2
    # float32 rows are multiplied in float32: the guarantee holds to u·‖M‖² per shrink
    # (ops/fd.py, Precision), u = 2⁻²⁴ and at most n/ℓ shrinks; float64 rows to 1e-9
    slack = 16 * 2.0**-24 * np.sqrt(A.shape[0] / ell) * scale if single else 1e-9 * scale
    for k in range(ell):
        assert err <= s2[k:].sum() / (ell - k) + slack
        # the certified bound is computed from the sketch alone and is never below the error
        assert err <= fd.covariance_error_bound(k) + slack
    assert fd.n_samples_seen_ == A.shape[0]
    assert fd.sq_frobenius_ == pytest.approx(scale, rel=1e-6)


@pytest.mark.parametrize("kind", ["numpy", "dask", "sparse"])
def test_fit_guarantee(kind):
    A = _data()
    X = {"numpy": A, "dask": da.from_array(A, chunks=(313, 24)),
         "sparse": sp.csr_matrix(np.where(np.abs(A) > 0.3, A, 0))}[kind]
    ell = 8
    fd = FrequentDirections(sketch_size=ell, split_every=3).fit(X)
    ref = X.toarray() if kind == "sparse" else A
    _check_guarantee(ref, fd, ell)
    assert fd.sketch_.shape == (ell, 24)
    np.testing.assert_allclose(fd.components_ @ fd.components_.T, np.eye(ell), atol=1e-10)


def test_fit_from_zarr_path(tmp_path):
    A = _data(2500, 12, seed=1)
    path = write_array(A, tmp_path / "A.zarr", chunk_rows=400)
    fd = FrequentDirections(sketch_size=6).fit(str(path))
    _check_guarantee(A, fd, 6)
    assert fd.fingerprint_["shape"] == [2500, 12]


def test_top_direction_matches_exact_pca():
    rng = np.random.default_rng(2)
    A = rng.normal(size=(4000, 10)) * np.array([5.0, 2.0] + [0.3] * 8)[None, :]
    fd = FrequentDirections(sketch_size=6).fit(A)
    _, _, Vt = np.linalg.svd(A, full_matrices=False)
    assert abs(fd.components_[0] @ Vt[0]) > 0.999
    assert abs(fd.components_[1] @ Vt[1]) > 0.99


def test_partial_fit_and_merge_keep_guarantee():
    A = _data(3000, 16, seed=3)
    ell = 7
    inc = FrequentDirections(sketch_size=ell)
    for lo in range(0, 3000, 700):
        inc.partial_fit(A[lo: lo + 700])
    _check_guarantee(A, inc, ell)
    left = FrequentDirections(sketch_size=ell).fit(A[:1200])
    right = FrequentDirections(sketch_size=ell).fit(da.from_array(A[1200:], chunks=(500, 16)))
    merged = left.merge(right)
    _check_guarantee(A, merged, ell)
    assert merged is not left and left.n_samples_seen_ == 1200


def test_bitwise_deterministic_for_same_chunking():
    A = da.from_array(_data(4000, 10, seed=4), chunks=(250, 10))
    a = FrequentDirections(sketch_size=5, split_every=3).fit(A)
    b = FrequentDirections(sketch_size=5, split_every=3).fit(A)
    np.testing.assert_array_equal(a.sketch_, b.sketch_)


def test_save_load_round_trip(tmp_path):
    fd = FrequentDirections(sketch_size=4).fit(_data(500, 6))
    fd.save(tmp_path / "fd.zarr")
    back = distsketch.load(tmp_path / "fd.zarr")
    np.testing.assert_array_equal(back.sketch_, fd.sketch_)
    assert back.covariance_error_bound(1) == fd.covariance_error_bound(1)
    back.partial_fit(_data(300, 6, seed=9))
    assert back.n_samples_seen_ == 800


def test_errors():
    A = _data(200, 6)
    with pytest.raises(ConfigError, match="sketch_size"):
        FrequentDirections(sketch_size=0).fit(A)
    with pytest.raises(ConfigError, match="split_every"):
        FrequentDirections(split_every=1).fit(A)
    with pytest.raises(NotFittedError):
        FrequentDirections().covariance_error_bound(0)
    fd = FrequentDirections(sketch_size=4).fit(A)
    with pytest.raises(ConfigError, match="k must be"):
        fd.covariance_error_bound(4)
    with pytest.raises(InputError, match="features"):
        fd.partial_fit(np.ones((5, 7)))
    with pytest.raises(InputError, match="same columns"):
        fd.merge(FrequentDirections(sketch_size=4).fit(np.ones((5, 7))))
    with pytest.raises(InputError, match="NaN"):
        FrequentDirections().fit(np.full((4, 3), np.nan))
