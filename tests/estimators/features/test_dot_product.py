"""Gaussian (Taylor) and dot-product kernel (NTK / arc-cosine) sketches vs the exact kernels."""

import dask.array as da
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distsketch.errors import ConfigError
from distsketch.estimators.features.dot_product import DotProductKernelSketch, GaussianSketch
from distsketch.metrics import relative_kernel_error
from distsketch.ops.kernels import pairwise_kernel

RNG = np.random.default_rng(0)
X = RNG.normal(size=(200, 10)) / np.sqrt(10)


def _err(est, kernel, **kw):
    return relative_kernel_error(X, est, kernel, n_sample=None, **kw)


def test_gaussian_error_vs_exact_kernel_shrinks():
    errs = [np.median([_err(GaussianSketch(gamma=0.5, n_components=m, random_state=s).fit(X), "rbf",
                            gamma=0.5) for s in range(3)]) for m in (256, 4096)]
    assert errs[1] < 0.08
    assert errs[0] / errs[1] > 2.0      # ~ sqrt(16) for a sketch error ∝ 1/sqrt(m)


def test_gaussian_degree_from_radius_bounds_truncation():
    est = GaussianSketch(gamma=0.5, n_components=512, truncation_tol=1e-6, random_state=0).fit(X)
    np.testing.assert_allclose(est.center_, X.mean(axis=0), atol=1e-7)    # float32-rounded mean
    Xc = X - est.center_
    R = np.linalg.norm(Xc, axis=1).max()
    assert abs(est.radius_ - R) < 1e-12
    # exact truncated series (of the centred data) with the chosen degree: error below tol
    q = est.max_degree_
    G = Xc @ Xc.T
    trunc = sum((2 * 0.5 * G) ** j / np.prod(np.arange(1, j + 1)) for j in range(q + 1))
    sq = np.sum(Xc * Xc, axis=1)
    approx = np.exp(-0.5 * sq)[:, None] * trunc * np.exp(-0.5 * sq)[None, :]
    assert np.abs(approx - pairwise_kernel(X, X, "rbf", gamma=0.5)).max() <= 1e-6
    assert est.term_components_.sum() == 512 == est.n_output_features_


@pytest.mark.parametrize("kernel", ["ntk", "arccos0", "arccos1"])
def test_dot_product_error_vs_exact_kernel(kernel):
    errs = [np.median([_err(DotProductKernelSketch(kernel=kernel, n_components=m, random_state=s).fit(X),
                            kernel) for s in range(3)]) for m in (256, 4096)]
    assert errs[1] < 0.12
    assert errs[0] / errs[1] > 2.0


def test_callable_coefficients_exp_of_cosine():
    # κ(t) = e^t = Σ t^j / j!, inputs normalised (a = 0)
    coef = lambda j: 1.0 / np.cumprod(np.concatenate(([1.0], np.arange(1, j.size))))  # noqa: E731
    est = DotProductKernelSketch(kernel=coef, n_components=4096, n_exact=8, n_tail_samples=0,
                                 max_degree=10, random_state=0).fit(X)
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    K = np.exp(U @ U.T)
    Z = est.transform(X)
    assert np.linalg.norm(Z @ Z.T - K) / np.linalg.norm(K) < 0.05


def test_zero_rows_and_arccos0_diagonal():
    Xz = np.vstack([np.zeros((1, 10)), X[:5]])
    Z = DotProductKernelSketch(kernel="arccos0", n_components=64, random_state=0).fit_transform(Xz)
    assert abs(Z[0] @ Z[0] - 0.5) < 1e-12            # κ0(0) = 1/2, as kernel_diagonal says
    Z1 = DotProductKernelSketch(kernel="ntk", n_components=64, random_state=0).fit_transform(Xz)
    assert np.all(Z1[0] == 0)


@pytest.mark.parametrize("est", [GaussianSketch(gamma=0.5, n_components=128, random_state=1),
                                 DotProductKernelSketch(n_components=128, random_state=1)])
def test_chunking_invariance_rows_and_columns(est):
    est.fit(X)
    ref = est.transform(X)
    np.testing.assert_array_equal(est.transform(da.from_array(X, chunks=(37, 10))).compute(), ref)
    np.testing.assert_allclose(est.transform(da.from_array(X, chunks=(64, 3))).compute(), ref,
                               atol=1e-12, rtol=0)
    Z32 = est.transform(X.astype(np.float32))
    assert Z32.dtype == np.float32
    np.testing.assert_allclose(Z32, ref, atol=1e-3)


def test_tail_sampling_recorded():
    est = DotProductKernelSketch(kernel="arccos0", n_exact=3, n_tail_samples=4, random_state=5).fit(X)
    kept = est.term_degrees_ >= 3
    # sampled degrees are sketched or (if too heavy for their share of components) dropped
    assert kept.sum() + np.sum(est.dropped_degrees_ >= 3) == 4
    assert kept.sum() >= 1
    np.testing.assert_allclose(est.term_weights_[kept], est.tail_mass_ / 4)
    np.testing.assert_allclose(est.tail_mass_, est.coefficients_[3:].sum())


@pytest.mark.parametrize(("est", "match"), [
    (GaussianSketch(gamma=-1.0), "gamma"),
    (GaussianSketch(max_degree=0), "max_degree"),
    (DotProductKernelSketch(kernel="poly"), "kernel"),
    (DotProductKernelSketch(n_components=1), "n_components"),
    (GaussianSketch(max_error=0.0), "max_error"),
    (GaussianSketch(center="yes"), "center"),
])
def test_bad_parameters(est, match):
    with pytest.raises(ConfigError, match=match):
        est.fit(X)


# --- regime checks: accuracy where the Taylor sketch works, a clear error where it cannot ---------
U = np.random.default_rng(1).uniform(-1, 1, size=(300, 8))


def _rel_err(est, A, gamma):
    Z = est.transform(A)
    K = pairwise_kernel(A, A, "rbf", gamma=gamma)
    return np.linalg.norm(Z @ Z.T - K) / np.linalg.norm(K)


def test_gaussian_moderate_regime_error_shrinks_with_components():
    # γR² ≈ 1.3 (degree ~14): before the variance-aware split this gave relative errors ~17
    errs = [np.median([_rel_err(GaussianSketch(gamma=0.5, n_components=m, random_state=s).fit(U), U, 0.5)
                       for s in range(3)]) for m in (512, 4096)]
    assert errs[1] < 0.2
    assert errs[0] > errs[1] * 1.5
    est = GaussianSketch(gamma=0.5, n_components=4096, random_state=0).fit(U)
    # the variance model predicts the measured RMS error of k̂(x, x) within a factor 3
    Z = est.transform(U)
    diag_rms = np.sqrt(np.mean((np.sum(Z * Z, axis=1) - 1.0) ** 2))
    assert diag_rms / 3 <= est.predicted_error_ <= 3 * diag_rms
    assert np.abs(Z).max() < 2.0        # was 19 with the old split (heavy-tailed high-degree terms)


def test_gaussian_centring_makes_offset_data_equivalent():
    est0 = GaussianSketch(gamma=0.5, n_components=1024, random_state=0).fit(U)
    est1 = GaussianSketch(gamma=0.5, n_components=1024, random_state=0).fit(U + 10.0)
    np.testing.assert_allclose(est1.center_ - 10.0, est0.center_, atol=1e-5)
    assert abs(est1.radius_ - est0.radius_) < 1e-4 and est1.max_degree_ == est0.max_degree_
    np.testing.assert_array_equal(est1.term_components_, est0.term_components_)
    np.testing.assert_allclose(est1.transform(U + 10.0), est0.transform(U), atol=1e-4)
    assert _rel_err(est1, U + 10.0, 0.5) < 0.3
    # without centring, the shifted data (radius ~28) is hopeless and says so
    with pytest.raises(ConfigError, match="radius"):
        GaussianSketch(gamma=0.5, n_components=1024, center=False, random_state=0).fit(U + 10.0)


def test_gaussian_centring_sparse_and_column_chunks_match_dense():
    import scipy.sparse as sps
    A = np.where(np.random.default_rng(3).random((120, 10)) < 0.3, 1.0, 0.0)
    est = GaussianSketch(gamma=0.3, n_components=256, random_state=2).fit(A)
    assert np.any(est.center_ != 0)
    ref = est.transform(A)
    np.testing.assert_allclose(est.transform(sps.csr_matrix(A)), ref, atol=1e-12)
    np.testing.assert_allclose(est.transform(da.from_array(A, chunks=(50, 4))).compute(), ref, atol=1e-12)
    np.testing.assert_allclose(GaussianSketch(gamma=0.3, n_components=256, random_state=2)
                               .fit(da.from_array(A, chunks=(17, 10))).center_, est.center_)


def test_gaussian_hopeless_regime_raises_with_numbers():
    with pytest.raises(ConfigError) as info:
        GaussianSketch(gamma=2.0, n_components=1024, random_state=0).fit(U)
    msg = str(info.value)
    for part in ("gamma=2", "radius r=", "q=", "n_components=", "RandomFourierFeatures", "rescale"):
        assert part in msg
    # the estimate of the components needed is larger than what was asked for
    need = int(msg.split("about n_components=")[1].split()[0])
    assert need > 1024
    # the override keeps the error bounded (terms that would explode are dropped), no overflow
    est = GaussianSketch(gamma=2.0, n_components=1024, check_variance=False, random_state=0).fit(U)
    assert est.predicted_error_ > 0.5 and est.dropped_degrees_.size > 0
    Z = est.transform(U)
    assert np.abs(Z).max() < 2.0
    assert _rel_err(est, U, 2.0) < 1.5


@pytest.mark.parametrize("kernel", ["ntk", "arccos1"])
def test_dot_product_small_sketch_no_variance_blowup(kernel):
    # before: 128 components spread over sampled degrees up to 16 gave relative errors of 10..170
    Xn = U / np.linalg.norm(U, axis=1, keepdims=True)
    for A in (U, Xn):
        est = DotProductKernelSketch(kernel=kernel, n_components=128, random_state=0).fit(A)
        Z = est.transform(A)
        K = pairwise_kernel(A, A, kernel)
        assert np.linalg.norm(Z @ Z.T - K) / np.linalg.norm(K) < 0.5
        assert est.predicted_error_ <= 0.5


def test_dot_product_variance_check_raises():
    with pytest.raises(ConfigError, match="n_components=8 is too small"):
        DotProductKernelSketch(kernel="ntk", n_components=8, n_exact=6, max_error=0.05, random_state=0).fit(U)


@settings(max_examples=8, deadline=None)
@given(rows=st.integers(1, 120), fit_rows=st.integers(7, 300))
def test_gaussian_fit_and_transform_independent_of_row_chunking(rows, fit_rows):
    ref_est = GaussianSketch(gamma=0.4, n_components=200, random_state=3).fit(U[:120] + 3.0)
    ref = ref_est.transform(U[:120] + 3.0)
    est = GaussianSketch(gamma=0.4, n_components=200, random_state=3).fit(
        da.from_array(U[:120] + 3.0, chunks=(fit_rows, 8)))
    np.testing.assert_array_equal(est.center_, ref_est.center_)
    np.testing.assert_array_equal(est.term_components_, ref_est.term_components_)
    got = est.transform(da.from_array(U[:120] + 3.0, chunks=(rows, 8))).compute()
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("make", [lambda: GaussianSketch(gamma=0.5, n_components=128, random_state=1),
                                  lambda: DotProductKernelSketch(n_components=128, random_state=1)])
def test_in_task_row_slices_change_no_bit(make, monkeypatch):
    # tasks sketch their block in cache-sized row slices; 16-row slices must give the same bits
    import distsketch.estimators.features.linear_stage as poly

    est = make().fit(X)
    ref = est.transform(X)
    monkeypatch.setattr(poly, "_FUSED_BYTES", 0)
    np.testing.assert_array_equal(est.transform(da.from_array(X, chunks=(45, 10))).compute(), ref)
