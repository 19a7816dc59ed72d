"""TensorSketch equals CountSketch of the explicit tensor power; row independence; unbiasedness."""

import itertools

import numpy as np
import pytest

from distsketch.ops.countsketch import countsketch_hashes
from distsketch.ops.tensor_sketch import tensor_sketch, tensor_sketch_combine, tensor_sketch_linear


def _explicit_tensor_countsketch(X, seed, purpose, q, m):
    """CountSketch of φ(x) = x^{⊗q} with H = Σ h_l mod m and S = Π s_l (Avron et al. 2014)."""
    d = X.shape[1]
    hs = [countsketch_hashes(seed, f"{purpose}.cs{l}", 0, d, m) for l in range(q)]
    out = np.zeros((X.shape[0], m))
    for idx in itertools.product(range(d), repeat=q):
        H = sum(hs[l][0][i] for l, i in enumerate(idx)) % m
        S = np.prod([hs[l][1][i] for l, i in enumerate(idx)])
        out[:, H] += S * np.prod([X[:, i] for i in idx], axis=0)
    return out


@pytest.mark.parametrize(("d", "q", "m"), [(3, 1, 5), (4, 2, 8), (3, 3, 7), (5, 2, 16), (2, 4, 6)])
def test_equals_countsketch_of_explicit_tensor(d, q, m):
    X = np.random.default_rng(d * q).normal(size=(9, d))
    np.testing.assert_allclose(tensor_sketch(X, 11, "ts", q, m),
                               _explicit_tensor_countsketch(X, 11, "ts", q, m), atol=1e-10)


def test_rows_independent_of_blocking():
    X = np.random.default_rng(0).normal(size=(300, 10))
    C = tensor_sketch_linear(X, 1, "ts", 3, 64)
    full = tensor_sketch_combine(C, 3, 64)
    for block in (1, 7, 100):
        np.testing.assert_array_equal(tensor_sketch_combine(C, 3, 64, block_rows=block), full)
    np.testing.assert_array_equal(np.vstack([tensor_sketch(X[:123], 1, "ts", 3, 64),
                                             tensor_sketch(X[123:], 1, "ts", 3, 64)]),
                                  tensor_sketch(X, 1, "ts", 3, 64))


def test_unbiased_polynomial_kernel():
    # E<z(x), z(y)> = <x, y>^q; the per-draw sd is below sqrt((2 + 3^q)/m) |x|^q |y|^q (Lemma 2)
    rng = np.random.default_rng(1)
    X = rng.normal(size=(2, 6)) / np.sqrt(6)
    q, m, reps = 3, 16, 600
    est = []
    for s in range(reps):
        Z = tensor_sketch(X, s, "ts", q, m)
        est.append(Z[0] @ Z[1])
    sd = np.sqrt((2 + 3**q) / m) * (np.linalg.norm(X[0]) * np.linalg.norm(X[1])) ** q
    assert abs(np.mean(est) - (X[0] @ X[1]) ** q) < 4 * sd / np.sqrt(reps)


def test_float32_in_float32_out():
    X = np.random.default_rng(2).normal(size=(20, 5)).astype(np.float32)
    Z = tensor_sketch(X, 0, "ts", 2, 32)
    assert Z.dtype == np.float32
    np.testing.assert_allclose(Z, tensor_sketch(X.astype(np.float64), 0, "ts", 2, 32), atol=1e-5)
