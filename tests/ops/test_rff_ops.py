"""ops.rff: the offset and paired forms of the per-block map against NumPy formulas."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from distsketch.errors import ConfigError
from distsketch.ops.rff import rff_map, rff_operator

X = np.random.default_rng(0).normal(size=(700, 6))


def test_offset_form_is_the_phase_shifted_cosine():
    W, b = rff_operator(1, "rbf", 0.2, 6, 40)
    assert W.shape == (6, 40) and b.shape == (40,)
    np.testing.assert_allclose(rff_map(X, W, b), np.sqrt(2 / 40) * np.cos(X @ W + b),
                               rtol=0, atol=1e-12)


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "cauchy"])
def test_paired_form_is_cos_and_sin_of_the_first_half(kernel):
    W_off, _ = rff_operator(2, kernel, 0.3, 6, 40)
    W, b = rff_operator(2, kernel, 0.3, 6, 40, form="paired")
    assert W.shape == (6, 20) and b.shape == (0,)
    np.testing.assert_array_equal(W, W_off[:, :20])
    P = X @ W
    ref = np.hstack([np.cos(P), np.sin(P)]) / np.sqrt(20)
    np.testing.assert_allclose(rff_map(X, W, b), ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(rff_map(sp.csr_matrix(X), W, b), ref, rtol=0, atol=1e-12)


def test_paired_out_buffer_dtype_and_row_stability():
    W, b = rff_operator(3, "rbf", 0.2, 6, 32, form="paired")
    X32 = X.astype(np.float32)
    out = np.full((700, 32), np.nan, dtype=np.float32)
    Z = rff_map(X32, W, b, 0, out=out)
    assert Z is out and Z.dtype == np.float32 and np.all(np.isfinite(Z))
    np.testing.assert_allclose(Z, rff_map(X, W, b), rtol=0, atol=1e-5)
    # a row's features do not depend on where the block starts (global row numbers)
    parts = [rff_map(X32[a:c], W, b, a) for a, c in [(0, 1), (1, 300), (300, 513), (513, 700)]]
    np.testing.assert_array_equal(np.vstack(parts), Z)
    assert rff_map(X32[:0], W, b).shape == (0, 32)


def test_form_errors():
    with pytest.raises(ConfigError, match="even"):
        rff_operator(0, "rbf", 1.0, 6, 41, form="paired")
    with pytest.raises(ConfigError, match="form"):
        rff_operator(0, "rbf", 1.0, 6, 40, form="sincos")
