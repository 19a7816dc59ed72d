"""Tests of the small dense solvers in distsketch.ops.sketch_solve."""

import numpy as np
import pytest
import scipy.linalg as sla

from distsketch.errors import ConfigError
from distsketch.ops.sketch_solve import (
    centered_normal_equations,
    estimate_statistical_dimension,
    nystrom_factor,
    ridge_path,
    statistical_dimension,
    summary_sse,
    woodbury_apply,
    woodbury_factor,
)
from distsketch.summaries.covariance import Covariance


def _state(Z, y):
    return Covariance(n_targets=y.shape[1]).chunk(np.hstack([Z, y]), 0)


def test_ridge_path_equals_separate_solves():
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(50, 8))
    y = rng.normal(size=(50, 2))
    alphas = [1e-3, 0.1, 10.0]
    W = ridge_path(Z.T @ Z, Z.T @ y, alphas)
    for k, lam in enumerate(alphas):
        np.testing.assert_allclose(W[k], sla.solve(Z.T @ Z + lam * np.eye(8), Z.T @ y),
                                   rtol=1e-9, atol=1e-12)
    with pytest.raises(ConfigError, match="alpha"):
        ridge_path(Z.T @ Z, Z.T @ y, [0.0])


def test_centered_normal_equations_and_summary_sse():
    rng = np.random.default_rng(1)
    Z = rng.normal(size=(40, 5)) + 3.0
    y = rng.normal(size=(40, 2)) - 1.0
    A, b, zm, ym = centered_normal_equations(_state(Z, y), True)
    np.testing.assert_allclose(zm, Z.mean(0))
    np.testing.assert_allclose(ym, y.mean(0))
    Zc, yc = Z - Z.mean(0), y - y.mean(0)
    np.testing.assert_allclose(A, Zc.T @ Zc, atol=1e-9)
    np.testing.assert_allclose(b, Zc.T @ yc, atol=1e-9)
    W = rng.normal(size=(3, 5, 2))
    c = rng.normal(size=(3, 2))
    sse = summary_sse(_state(Z, y), W, c)
    ref = np.stack([((y - Z @ W[p] - c[p]) ** 2).sum(0) for p in range(3)])
    np.testing.assert_allclose(sse, ref, rtol=1e-9)


def test_woodbury_inverse_and_nystrom_factor():
    rng = np.random.default_rng(2)
    Z = rng.normal(size=(30, 6))
    lam = 0.3
    R = woodbury_factor(Z.T @ Z, lam)
    V = rng.normal(size=(30, 2))
    np.testing.assert_allclose(woodbury_apply(Z, R, lam, V),
                               sla.solve(Z @ Z.T + lam * np.eye(30), V), rtol=1e-8, atol=1e-10)
    K = Z[:6] @ Z[:6].T + np.eye(6)
    T = nystrom_factor(K, jitter=0.0)
    np.testing.assert_allclose(T.T @ T, K, rtol=1e-10)
    with pytest.raises(ConfigError):
        woodbury_factor(Z.T @ Z, 0.0)


def test_statistical_dimension_estimate():
    rng = np.random.default_rng(3)
    Z = rng.normal(size=(4000, 10)) * np.geomspace(3, 0.01, 10)
    lam = 5.0
    # nonzero spectra of Z Zᵀ and ZᵀZ agree (checked on a small slice)
    Zs = Z[:150]
    assert statistical_dimension(np.linalg.eigvalsh(Zs @ Zs.T), lam) == pytest.approx(
        statistical_dimension(np.linalg.eigvalsh(Zs.T @ Zs), lam), rel=1e-9)
    exact = statistical_dimension(np.linalg.eigvalsh(Z.T @ Z), lam)
    # a sample smaller than m takes the n_s × n_s route: same value as the m × m route
    assert estimate_statistical_dimension(Z[:5], 4000, lam) == pytest.approx(
        statistical_dimension(np.linalg.eigvalsh(Z[:5].T @ Z[:5]) * 800, lam), rel=1e-9)
    est = estimate_statistical_dimension(Z[::8], Z.shape[0], lam)
    # a 1/8 sample: eigenvalues within ~ sqrt(m/n_s) relative error; s_λ moves less than that
    assert abs(est - exact) <= 0.15 * exact


def test_kernel_statistical_dimension_from_a_row_sample():
    from distsketch.ops.kernels import pairwise_kernel
    from distsketch.ops.sketch_solve import kernel_statistical_dimension

    rng = np.random.default_rng(3)
    X = rng.normal(size=(1500, 2))
    lam = 1e-2
    K = pairwise_kernel(X, X, "rbf", gamma=1.0)
    exact = statistical_dimension(np.linalg.eigvalsh(K), lam)
    # the whole matrix as the "sample": the exact value
    np.testing.assert_allclose(kernel_statistical_dimension(K, 1500, lam), exact, rtol=1e-10)
    # a uniform third of the rows, eigenvalues scaled by n/s: close to it (measured 80 vs
    # 100: the sample resolves fewer of the eigenvalues near λ, so it errs low)
    idx = rng.choice(1500, 500, replace=False)
    est = kernel_statistical_dimension(K[np.ix_(idx, idx)], 1500, lam)
    assert 0.7 * exact <= est <= 1.05 * exact
    # never above the sample size
    assert kernel_statistical_dimension(K[:50, :50], 1500, 1e-12) <= 50 + 1e-9
    with pytest.raises(ConfigError, match="at least one"):
        kernel_statistical_dimension(np.zeros((0, 0)), 10, lam)
