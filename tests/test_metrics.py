"""kernel_errors / relative_kernel_error against direct NumPy computations."""

import dask.array as da
import numpy as np
import pytest

from distsketch.errors import ConfigError
from distsketch.metrics import kernel_errors, relative_kernel_error, sample_rows
from distsketch.ops.kernels import pairwise_kernel


class _Shifted:
    """Approximation G̃ = G - delta * (a aᵀ) with a known error."""

    def __init__(self, delta, gamma):
        self.delta, self.gamma = delta, gamma

    def kernel_approx(self, A, B=None):
        B = A if B is None else B
        a = np.cos(A[:, 0])
        b = np.cos(B[:, 0])
        return pairwise_kernel(A, B, "rbf", gamma=self.gamma) - self.delta * np.outer(a, b)


def test_errors_exact_small():
    X = np.random.default_rng(0).normal(size=(300, 4))
    approx = _Shifted(0.01, 0.2)
    out = kernel_errors(X, approx, "rbf", gamma=0.2, n_sample=None)
    a = np.cos(X[:, 0])
    E = 0.01 * np.outer(a, a)  # rank one: ‖E‖₂ = ‖E‖_F = δ‖a‖²
    n = X.shape[0]
    assert out["n_sample"] == n
    assert out["spectral"] == pytest.approx(np.linalg.norm(E, 2) / n, rel=1e-9)
    assert out["frobenius"] == pytest.approx(np.linalg.norm(E) / n**2, rel=1e-9)
    G = pairwise_kernel(X, X, "rbf", gamma=0.2)
    assert out["relative_frobenius"] == pytest.approx(np.linalg.norm(E) / np.linalg.norm(G), rel=1e-9)
    assert relative_kernel_error(X, approx, "rbf", gamma=0.2, n_sample=None) == pytest.approx(
        out["relative_frobenius"], rel=1e-9)


def test_tiled_path_equals_dense_path():
    # 4500 rows exceeds the dense limit: tiles + Lanczos must agree with NumPy
    X = np.random.default_rng(1).normal(size=(4500, 3))
    approx = _Shifted(0.05, 0.5)
    out = kernel_errors(X, approx, "rbf", gamma=0.5, n_sample=None, tile=1000)
    a = np.cos(X[:, 0])
    nrm = 0.05 * a @ a
    assert out["spectral"] == pytest.approx(nrm / 4500, rel=1e-6)
    assert out["frobenius"] == pytest.approx(nrm / 4500**2, rel=1e-9)


def test_row_sample_is_chunking_independent_and_uniform():
    X = np.arange(20_000, dtype=np.float64).reshape(-1, 2)
    i1, r1 = sample_rows(X, 500, 3)
    i2, r2 = sample_rows(da.from_array(X, chunks=(777, 2)), 500, 3)
    np.testing.assert_array_equal(i1, i2)
    np.testing.assert_array_equal(r1, r2)
    assert len(np.unique(i1)) == 500
    # uniform: sample mean of indices near n/2 (sd of mean ≈ n/sqrt(12·500))
    assert abs(i1.mean() - 5000) < 4 * 10_000 / np.sqrt(12 * 500)


def test_bad_sample_size():
    with pytest.raises(ConfigError):
        kernel_errors(np.ones((5, 2)), _Shifted(0, 1), n_sample=1)
