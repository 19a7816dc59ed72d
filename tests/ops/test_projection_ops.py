"""Database-friendly projection ops: entries, column-range invariance, norms, JL dimension."""

import numpy as np
import pytest
import scipy.sparse as sp

from distsketch.errors import ConfigError
from distsketch.ops.projection import jl_min_dim, project, projection_matrix


@pytest.mark.parametrize("density", ["dense", "sparse"])
def test_column_ranges_give_the_same_operator(density):
    R = projection_matrix(4, 700, 30, density)
    parts = [projection_matrix(4, 700, 30, density, a, b) for a, b in [(0, 1), (1, 300), (300, 700)]]
    assert np.array_equal(np.vstack(parts), R)


def test_entry_distributions():
    k = 50
    R = projection_matrix(0, 2000, k, "dense")
    assert set(np.unique(R * np.sqrt(k))) == {-1.0, 1.0}
    assert abs((R > 0).mean() - 0.5) < 5 * np.sqrt(0.25 / R.size)
    S = projection_matrix(0, 2000, k, "sparse") * np.sqrt(k / 3.0)
    np.testing.assert_allclose(np.unique(S), [-1.0, 0.0, 1.0])
    for value, prob in [(1.0, 1 / 6), (0.0, 2 / 3), (-1.0, 1 / 6)]:
        frac = np.isclose(S, value).mean()
        assert abs(frac - prob) < 5 * np.sqrt(prob * (1 - prob) / S.size)


@pytest.mark.parametrize("density", ["dense", "sparse"])
def test_squared_norms_preserved_in_expectation(density):
    x = np.random.default_rng(1).normal(size=(1, 64))
    k = 16
    vals = np.array([np.sum(project(x, projection_matrix(s, 64, k, density)) ** 2) for s in range(3000)])
    # ||R^T x||^2 / ||x||^2 averages to 1 with variance about 2 / k (plus a kurtosis term)
    sq = np.sum(x**2)
    assert abs(vals.mean() / sq - 1.0) < 5 * np.sqrt(3.0 / k / 3000)


def test_project_blocks_and_sparse_input():
    X = np.random.default_rng(2).normal(size=(300, 40))
    R = projection_matrix(3, 40, 12, "sparse")
    full = project(X, R, 0)
    parts = np.vstack([project(X[a:b], R, a) for a, b in [(0, 7), (7, 260), (260, 300)]])
    assert np.array_equal(parts, full)
    np.testing.assert_allclose(project(sp.csr_matrix(X), R), full, rtol=1e-12, atol=1e-12)
    assert project(X.astype(np.float32), R).dtype == np.float32


def test_jl_min_dim():
    n, eps = 1000, 0.2
    k = jl_min_dim(n, eps)
    assert k >= 6 * np.log(n) / (eps**2 / 2 - eps**3 / 3) > k - 1
    assert jl_min_dim(n, 0.1) > k
    with pytest.raises(ConfigError, match="eps"):
        jl_min_dim(n, 1.5)
    with pytest.raises(ConfigError, match="density"):
        projection_matrix(0, 3, 2, "banded")
