"""Gram sparsification/quantisation ops: exactness, symmetry, unbiasedness, spectral scaling."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.linalg import subspace_angles
from threadpoolctl import threadpool_limits

from distsketch.errors import ConfigError
from distsketch.ops.kernels import kernel_function, pairwise_kernel
from distsketch.ops.sparsify import (
    entry_variance_bound,
    furedi_komlos_bound,
    kernel_bound,
    kernel_tile,
    orthogonal_iteration,
    simplify_entries,
    simplify_tile,
)

RNG = np.random.default_rng(7)
X = RNG.normal(size=(70, 3))
KFUN = kernel_function("rbf", gamma=0.3)


def _simplified_dense(K, seed, p, quantize=False, bound=None):
    n = K.shape[0]
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    return simplify_entries(K, i, j, seed, p, quantize, bound)[1]


def test_kernel_tile_equals_exact_kernel():
    K = kernel_tile(KFUN, X[10:50], 10, X[5:70], 5, cell=16)
    np.testing.assert_allclose(K, pairwise_kernel(X[10:50], X[5:70], "rbf", gamma=0.3),
                               rtol=1e-12, atol=1e-14)


@settings(max_examples=25, deadline=None)
@given(a=st.integers(0, 69), b=st.integers(1, 70), c=st.integers(0, 69), e=st.integers(1, 70))
def test_kernel_tile_bitwise_independent_of_tiling(a, b, c, e):
    r0, r1 = min(a, b - 1), max(a + 1, b)
    c0, c1 = min(c, e - 1), max(c + 1, e)
    full = kernel_tile(KFUN, X, 0, X, 0, cell=16)
    part = kernel_tile(KFUN, X[r0:r1], r0, X[c0:c1], c0, cell=16)
    assert np.array_equal(part, full[r0:r1, c0:c1])


@pytest.mark.parametrize("quantize", [False, True])
def test_simplified_matrix_is_symmetric_and_tiles_agree(quantize):
    K = pairwise_kernel(X, X, "rbf", gamma=0.3)
    S = _simplified_dense(K, 3, 0.4, quantize, 1.0)
    assert np.array_equal(S, S.T)
    # lower-triangle COO of two tiles reproduces the same entries
    rows, cols, vals = simplify_tile(K[20:45, :45], 20, 0, 3, 0.4, quantize, 1.0, lower=True)
    assert np.all(cols <= rows + 20)
    L = np.zeros((25, 70))
    L[rows, cols] = vals
    assert np.array_equal(L[:, :45], np.tril(S[20:45, :45], k=20))


def test_sparsified_values():
    K = pairwise_kernel(X, X, "rbf", gamma=0.3)
    S = _simplified_dense(K, 1, 0.25)
    kept = S != 0
    np.testing.assert_allclose(S[kept], K[kept] / 0.25, rtol=1e-15)
    # fraction kept: binomial over n(n+1)/2 independent decisions
    m = 70 * 71 // 2
    frac = kept[np.triu_indices(70)].mean()
    assert abs(frac - 0.25) < 5 * np.sqrt(0.25 * 0.75 / m)


@pytest.mark.parametrize("p,quantize", [(0.3, False), (1.0, True), (0.5, True)])
def test_unbiased_entrywise(p, quantize):
    K = pairwise_kernel(X[:20], X[:20], "rbf", gamma=0.3)
    S = 3000
    acc = np.zeros_like(K)
    for seed in range(S):
        acc += _simplified_dense(K, seed, p, quantize, 1.0)
    mean = acc / S
    sd = np.sqrt(entry_variance_bound(p, quantize, 1.0) / S)
    # 400 entries, each a mean of S i.i.d. bounded draws: |z| < 5 with overwhelming probability
    assert np.max(np.abs(mean - K)) < 5 * sd


def test_quantize_rejects_values_above_bound():
    K = np.array([[2.0]])
    with pytest.raises(ConfigError, match="exceeds the quantisation level"):
        simplify_entries(K, np.array([[0]]), np.array([[0]]), 0, 1.0, True, 1.0)
    with pytest.raises(ConfigError, match="p=0"):
        simplify_entries(K, np.array([[0]]), np.array([[0]]), 0, 0.0)
    assert kernel_bound("rbf") == 1.0 and kernel_bound("polynomial") is None


def test_spectral_error_scales_like_sqrt_n():
    with threadpool_limits(limits=1):  # many mid-size eigvalsh calls: threads only add contention
        _check_spectral_scaling()


def _check_spectral_scaling():
    # entries of E are independent, zero mean, variance <= sigma^2: ||E||_2 = Theta(sigma sqrt(n))
    p = 0.2
    ns = [64, 128, 256, 512, 1024]
    norms = []
    rng = np.random.default_rng(0)
    for n in ns:
        Z = rng.uniform(size=(n, 2))
        K = pairwise_kernel(Z, Z, "rbf", gamma=0.5)
        vals = []
        for seed in range(2):
            E = _simplified_dense(K, seed, p) - K
            vals.append(np.abs(np.linalg.eigvalsh(E)).max())
            assert vals[-1] <= furedi_komlos_bound(n, np.sqrt(entry_variance_bound(p, False, 1.0)))
        norms.append(np.mean(vals))
    slope = np.polyfit(np.log(ns), np.log(norms), 1)[0]
    assert 0.4 < slope < 0.6, slope


def test_orthogonal_iteration_matches_eigh():
    rng = np.random.default_rng(1)
    Q, _ = np.linalg.qr(rng.normal(size=(120, 120)))
    lam = np.concatenate(([50.0, 30.0, 20.0], rng.uniform(-3, 3, size=117)))
    A = (Q * lam) @ Q.T
    vals, vecs, n_iter = orthogonal_iteration(lambda V: A @ V, 120, 3, seed=0, tol=1e-12)
    np.testing.assert_allclose(vals, [50.0, 30.0, 20.0], rtol=1e-10)
    assert np.max(subspace_angles(vecs, Q[:, :3])) < 1e-8
    # subspace error decays like (|λ_12| / λ_3)^t <= (3/20)^t with k + oversample = 11 vectors:
    # 1e-12 needs ~15 iterations; allow twice that
    assert 1 <= n_iter <= 2 * np.ceil(np.log(1e-12) / np.log(3 / 20))


def test_orthogonal_iteration_returns_top_algebraic_of_an_indefinite_matrix():
    # the most negative eigenvalues are the largest in magnitude: plain subspace
    # iteration would return them
    rng = np.random.default_rng(2)
    Q, _ = np.linalg.qr(rng.normal(size=(150, 150)))
    lam = np.concatenate(([40.0, 35.0, 30.0], [-60.0, -55.0, -50.0, -45.0],
                          rng.uniform(-10, 10, size=143)))
    A = (Q * lam) @ Q.T
    vals, vecs, _ = orthogonal_iteration(lambda V: A @ V, 150, 3, seed=0, tol=1e-12)
    np.testing.assert_allclose(vals, np.linalg.eigvalsh(A)[::-1][:3], rtol=1e-10)
    assert np.max(subspace_angles(vecs, Q[:, :3])) < 1e-8


def test_orthogonal_iteration_warns_when_it_stops_at_max_iter():
    from sklearn.exceptions import ConvergenceWarning

    rng = np.random.default_rng(3)
    Q, _ = np.linalg.qr(rng.normal(size=(100, 100)))
    lam = np.linspace(10.0, 9.0, 100)  # no gap: tol 1e-12 needs thousands of iterations
    A = (Q * lam) @ Q.T
    with pytest.warns(ConvergenceWarning, match="did not converge in max_iter=5"):
        vals, vecs, n_iter = orthogonal_iteration(lambda V: A @ V, 100, 2, seed=0, max_iter=5,
                                                  tol=1e-12)
    assert n_iter == 5
    # what is returned is still a Rayleigh–Ritz pair of the last basis
    np.testing.assert_allclose(vals, np.diag(vecs.T @ A @ vecs), rtol=1e-12)
