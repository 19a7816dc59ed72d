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
