"""TensorSRHT and Algorithm 1 against their definitions on explicit tensors; statistics."""

from functools import reduce

import numpy as np
import pytest

from distsketch.errors import ConfigError
from distsketch.ops.hadamard import hadamard_entries, next_pow2, srht_coordinates, srht_signs
from distsketch.ops.poly_sketch import (
    degree2_sketch,
    leaf_sketch,
    poly_sketch,
    poly_sketch_combine,
    tensor_srht_combine,
    tensor_srht_linear,
)


def _pair_matrix(seed, purpose, k, m, base):
    """Explicit m × k² matrix of the degree-2 sketch (columns in np.kron order a*k + b)."""
    E = np.eye(k)
    U = np.repeat(E, k, axis=0)
    V = np.tile(E, (k, 1))
    return degree2_sketch(U, V, seed, purpose, m, base).T


def _leaf_matrix(seed, purpose, d, m, base):
    return leaf_sketch(np.eye(d), seed, purpose, m, next_pow2(d), base).T


def _kron_power(M, p):
    return reduce(np.kron, [M] * p)


def _definition(x, p, seed, purpose, m, base):
    """Π^p x^{⊗p} with explicit matrices: T on every leaf, S_l per level, C_l for the binary pieces."""
    d = x.size
    T = _leaf_matrix(seed, purpose, d, m, base)
    ops = {0: T}                    # operator sketching x^{⊗2^l} from R^{d^{2^l}}
    for level in range(1, p.bit_length()):
        S = _pair_matrix(seed, f"{purpose}.S{level}", m, m, base)
        ops[level] = S @ np.kron(ops[level - 1], ops[level - 1])
    acc, acc_deg = None, 0
    for level in range(p.bit_length()):
        if (p >> level) & 1:
            if acc is None:
                acc = ops[level]
            else:
                C = _pair_matrix(seed, f"{purpose}.C{level}", m, m, base)
                acc = C @ np.kron(acc, ops[level])
            acc_deg += 1 << level
    assert acc_deg == p
    return acc @ _kron_power(x, p)


@pytest.mark.parametrize("base", ["srht", "tensorsketch"])
@pytest.mark.parametrize("p", [1, 2, 3, 4, 5])
def test_algorithm1_equals_definition_on_explicit_tensors(p, base):
    # Lemma 4.3: the output of Algorithm 1 is the sketching matrix applied to x^{⊗p}
    d, m = 3, 4
    x = np.random.default_rng(p).normal(size=d)
    got = poly_sketch(x[None], 9, "poly", p, m, base)[0]
    np.testing.assert_allclose(got, _definition(x, p, 9, "poly", m, base), atol=1e-10)


def test_tensor_srht_matches_definition_2_9():
    # TensorSRHT(u ⊗ v) = (1/sqrt m) (P1 H D1 u) ∘ (P2 H D2 v), explicit rows kron(row1, row2)
    k, m = 5, 6
    D = next_pow2(k)
    M = _pair_matrix(3, "p", k, m, "srht")
    rows = []
    for t in (0, 1):
        P = srht_coordinates(3, f"p.t{t}", D, m, replace=True)
        rows.append(hadamard_entries(P, np.arange(k)) * srht_signs(3, f"p.t{t}", 0, k)[None, :])
    expect = np.stack([np.kron(rows[0][i], rows[1][i]) for i in range(m)]) / np.sqrt(m)
    np.testing.assert_allclose(M, expect, atol=1e-12)


def test_tensor_srht_unbiased():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(2, 7)) / np.sqrt(7)
    q, m, reps = 3, 8, 800
    D = next_pow2(7)
    vals = []
    for s in range(reps):
        Z = tensor_srht_combine(tensor_srht_linear(X, s, "t", q, m, D), q, m)
        vals.append(Z[0] @ Z[1])
    vals = np.array(vals)
    target = (X[0] @ X[1]) ** q
    assert abs(vals.mean() - target) < 4 * vals.std() / np.sqrt(reps)


def _embedding_distortion(sketch, A, phi, k):
    # Singular values of Bᵀ S for B an orthonormal basis of rowspace(φ(A)), via Σ⁻¹ Uᵀ φ(A) S
    Ul, sig, _ = np.linalg.svd(phi, full_matrices=False)
    Z = sketch(A)
    sv = np.linalg.svd((Ul[:, :k].T @ Z) / sig[:k, None], compute_uv=False)
    return float(np.max(np.abs(sv - 1)))


@pytest.mark.parametrize("base", ["srht", "tensorsketch"])
def test_subspace_embedding_distortion_shrinks_with_m(base):
    # Theorem 1 / 4.8: singular values within 1 ± ε with ε ∝ 1/sqrt(m)
    rng = np.random.default_rng(0)
    A = rng.normal(size=(200, 3))
    Ap = np.hstack([A, np.ones((200, 1))])
    phi = np.einsum("ni,nj->nij", Ap, Ap).reshape(200, -1)      # rank 10
    k = 10
    eps = {}
    for m in (128, 2048):
        eps[m] = np.median([_embedding_distortion(
            lambda X, s=s, m=m: poly_sketch(np.hstack([X, np.ones((X.shape[0], 1))]), s, "ose", 2, m, base),
            A, phi, k) for s in range(5)])
    assert eps[2048] < 0.35
    assert eps[128] / eps[2048] > 2.0     # ideal ratio sqrt(16) = 4


def test_combine_rejects_degree_zero():
    with pytest.raises(ConfigError, match="degree"):
        poly_sketch_combine(np.ones((1, 4)), 0, 0, "p", 4)
    with pytest.raises(ConfigError, match="base"):
        degree2_sketch(np.ones((1, 2)), np.ones((1, 2)), 0, "p", 4, "nope")
