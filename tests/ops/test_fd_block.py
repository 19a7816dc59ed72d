"""Frequent Directions' covariance formulation: one shrink of a block's AᵀA.

References are exact: the SVD of the rows (numpy.linalg) and the FD bound
‖AᵀA − BᵀB‖₂ ≤ Δ ≤ min_k ‖A − A_k‖_F²/(ℓ − k) computed from it.
"""

from __future__ import annotations

import numpy as np
import pytest

from distsketch.ops.fd import (
    COVARIANCE_MAX_COLUMNS,
    fd_block_formulation,
    fd_covariance_shrink,
    fd_merge,
)
from distsketch.ops.rff import rff_map, rff_operator
from distsketch.summaries.frequent_directions import FrequentDirectionsSummary

U32 = 2.0**-24


def _bound(A: np.ndarray, ell: int) -> float:
    s2 = np.linalg.svd(A, compute_uv=False) ** 2
    return float(min(s2[k:].sum() / (ell - k) for k in range(min(ell, len(s2)))))


def test_covariance_shrink_is_one_fd_shrink_of_all_rows():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(300, 40)) * 0.85 ** np.arange(40)
    ell = 8
    B, delta = fd_covariance_shrink(A.T @ A, ell)
    _, s, Vt = np.linalg.svd(A, full_matrices=False)
    assert delta == pytest.approx(s[ell - 1] ** 2, rel=1e-10)
    ref = Vt[:ell].T @ ((s[:ell] ** 2 - delta)[:, None] * Vt[:ell])
    np.testing.assert_allclose(B.T @ B, ref, rtol=0, atol=1e-10 * s[0] ** 2)
    C = A.T @ A - B.T @ B
    scale = float(np.sum(A * A))
    assert np.linalg.eigvalsh(C).min() >= -1e-10 * scale
    assert np.linalg.norm(C, 2) == pytest.approx(delta, rel=1e-9)
    assert delta <= _bound(A, ell) * (1 + 1e-12)


def test_width_at_most_ell_is_kept_exactly():
    A = np.random.default_rng(1).normal(size=(50, 5))
    B, delta = fd_covariance_shrink(A.T @ A, 7)
    assert B.shape == (7, 5) and delta == 0.0
    np.testing.assert_array_equal(B[5:], 0.0)
    np.testing.assert_allclose(B.T @ B, A.T @ A, rtol=0, atol=1e-12 * np.sum(A * A))


def test_the_formulation_follows_the_cost_model():
    # m = 1024, ℓ = 64: the covariance pays off from ~10⁴ rows per block
    assert fd_block_formulation(2048, 1024, 64) == "buffer"
    assert fd_block_formulation(32768, 1024, 64) == "covariance"
    # wide m with small ℓ: 2·m² per row costs more than 12·ℓ·m + the small shrinks
    assert fd_block_formulation(10**6, 2048, 16) == "buffer"
    assert fd_block_formulation(10**6, COVARIANCE_MAX_COLUMNS + 1, 512) == "buffer"
    # fewer rows than a buffer: never a covariance
    assert fd_block_formulation(100, 20, 64) == "buffer"


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_blocks_in_both_formulations_merge_within_the_guarantee(dtype):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(1700, 5)).astype(dtype)
    W, b = rff_operator(4, "rbf", 0.5, 5, 128)
    rff = lambda block, offset, W, b: rff_map(block, W, b, offset)  # noqa: E731
    s = FrequentDirectionsSummary(8, transform=rff, map_rows=256)
    # 1500 rows take the covariance, 200 rows the buffer (ℓ = 8, m = 128)
    assert fd_block_formulation(1500, 128, 8) == "covariance"
    assert fd_block_formulation(200, 128, 8) == "buffer"
    states = [s.chunk(X[:1500], 0, W, b), s.chunk(X[1500:], 1500, W, b)]
    st = s.merge(states)
    Z = rff_map(X, W, b, 0).astype(np.float64)
    B, scale = st["sketch"], float(np.sum(Z * Z))
    # float32: products of ≤ 256 rows summed in float64 and a float32 buffer shrink
    slack = (1e-10 if dtype == np.float64 else 256 * U32) * scale
    C = Z.T @ Z - B.T @ B
    err = np.linalg.norm(C, 2)
    assert np.linalg.eigvalsh(C).min() >= -slack
    assert err <= st["shrinkage"] + slack
    assert st["shrinkage"] <= _bound(Z, 8) + slack
    # the merged state equals fd_merge of the two block sketches
    M, d = fd_merge([t["sketch"] for t in states], 8, [t["shrinkage"] for t in states])
    np.testing.assert_array_equal(M, B)
    assert d == st["shrinkage"]
