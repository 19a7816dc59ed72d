"""FWHT against the explicit Hadamard matrix; SRHT orthogonality and consistency of its paths."""

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp

from distsketch.errors import ConfigError
from distsketch.ops.hadamard import (
    fwht,
    hadamard_entries,
    next_pow2,
    srht,
    srht_apply,
    srht_coordinates,
    srht_operator,
)
from distsketch.ops.random import hash_sign, hash_uniform


@pytest.mark.parametrize("D", [1, 2, 8, 64, 256])
def test_fwht_equals_hadamard_matrix(D):
    X = np.random.default_rng(D).normal(size=(5, D))
    H = scipy.linalg.hadamard(D)
    np.testing.assert_allclose(fwht(X.copy()), X @ H, atol=1e-10)
    np.testing.assert_allclose(fwht(X.copy(), normalize=True), X @ H / np.sqrt(D), atol=1e-12)


def test_hadamard_entries_and_orthogonality():
    H = hadamard_entries(np.arange(32), np.arange(32))
    np.testing.assert_array_equal(H, scipy.linalg.hadamard(32))
    np.testing.assert_array_equal(H @ H.T, 32 * np.eye(32))


def test_next_pow2():
    assert [next_pow2(v) for v in (1, 2, 3, 5, 64, 65)] == [1, 2, 4, 8, 64, 128]


def test_fwht_rejects_non_power_of_two():
    with pytest.raises(ConfigError, match="power-of-two"):
        fwht(np.zeros((2, 6)))


def test_srht_operator_has_orthogonal_rows():
    # S = sqrt(D/m) P H D_s (H orthonormal) with distinct sampled rows: S Sᵀ = (D/m) I
    D, m = 64, 24
    S = srht(np.eye(D), 7, "s", m, D).T          # m × D explicit operator
    np.testing.assert_allclose(S @ S.T, (D / m) * np.eye(m), atol=1e-12)
    P = srht_coordinates(7, "s", D, m)
    assert len(set(P.tolist())) == m


def test_srht_paths_agree_and_blocks_sum():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 50))
    D = next_pow2(50)
    full = srht(X, 1, "s", 16, D)                         # FWHT path
    blocks = srht(X[:, :20], 1, "s", 16, D) + srht(X[:, 20:], 1, "s", 16, D, col_offset=20)
    np.testing.assert_allclose(blocks, full, atol=1e-12)
    Xs = sp.csr_matrix(np.where(rng.random(X.shape) < 0.1, X, 0.0))
    np.testing.assert_allclose(srht(Xs, 1, "s", 16, D), srht(Xs.toarray(), 1, "s", 16, D), atol=1e-12)


def test_srht_norm_unbiased():
    # E||SRHT x||^2 = ||x||^2 over seeds (sampling without replacement)
    x = np.random.default_rng(3).normal(size=(1, 40))
    vals = np.array([np.sum(srht(x, s, "s", 8, 64) ** 2) for s in range(300)])
    assert abs(vals.mean() / np.sum(x * x) - 1) < 0.1


def test_srht_size_error():
    with pytest.raises(ConfigError, match="exceeds the padded dimension"):
        srht_coordinates(0, "s", 16, 17)


def test_srht_operator_is_the_hashed_signs_and_bottom_s_coordinates():
    signs, idx = srht_operator(7, 100, 40, "p")
    assert signs.shape == (128,) and signs.flags.writeable
    np.testing.assert_array_equal(signs, hash_sign(7, "p.sign", np.arange(128)))
    pri = hash_uniform(7, "p.index", np.arange(128))
    np.testing.assert_array_equal(idx, np.sort(np.argsort(pri, kind="stable")[:40]))
    s2, _ = srht_operator(7, 100, 128, "p")
    np.testing.assert_array_equal(s2, signs)
    with pytest.raises(ConfigError):
        srht_operator(7, 100, 200)


def test_srht_apply_is_the_orthonormal_hadamard_map():
    H = scipy.linalg.hadamard(128) / np.sqrt(128)
    signs, idx = srht_operator(7, 100, 40)
    Z = np.random.default_rng(5).normal(size=(6, 100))
    P = np.zeros((6, 128))
    P[:, :100] = Z * signs[:100]
    np.testing.assert_allclose(srht_apply(Z, signs, idx), (P @ H)[:, idx] * np.sqrt(128 / 40),
                               rtol=1e-12, atol=1e-12)
    full_signs, full_idx = srht_operator(7, 100, 128)
    full = srht_apply(Z, full_signs, full_idx)  # s = M: an orthogonal map, inner products exact
    np.testing.assert_allclose(full @ full.T, Z @ Z.T, rtol=1e-10, atol=1e-10)


def test_srht_apply_rows_do_not_depend_on_the_blocking():
    signs, idx = srht_operator(3, 1000, 300)
    Z = np.random.default_rng(6).normal(size=(700, 1000))
    whole = srht_apply(Z, signs, idx)
    parts = np.vstack([srht_apply(Z[a:a + 123], signs, idx, row_offset=a) for a in range(0, 700, 123)])
    np.testing.assert_array_equal(parts, whole)
