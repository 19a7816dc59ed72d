import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_limits

from distsketch.ops.linalg import row_stable_matmul

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
