"""Pure NumPy Nyström and MEKA pieces against exact linear algebra."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distsketch.errors import ConfigError
from distsketch.ops.kernels import pairwise_kernel
from distsketch.ops.meka import (
    choose_ranks,
    expand_block,
    nearest_centre,
    project_block,
    scatter_basis,
)
from distsketch.ops.nystrom import (
    ensemble_map,
    inv_sqrt_map,
    link_matrix,
    link_matrix_closed_form,
    nystrom_map,
    randomized_inv_sqrt_map,
    row_stable_apply,
)

RNG = np.random.default_rng(0)
X = RNG.normal(size=(120, 4))


def test_inv_sqrt_map_is_pseudo_inverse_root():
    W = pairwise_kernel(X[:30], X[:30], "rbf", gamma=0.3)
    M, vals = inv_sqrt_map(W)
    np.testing.assert_allclose(M @ M.T @ W @ M @ M.T, M @ M.T, atol=1e-6 * np.abs(M @ M.T).max())
    np.testing.assert_allclose(np.sort(vals)[::-1], vals)
    # full rank here: M Mᵀ is the inverse
    np.testing.assert_allclose(W @ M @ M.T, np.eye(30), atol=1e-6)


def test_inv_sqrt_map_truncates_rank_and_zero_eigenvalues():
    A = RNG.normal(size=(20, 3))
    W = A @ A.T  # rank 3
    M, vals = inv_sqrt_map(W)
    assert M.shape == (20, 3) and len(vals) == 3
    # W_k^{+1/2} of a PSD matrix: W M Mᵀ W = W
    np.testing.assert_allclose(W @ M @ M.T @ W, W, atol=1e-8 * np.abs(W).max())
    M2, vals2 = inv_sqrt_map(W, rank=2)
    assert M2.shape == (20, 2)
    np.testing.assert_allclose(vals2, vals[:2])


def test_randomized_map_equals_exact_on_low_rank():
    A = RNG.normal(size=(40, 5))
    W = A @ A.T
    M, vals = inv_sqrt_map(W, rank=5)
    Mr, valsr = randomized_inv_sqrt_map(W, 5, seed=3)
    np.testing.assert_allclose(valsr, vals, rtol=1e-8)
    np.testing.assert_allclose(Mr @ Mr.T, M @ M.T, atol=1e-8 * np.abs(M @ M.T).max())


def test_ensemble_of_one_is_standard_and_averages_experts():
    W = pairwise_kernel(X[:24], X[:24], "rbf", gamma=0.2)
    M, _ = inv_sqrt_map(W)
    np.testing.assert_allclose(ensemble_map(W, 1) @ ensemble_map(W, 1).T, M @ M.T, atol=1e-8)
    E = ensemble_map(W, 3)
    expect = np.zeros_like(W)
    for e in range(3):
        idx = np.arange(e, 24, 3)
        Me, _ = inv_sqrt_map(W[np.ix_(idx, idx)])
        expect[np.ix_(idx, idx)] += Me @ Me.T / 3
    np.testing.assert_allclose(E @ E.T, expect, atol=1e-8)
    with pytest.raises(ConfigError):
        ensemble_map(W, 25)


def test_all_landmarks_reproduce_kernel():
    G = pairwise_kernel(X, X, "laplacian", gamma=0.5)
    M, _ = inv_sqrt_map(G)
    Z = nystrom_map(X, 0, X, M, kernel="laplacian", params={"gamma": 0.5})
    np.testing.assert_allclose(Z @ Z.T, G, atol=1e-7)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(cuts=st.lists(st.integers(1, 699), max_size=5, unique=True))
def test_nystrom_map_rows_bitwise_independent_of_chunking(cuts):
    Xl = np.random.default_rng(2).normal(size=(700, 6)).astype(np.float32)
    L = Xl[:40].astype(np.float64)
    M, _ = inv_sqrt_map(pairwise_kernel(L, L, "rbf", gamma=0.1))
    ref = nystrom_map(Xl, 0, L, M, kernel="rbf", params={"gamma": 0.1})
    edges = [0, *sorted(cuts), 700]
    got = np.vstack([nystrom_map(Xl[a:b], a, L, M, kernel="rbf", params={"gamma": 0.1})
                     for a, b in itertools.pairwise(edges)])
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, ref)


def test_row_stable_apply_handles_offsets():
    f = lambda T: T @ np.ones((T.shape[1], 2))  # noqa: E731
    A = RNG.normal(size=(10, 3))
    out = row_stable_apply(f, A, 2, row_offset=250)
    np.testing.assert_allclose(out, f(A), rtol=1e-12)


def test_link_matrix_matches_closed_form_and_direct_least_squares():
    Ws = RNG.normal(size=(15, 4))
    Wt = RNG.normal(size=(12, 3))
    G = RNG.normal(size=(15, 12))
    L = link_matrix(Ws, G, Wt)
    np.testing.assert_allclose(L, link_matrix_closed_form(Ws, G, Wt), rtol=1e-9, atol=1e-12)
    # vec(Ws L Wtᵀ) = (Wt ⊗ Ws) vec(L) in column-major order
    A = np.kron(Wt, Ws)
    vecL, *_ = np.linalg.lstsq(A, G.reshape(-1, order="F"), rcond=None)
    np.testing.assert_allclose(L, vecL.reshape(4, 3, order="F"), rtol=1e-9, atol=1e-12)


def test_link_matrix_tolerance_ignores_near_zero_bases():
    Ws = 1e-12 * RNG.normal(size=(10, 3))
    Wt = RNG.normal(size=(10, 3))
    L = link_matrix(Ws, 1e-12 * RNG.normal(size=(10, 10)), Wt, tol=1e-6)
    assert np.all(L == 0)
    assert np.abs(link_matrix(Ws, np.ones((10, 10)), Wt)).max() > 1e6  # without tol: blow-up


def test_nearest_centre_matches_brute_force():
    C = RNG.normal(size=(5, 4))
    lab, dist = nearest_centre(X, C, 17)
    d = ((X[:, None] - C[None]) ** 2).sum(-1)
    np.testing.assert_array_equal(lab, d.argmin(1))
    np.testing.assert_allclose(dist, d.min(1), rtol=1e-9, atol=1e-12)


def test_choose_ranks_fixed_and_spectrum():
    ev = [np.array([5.0, 4.0, 0.1]), np.array([3.0, 2.9, 2.8]), np.array([0.5])]
    np.testing.assert_array_equal(choose_ranks(ev, 2, None), [2, 2, 1])
    # top 6 of the pooled spectrum: 5, 4, 3, 2.9, 2.8, 0.5
    np.testing.assert_array_equal(choose_ranks(ev, 2, "spectrum"), [2, 3, 1])


def test_scatter_project_expand_agree_with_dense_products():
    ranks = np.array([2, 3])
    offsets = np.array([0, 2])
    coords = np.array([[1.0, 2.0, 9.0, 0.0], [3.0, 4.0, 5.0, 1.0], [6.0, 7.0, 9.0, 0.0]])
    W = scatter_basis(coords, offsets, ranks)
    np.testing.assert_array_equal(W, [[1, 2, 0, 0, 0], [0, 0, 3, 4, 5], [6, 7, 0, 0, 0]])
    V = RNG.normal(size=(3, 2))
    U = RNG.normal(size=(5, 2))
    np.testing.assert_allclose(project_block(coords, V, offsets, ranks), W.T @ V)
    np.testing.assert_allclose(expand_block(coords, U, offsets, ranks), W @ U)


# ------------------------------------------ randomized: oversampling and power iterations

def _rank_k(M: np.ndarray, vals: np.ndarray) -> np.ndarray:
    # M = U Λ^{-1/2}: the rank-k approximation it inverts is U Λ Uᵀ
    U = M * np.sqrt(vals)[None, :]
    return (U * vals[None, :]) @ U.T


RBF_W = pairwise_kernel(np.random.default_rng(7).normal(size=(200, 6)), None, "rbf", gamma=0.1)


@pytest.mark.parametrize(("p", "q"), [(5, 0), (5, 1), (10, 0), (10, 1), (10, 3)])
def test_randomized_within_halko_martinsson_tropp_bound(p, q):
    # HMT Cor. 10.9 (power scheme, §10.4): with probability >= 1 − 6 p^{−p},
    # ‖(I − QQᵀ)W‖₂ <= (1 + 11 √(k+p) √m)^{1/(2q+1)} σ_{k+1}; truncating to rank k adds
    # at most σ_{k+1} (Thm. 9.3).  Five seeds, failure probability <= 5 · 6 · 5⁻⁵ < 0.01.
    W, k, m = RBF_W, 20, 200
    lam = np.linalg.eigvalsh(W)[::-1]
    bound = lam[k] * (1.0 + (1.0 + 11.0 * np.sqrt(k + p) * np.sqrt(m)) ** (1.0 / (2 * q + 1)))
    for seed in range(5):
        M, vals = randomized_inv_sqrt_map(W, k, seed, n_oversamples=p, n_power_iter=q)
        assert M.shape == (m, k)
        assert np.linalg.norm(W - _rank_k(M, vals), 2) <= bound


def test_randomized_approaches_best_rank_k_with_power_iterations():
    W, k, p = RBF_W, 20, 10
    lam, V = np.linalg.eigh(W)
    lam, V = lam[::-1], V[:, ::-1]
    best = (V[:, :k] * lam[:k]) @ V[:, :k].T
    errs = {}
    for q in (0, 1, 2, 6):
        e = []
        for seed in range(3):
            M, vals = randomized_inv_sqrt_map(W, k, seed, n_oversamples=p, n_power_iter=q)
            e.append(np.linalg.norm(W - _rank_k(M, vals), 2) / lam[k])
        errs[q] = np.mean(e)
    # more power iterations, closer to the optimum σ_{k+1} (ratio 1)
    assert errs[0] > errs[1] > errs[2] >= errs[6] >= 1.0 - 1e-12
    # subspace iteration (Ω of k + p columns, W^{2q+1}) turns the top-k subspace by
    # tan θ ≲ ρ = (λ_{k+p+1}/λ_k)^{2q+1} and errs the eigenvalues by O(ρ²) relatively:
    # at q = 6 ρ < 1e-5, so eigh's rank-k approximation is matched to λ_k ρ
    rho = (lam[k + p] / lam[k - 1]) ** 13
    assert rho < 1e-5
    M, vals = randomized_inv_sqrt_map(W, k, 0, n_oversamples=p, n_power_iter=6)
    np.testing.assert_allclose(vals, lam[:k], rtol=10 * rho ** 2 + 1e-12)
    np.testing.assert_allclose(_rank_k(M, vals), best, rtol=0, atol=lam[k - 1] * rho)
    assert errs[6] <= 1.0 + 1e-9


def test_randomized_default_and_plain_range_finder_are_the_documented_schemes():
    from distsketch.ops.random import random_rows

    W, k = RBF_W, 15
    m = W.shape[0]

    def by_hand(p: int, products: int) -> np.ndarray:
        omega = random_rows(4, "nystrom.rsvd", 0, m, k + p)
        Q, _ = np.linalg.qr(W @ omega)
        for _ in range(products):
            Q, _ = np.linalg.qr(W @ Q)
        vals, vecs = np.linalg.eigh(Q.T @ W @ Q)
        U = Q @ vecs[:, ::-1][:, :k]
        return (U * vals[::-1][:k]) @ U.T

    # defaults p = 10, q = 1: Ω of k + 10 columns and W applied 3 times (W³Ω)
    M, vals = randomized_inv_sqrt_map(W, k, 4)
    np.testing.assert_allclose(_rank_k(M, vals), by_hand(10, 2), rtol=0, atol=1e-10)
    # p = 0, q = 0: the plain range finder QR(WΩ), Ω of k columns
    M0, vals0 = randomized_inv_sqrt_map(W, k, 4, n_oversamples=0, n_power_iter=0)
    np.testing.assert_allclose(_rank_k(M0, vals0), by_hand(0, 0), rtol=0, atol=1e-10)
    assert np.linalg.norm(W - _rank_k(M0, vals0), 2) > np.linalg.norm(W - _rank_k(M, vals), 2)
