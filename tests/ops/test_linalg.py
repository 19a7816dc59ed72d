import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_limits

from distsketch.ops.linalg import fix_signs, row_stable_matmul

X = np.random.default_rng(0).normal(size=(1500, 37)).astype(np.float32)
W = np.random.default_rng(1).normal(size=(37, 300)).astype(np.float32)


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(1, 700), min_size=1, max_size=4))
def test_rows_bitwise_independent_of_blocking(sizes):
    with threadpool_limits(1):
        whole = row_stable_matmul(X, W)
        parts, start, i = [], 0, 0
        while start < X.shape[0]:
            stop = min(X.shape[0], start + sizes[i % len(sizes)])
            parts.append(row_stable_matmul(X[start:stop], W, start))
            start, i = stop, i + 1
    np.testing.assert_array_equal(np.vstack(parts), whole)


def test_matches_plain_product():
    np.testing.assert_allclose(row_stable_matmul(X, W, 13), X @ W, rtol=1e-4, atol=1e-4)
    assert row_stable_matmul(X[:0], W).shape == (0, 300)


def test_fix_signs_makes_the_largest_entry_of_each_vector_positive():
    V = np.array([[0.1, -3.0, 0.0], [-2.0, 1.0, 0.0], [1.0, 0.5, 0.0]])
    cols = fix_signs(V, axis=0)
    np.testing.assert_array_equal(cols, V * np.array([-1.0, -1.0, 1.0]))
    rows = fix_signs(V, axis=1)
    np.testing.assert_array_equal(rows, V * np.array([[-1.0], [-1.0], [1.0]]))
    np.testing.assert_array_equal(fix_signs(V.T, axis=1), cols.T)


def test_fix_signs_is_a_function_of_the_subspace_not_the_sign():
    V = np.linalg.qr(np.random.default_rng(3).normal(size=(8, 4)))[0]
    flips = np.array([1.0, -1.0, -1.0, 1.0])
    np.testing.assert_array_equal(fix_signs(V * flips, axis=0), fix_signs(V, axis=0))
    assert fix_signs(V.astype(np.float32)).dtype == np.float32
    assert fix_signs(np.zeros((5, 0))).shape == (5, 0)


def test_fix_signs_refuses_other_axes():
    with pytest.raises(ValueError, match="axis"):
        fix_signs(np.ones((2, 2)), axis=2)
