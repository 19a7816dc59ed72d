"""Frequent Directions kernels: the shrink against an SVD reference, the FD
guarantee, block-wise processing and merging."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from distsketch.errors import ConfigError, InputError
from distsketch.ops.fd import fd_merge, fd_shrink, fd_sketch, fd_sketch_components


def _fd_violation(A: np.ndarray, B: np.ndarray, ell: int) -> float:
    """max over k < ℓ of ‖AᵀA − BᵀB‖₂ − ‖A − A_k‖_F²/(ℓ − k), scaled by ‖A‖_F²."""
    A = np.asarray(A, dtype=np.float64)
    err = np.linalg.norm(A.T @ A - B.T @ B, 2)
    s2 = np.linalg.svd(A, compute_uv=False) ** 2
    tails = np.array([s2[k:].sum() / (ell - k) for k in range(ell)])
    return float((err - tails.min()) / max(s2.sum(), 1e-300))


def _decaying(rng, n, m, decay=0.8):
    return rng.normal(size=(n, m)) * decay ** np.arange(m)[None, :]


def test_shrink_matches_svd_reference():
    rng = np.random.default_rng(0)
    M = _decaying(rng, 24, 40)
    ell = 10
    B, delta = fd_shrink(M, ell)
    _, s, Vt = np.linalg.svd(M, full_matrices=False)
    assert delta == pytest.approx(s[ell - 1] ** 2, rel=1e-10)
    keep = np.maximum(s[:ell] ** 2 - delta, 0.0)
    ref = Vt[:ell].T @ (keep[:, None] * Vt[:ell])
    np.testing.assert_allclose(B.T @ B, ref, atol=1e-10 * s[0] ** 2)
    assert B.shape == (ell, 40)
    # the ℓ-th row is shrunk to zero
    assert np.linalg.norm(B[-1]) <= 1e-6 * s[0]


def test_shrink_of_few_rows_is_exact_padding():
    M = np.arange(12.0).reshape(3, 4)
    B, delta = fd_shrink(M, 5)
    assert delta == 0.0
    np.testing.assert_array_equal(B[:3], M)
    np.testing.assert_array_equal(B[3:], 0.0)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 300), m=st.integers(1, 30), ell=st.integers(1, 12),
       seed=st.integers(0, 2**16), rank=st.integers(1, 30))
def test_guarantee_holds_for_any_stream(n, m, ell, seed, rank):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n, min(rank, m))) @ rng.normal(size=(min(rank, m), m))
    A *= 10.0 ** rng.uniform(-3, 3)
    B, delta = fd_sketch(A, ell)
    assert B.shape == (ell, m)
    assert _fd_violation(A, B, ell) <= 1e-9
    C = A.T @ A - B.T @ B
    scale = max(np.sum(A * A), 1e-300)
    # BᵀB never overestimates: AᵀA − BᵀB is PSD, and its norm is at most Δ
    assert np.linalg.eigvalsh(C).min() >= -1e-9 * scale
    assert np.linalg.norm(C, 2) <= delta + 1e-9 * scale


def test_exactly_low_rank_stream_is_kept_exactly():
    rng = np.random.default_rng(1)
    A = rng.normal(size=(500, 3)) @ rng.normal(size=(3, 20))
    B, delta = fd_sketch(A, 6)
    scale = np.sum(A * A)
    assert delta <= 1e-10 * scale
    np.testing.assert_allclose(B.T @ B, A.T @ A, atol=1e-9 * scale)


def test_chaining_at_multiples_of_ell_is_bitwise_identical():
    rng = np.random.default_rng(2)
    A = _decaying(rng, 157, 16)
    ell = 8
    whole, d_whole = fd_sketch(A, ell)
    B, d = fd_sketch(A[:40], ell)
    B, d = fd_sketch(A[40:96], ell, sketch=B, shrinkage=d)
    B, d = fd_sketch(A[96:], ell, sketch=B, shrinkage=d)
    np.testing.assert_array_equal(B, whole)
    assert d == d_whole


def test_float32_and_sparse_rows_give_float64_sketch():
    rng = np.random.default_rng(3)
    A = _decaying(rng, 90, 12)
    A[np.abs(A) < 0.5] = 0.0
    dense, _ = fd_sketch(A, 5)
    sparse, _ = fd_sketch(sp.csr_matrix(A), 5)
    np.testing.assert_array_equal(dense, sparse)
    B32, _ = fd_sketch(A.astype(np.float32), 5)
    assert B32.dtype == np.float64
    assert _fd_violation(A.astype(np.float32), B32, 5) <= 1e-9


@settings(max_examples=15, deadline=None)
@given(parts=st.lists(st.integers(1, 120), min_size=1, max_size=6), ell=st.integers(2, 10),
       seed=st.integers(0, 2**16))
def test_merge_keeps_guarantee(parts, ell, seed):
    rng = np.random.default_rng(seed)
    blocks = [_decaying(rng, p, 14, 0.85) for p in parts]
    sketches = [fd_sketch(b, ell) for b in blocks]
    B, delta = fd_merge([s for s, _ in sketches], ell, [d for _, d in sketches])
    A = np.vstack(blocks)
    assert _fd_violation(A, B, ell) <= 1e-9
    assert np.linalg.norm(A.T @ A - B.T @ B, 2) <= delta + 1e-9 * np.sum(A * A)
    assert delta >= sum(d for _, d in sketches)


def test_merge_of_one_sketch_is_the_sketch():
    rng = np.random.default_rng(4)
    B, d = fd_sketch(_decaying(rng, 50, 9), 4)
    M, dm = fd_merge([B], 4, [d])
    np.testing.assert_array_equal(M, B)
    assert dm == d


def test_components_are_orthonormal_and_signed():
    rng = np.random.default_rng(5)
    B, _ = fd_sketch(_decaying(rng, 200, 10), 6)
    Vt, s = fd_sketch_components(B)
    np.testing.assert_allclose(Vt @ Vt.T, np.eye(6), atol=1e-12)
    np.testing.assert_allclose(s, np.linalg.svd(B, compute_uv=False), rtol=1e-12)
    idx = np.argmax(np.abs(Vt), axis=1)
    assert np.all(Vt[np.arange(6), idx] > 0)


@pytest.mark.parametrize("ell", [0, -3, 2.5, True])
def test_bad_sketch_size_raises_config_error(ell):
    with pytest.raises(ConfigError, match="sketch size"):
        fd_sketch(np.ones((4, 3)), ell)


def test_bad_shapes_raise_input_error():
    with pytest.raises(InputError, match="2-D"):
        fd_sketch(np.ones(5), 2)
    with pytest.raises(InputError, match="starting sketch"):
        fd_sketch(np.ones((4, 3)), 2, sketch=np.zeros((2, 4)))
    with pytest.raises(InputError, match="widths"):
        fd_merge([np.zeros((2, 3)), np.zeros((2, 4))], 2)
    with pytest.raises(InputError, match="at least one"):
        fd_merge([], 2)
