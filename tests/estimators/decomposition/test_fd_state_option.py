"""The ``state`` option of FrequentDirections and StreamingKernelPCA: "sketch" (the
streaming FD sketch), "covariance" (the exact covariance, shrunk once at the end) and
"auto" (covariance on a device namespace, the streaming sketch on NumPy).

References: the exact covariance AᵀA of all rows (one NumPy product) and its top-ℓ
eigendecomposition; tolerances as in tests/summaries/test_fd_covariance_state.py
(float64 rows: a sum of n products in any order is within n·u of |A|ᵀ|A|; the shrunk
sketch BᵀB = (C − λ_ℓ I)₊ moves by at most (1 + √d) times the covariance's change, plus
an eigendecomposition's O(d·u·‖C‖₂)).
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

import distsketch
from distsketch import FrequentDirections, StreamingKernelPCA
from distsketch.errors import ConfigError, MemoryBudgetError
from distsketch.ops.fd import COVARIANCE_MAX_COLUMNS, fd_covariance_shrink, fd_state
from distsketch.testing import to_strict_device

U = 2.0**-53


def _data(n=2000, d=12, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)) * 0.85 ** np.arange(d)[None, :]


def _tol(A: np.ndarray) -> float:
    """Frobenius tolerance between BᵀB of two summation orders of AᵀA (module notes)."""
    n, d = A.shape
    absA = np.abs(A)
    cov = 2 * n * U * 1.01 * float(np.linalg.norm(absA.T @ absA))
    return (1 + np.sqrt(d)) * cov + 200 * d * U * float(np.linalg.norm(A, 2) ** 2)


def _exact_gram(A: np.ndarray, ell: int) -> tuple[np.ndarray, float]:
    B, delta = fd_covariance_shrink(A.T @ A, ell)
    return B.T @ B, delta


def test_fd_state_resolves_auto_from_the_namespace_and_width():
    assert fd_state("auto", 100, on_device=False) == "sketch"
    assert fd_state("auto", 100, on_device=True) == "covariance"
    assert fd_state("auto", COVARIANCE_MAX_COLUMNS, on_device=True) == "covariance"
    assert fd_state("auto", COVARIANCE_MAX_COLUMNS + 1, on_device=True) == "sketch"
    assert fd_state("sketch", 10, on_device=True) == "sketch"
    assert fd_state("covariance", 10**5, on_device=False) == "covariance"
    with pytest.raises(ConfigError, match="one of auto, sketch, covariance; got 'svd'"):
        fd_state("svd", 10, on_device=False)


@pytest.mark.parametrize("cls", [FrequentDirections, StreamingKernelPCA])
@pytest.mark.parametrize("bad", ["exact", "Covariance", 1, None])
def test_a_bad_state_is_a_config_error_naming_the_choices(cls, bad):
    with pytest.raises(ConfigError, match=r"state.*(sketch|covariance)"):
        cls(state=bad).fit(_data(50, 4))


def test_auto_on_numpy_is_the_streaming_sketch_bitwise():
    A = da.from_array(_data(3000, 10, seed=1), chunks=(300, 10))  # buffer formulation
    auto = FrequentDirections(sketch_size=5, split_every=3).fit(A)
    sketch = FrequentDirections(sketch_size=5, split_every=3, state="sketch").fit(A)
    assert auto.state_ == "sketch" and not hasattr(auto, "covariance_")
    np.testing.assert_array_equal(auto.sketch_, sketch.sketch_)
    assert auto.shrinkage_ == sketch.shrinkage_


@pytest.mark.parametrize("chunks", [2000, 700, 93])
def test_covariance_state_is_the_shrunk_exact_covariance_for_any_chunking(chunks):
    A = _data(2000, 12, seed=2)
    ell = 6
    fd = FrequentDirections(sketch_size=ell, split_every=2, state="covariance").fit(
        da.from_array(A, chunks=(chunks, 12)))
    G, delta = _exact_gram(A, ell)
    assert fd.state_ == "covariance"
    np.testing.assert_allclose(fd.covariance_, A.T @ A, rtol=0,
                               atol=2000 * U * 1.01 * float(np.max(np.abs(A).T @ np.abs(A))))
    tol = _tol(A)
    assert np.linalg.norm(fd.sketch_.T @ fd.sketch_ - G) <= tol
    assert fd.shrinkage_ == pytest.approx(delta, abs=tol)
    # the error is the ℓ-th eigenvalue: no larger than the certified bound nor the stream's
    err = np.linalg.norm(A.T @ A - fd.sketch_.T @ fd.sketch_, 2)
    assert err == pytest.approx(np.linalg.eigvalsh(A.T @ A)[::-1][ell - 1], abs=tol)
    for k in range(ell):
        assert err <= fd.covariance_error_bound(k) + tol
    stream = FrequentDirections(sketch_size=ell, split_every=2, state="sketch").fit(
        da.from_array(A, chunks=(100, 12)))
    assert err <= np.linalg.norm(A.T @ A - stream.sketch_.T @ stream.sketch_, 2) + tol


def test_auto_on_strict_arrays_sums_the_covariance_as_numpy_does():
    A = _data(900, 8, seed=3)
    got = FrequentDirections(sketch_size=4).fit(to_strict_device(A))
    ref = FrequentDirections(sketch_size=4, state="covariance").fit(A)
    assert got.state_ == "covariance" and isinstance(got.covariance_, np.ndarray)
    np.testing.assert_allclose(got.covariance_, ref.covariance_, rtol=1e-12)
    tol = _tol(A)
    assert np.linalg.norm(got.sketch_.T @ got.sketch_ - ref.sketch_.T @ ref.sketch_) <= tol
    # the streaming sketch asked for by name still runs on the device
    assert FrequentDirections(sketch_size=4, state="sketch").fit(
        to_strict_device(A)).state_ == "sketch"


def test_partial_fit_adds_to_the_covariance_and_merge_adds_or_shrinks():
    A, B = _data(800, 9, seed=4), _data(500, 9, seed=5)
    AB = np.vstack([A, B])
    fd = FrequentDirections(sketch_size=4, state="covariance").fit(A).partial_fit(B)
    tol = _tol(AB)
    assert fd.n_samples_seen_ == 1300 and fd.state_ == "covariance"
    np.testing.assert_allclose(fd.covariance_, AB.T @ AB, rtol=1e-12, atol=1e-12)
    G, _ = _exact_gram(AB, 4)
    assert np.linalg.norm(fd.sketch_.T @ fd.sketch_ - G) <= tol
    left = FrequentDirections(sketch_size=4, state="covariance").fit(A)
    both = left.merge(FrequentDirections(sketch_size=4, state="covariance").fit(B))
    assert both.state_ == "covariance"
    np.testing.assert_allclose(both.covariance_, AB.T @ AB, rtol=1e-12, atol=1e-12)
    mixed = left.merge(FrequentDirections(sketch_size=4, state="sketch").fit(B))
    assert mixed.state_ == "sketch" and not hasattr(mixed, "covariance_")
    err = np.linalg.norm(AB.T @ AB - mixed.sketch_.T @ mixed.sketch_, 2)
    s2 = np.linalg.svd(AB, compute_uv=False) ** 2
    assert err <= min(s2[k:].sum() / (4 - k) for k in range(4)) + 1e-9 * s2.sum()


def test_covariance_model_saves_loads_and_continues(tmp_path):
    A, B = _data(600, 7, seed=6), _data(400, 7, seed=7)
    fd = FrequentDirections(sketch_size=3, state="covariance").fit(A)
    fd.save(tmp_path / "fd.zarr")
    back = distsketch.load(tmp_path / "fd.zarr")
    assert back.state_ == "covariance"
    np.testing.assert_array_equal(back.covariance_, fd.covariance_)
    np.testing.assert_array_equal(back.sketch_, fd.sketch_)
    back.partial_fit(B)
    AB = np.vstack([A, B])
    np.testing.assert_allclose(back.covariance_, AB.T @ AB, rtol=1e-12, atol=1e-12)


def test_the_covariance_state_is_sized_before_computing():
    A = _data(100, 600, seed=8)
    with dask.config.set({"distsketch.task-memory": "4MiB"}):
        # 600 x 600 float64 (2.9 MB) and its merge buffer do not fit: refused before any
        # pass, naming the state and the way out
        with pytest.raises(MemoryBudgetError, match=r"covariance state \(600 x 600 float64\)"
                           r".*state='sketch'"):
            FrequentDirections(sketch_size=4, state="covariance").fit(A)


@pytest.fixture(scope="module")
def rows32():
    return np.random.default_rng(9).normal(size=(2500, 6)).astype(np.float32)


def test_skpca_covariance_state_has_rncas_top_directions(rows32):
    kw = dict(n_components=4, n_random_features=64, gamma=0.2, random_state=0)
    fd = StreamingKernelPCA(sketch_size=12, state="covariance", **kw).fit(
        da.from_array(rows32, chunks=(400, 6)))
    rnca = StreamingKernelPCA(method="rnca", **kw).fit(rows32)
    assert fd.state_ == "covariance"
    Z = np.asarray(fd.features_.transform(rows32), dtype=np.float64)
    # float32 features, float32 products per slice summed in float64
    absZ = np.abs(Z)
    np.testing.assert_allclose(fd.covariance_, Z.T @ Z, rtol=0,
                               atol=4096 * 2.0**-24 * float(np.max(absZ.T @ absZ)))
    # the k < ℓ leading directions are the covariance's eigenvectors, as RNCA's (to the
    # covariances' float32-product rounding over the eigengap)
    overlap = np.abs(np.sum(fd.components_ * rnca.components_, axis=1))
    np.testing.assert_allclose(overlap, 1.0, atol=1e-5)
    lam = np.linalg.eigvalsh(Z.T @ Z)[::-1]
    assert fd.shrinkage_ == pytest.approx(lam[11], rel=1e-4)


def test_skpca_auto_on_strict_arrays_equals_numpy_covariance(rows32):
    kw = dict(n_components=3, n_random_features=32, sketch_size=8, gamma=0.2, random_state=0)
    got = StreamingKernelPCA(**kw).fit(to_strict_device(rows32))
    ref = StreamingKernelPCA(state="covariance", **kw).fit(rows32)
    auto_numpy = StreamingKernelPCA(**kw).fit(rows32)
    assert got.state_ == "covariance" and auto_numpy.state_ == "sketch"
    np.testing.assert_allclose(got.covariance_, ref.covariance_, rtol=1e-12)
    np.testing.assert_allclose(got.components_, ref.components_, rtol=1e-8, atol=1e-10)
    # partial_fit keeps the state fit resolved, and adds to the covariance
    got.partial_fit(to_strict_device(rows32[:100]))
    ref.partial_fit(rows32[:100])
    assert got.state_ == "covariance"
    np.testing.assert_allclose(got.covariance_, ref.covariance_, rtol=1e-12)
