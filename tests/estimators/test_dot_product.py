"""Gaussian (Taylor) and dot-product kernel (NTK / arc-cosine) sketches vs the exact kernels."""

import dask.array as da
import numpy as np
import pytest

from distsketch.errors import ConfigError
from distsketch.estimators.dot_product import DotProductKernelSketch, GaussianSketch
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
    est = GaussianSketch(gamma=0.5, n_components=512, tol=1e-6, random_state=0).fit(X)
    R = np.linalg.norm(X, axis=1).max()
    assert abs(est.radius_ - R) < 1e-12
    # exact truncated series with the chosen degree: error below tol times the largest row factor
    q = est.degree_
    G = X @ X.T
    trunc = sum((2 * 0.5 * G) ** j / np.prod(np.arange(1, j + 1)) for j in range(q + 1))
    sq = np.sum(X * X, axis=1)
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
    tail = est.term_degrees_[est.term_degrees_ >= 3]
    assert tail.size == 4
    np.testing.assert_allclose(est.term_weights_[-4:], est.tail_mass_ / 4)
    np.testing.assert_allclose(est.tail_mass_, est.coefficients_[3:].sum())


@pytest.mark.parametrize(("est", "match"), [
    (GaussianSketch(gamma=-1.0), "gamma"),
    (GaussianSketch(degree=0), "degree"),
    (DotProductKernelSketch(kernel="poly"), "kernel"),
    (DotProductKernelSketch(n_components=1), "n_components"),
])
def test_bad_parameters(est, match):
    with pytest.raises(ConfigError, match=match):
        est.fit(X)
