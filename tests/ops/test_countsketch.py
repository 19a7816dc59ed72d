"""CountSketch: explicit operator, column-range consistency, sparse input, unbiasedness."""

import numpy as np
import pytest
import scipy.sparse as sp

from distsketch.errors import ConfigError
from distsketch.ops.countsketch import countsketch, countsketch_hashes, countsketch_matrix


def _explicit(seed, d, m):
    h, s = countsketch_hashes(seed, "cs", 0, d, m)
    C = np.zeros((d, m))
    C[np.arange(d), h] = s
    return C


def test_equals_explicit_matrix():
    X = np.random.default_rng(0).normal(size=(37, 23))
    np.testing.assert_allclose(countsketch(X, 5, "cs", 8), X @ _explicit(5, 23, 8), rtol=0, atol=1e-13)
    np.testing.assert_array_equal(countsketch_matrix(5, "cs", 0, 23, 8).toarray(), _explicit(5, 23, 8))


def test_hashes_depend_only_on_global_column():
    h, s = countsketch_hashes(3, "cs", 0, 100, 16)
    h2, s2 = countsketch_hashes(3, "cs", 40, 70, 16)
    np.testing.assert_array_equal(h[40:70], h2)
    np.testing.assert_array_equal(s[40:70], s2)
    assert set(np.unique(s)) == {-1.0, 1.0}
    assert h.min() >= 0 and h.max() < 16


def test_column_blocks_sum_to_whole():
    X = np.random.default_rng(1).normal(size=(20, 50))
    whole = countsketch(X, 1, "cs", 7)
    parts = countsketch(X[:, :13], 1, "cs", 7) + countsketch(X[:, 13:], 1, "cs", 7, col_offset=13)
    np.testing.assert_allclose(parts, whole, atol=1e-13)


def test_sparse_equals_dense_and_rows_independent():
    rng = np.random.default_rng(2)
    X = sp.random(60, 200, density=0.05, random_state=3, format="csr")
    dense = X.toarray()
    np.testing.assert_allclose(countsketch(X, 0, "cs", 32), countsketch(dense, 0, "cs", 32), atol=1e-14)
    full = countsketch(dense, 0, "cs", 32)
    cut = int(rng.integers(1, 59))
    np.testing.assert_array_equal(np.vstack([countsketch(dense[:cut], 0, "cs", 32),
                                             countsketch(dense[cut:], 0, "cs", 32)]), full)


def test_float32_preserved():
    X = np.ones((3, 4), dtype=np.float32)
    assert countsketch(X, 0, "cs", 4).dtype == np.float32


def test_unbiased_inner_product():
    # E<Cx, Cy> = <x, y>; Var <= 2|x|^2|y|^2/m per draw -> CLT bound over 400 seeds
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=(2, 30))
    m = 8
    est = np.array([(countsketch(x[None], s, "cs", m) @ countsketch(y[None], s, "cs", m).T)[0, 0]
                    for s in range(400)])
    sd = np.sqrt(2.0 / m) * np.linalg.norm(x) * np.linalg.norm(y) / np.sqrt(400)
    assert abs(est.mean() - x @ y) < 4 * sd


def test_bad_bucket_count():
    with pytest.raises(ConfigError, match="bucket"):
        countsketch_hashes(0, "cs", 0, 3, 0)
