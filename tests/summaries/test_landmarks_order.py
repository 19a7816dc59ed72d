"""The one bottom-k row sampler: ordering of its result and its users."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

from distsketch.graph import reduce_blocks
from distsketch.metrics import sample_rows
from distsketch.ops.random import hash_uniform
from distsketch.summaries.landmarks import UniformLandmarks


def _data() -> np.ndarray:
    return np.random.default_rng(0).normal(size=(500, 3))


def test_priority_order_lists_rows_by_increasing_priority():
    X = _data()
    s = UniformLandmarks(40, seed=9, purpose="p", order="priority")
    index, rows = s.finalize(reduce_blocks(s, da.from_array(X, chunks=(70, 3))))
    pri = hash_uniform(9, "p", np.arange(500))
    np.testing.assert_array_equal(index, np.argsort(pri, kind="stable")[:40])
    np.testing.assert_array_equal(rows, X[index])


def test_priority_and_index_orders_hold_the_same_sample():
    X = _data()
    a = UniformLandmarks(40, seed=9, purpose="p", order="priority")
    b = UniformLandmarks(40, seed=9, purpose="p")
    ia, ra = a.finalize(a.chunk(X, 0))
    ib, rb = b.finalize(b.chunk(X, 0))
    np.testing.assert_array_equal(np.sort(ia), ib)
    np.testing.assert_array_equal(ra[np.argsort(ia)], rb)


def test_global_row_offset_numbers_the_rows():
    X = _data()
    s = UniformLandmarks(10, seed=1, purpose="p", order="priority")
    index, _ = s.finalize(s.chunk(X, 1000))
    pri = hash_uniform(1, "p", np.arange(1000, 1500))
    np.testing.assert_array_equal(index, 1000 + np.argsort(pri, kind="stable")[:10])


def test_sample_rows_is_the_bottom_k_of_its_purpose():
    X = _data()
    index, rows = sample_rows(X, 25, 4)
    pri = hash_uniform(4, "metrics.sample", np.arange(500))
    np.testing.assert_array_equal(index, np.sort(np.argsort(pri, kind="stable")[:25]))
    np.testing.assert_array_equal(rows, X[index])


def test_unknown_order_is_refused():
    with pytest.raises(ValueError, match="order"):
        UniformLandmarks(3, seed=0, order="random")
