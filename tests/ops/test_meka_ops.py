"""Tests of the pure NumPy MEKA pieces (distsketch.ops.meka)."""

import numpy as np
import pytest

from distsketch.ops.meka import psd_core


def _problem(seed=0, n=60, k=9, rank_deficient=False):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(n, k)) * rng.uniform(0.1, 3.0, size=k)
    if rank_deficient:  # a column that is zero on every training row
        W[:, -1] = 0.0
    A = rng.normal(size=(k, k))
    L = A + A.T  # symmetric, indefinite
    return W, L


@pytest.mark.parametrize("rank_deficient", [False, True])
def test_psd_core_diagonalises_the_approximation(rank_deficient):
    W, L = _problem(rank_deficient=rank_deficient)
    B, e = psd_core(W.T @ W, L)
    G = W @ L @ W.T
    r = W.shape[1] - int(rank_deficient)
    assert B.shape == (W.shape[1], r) and e.shape == (r,)
    Q = W @ B
    np.testing.assert_allclose(Q.T @ Q, np.eye(r), atol=1e-10)  # orthonormal on the rows
    np.testing.assert_allclose(Q @ np.diag(e) @ Q.T, G, atol=1e-9 * np.abs(G).max())
    # e are the nonzero eigenvalues of the n × n matrix W L Wᵀ
    ev = np.linalg.eigvalsh(G)
    nonzero = ev[np.argsort(-np.abs(ev))[:r]]
    np.testing.assert_allclose(np.sort(e), np.sort(nonzero), rtol=1e-9, atol=1e-9)
    assert e.min() < 0 < e.max()


def test_clipping_the_core_gives_the_nearest_psd_matrix():
    W, L = _problem(seed=1)
    B, e = psd_core(W.T @ W, L)
    Q = W @ B
    clipped = Q @ np.diag(np.clip(e, 0, None)) @ Q.T
    ev, V = np.linalg.eigh(W @ L @ W.T)
    reference = (V * np.clip(ev, 0, None)) @ V.T  # Higham: clip the eigenvalues
    np.testing.assert_allclose(clipped, reference, atol=1e-9 * np.abs(reference).max())
    assert np.linalg.eigvalsh(clipped)[0] >= -1e-9 * np.abs(ev).max()
