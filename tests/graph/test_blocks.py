"""map_rows and tree_reduce: exact equality with the single-block computation."""

import dask
import dask.array as da
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distsketch.errors import InputError, MemoryBudgetError
from distsketch.graph import map_rows, row_offsets, tree_reduce
from distsketch.summaries import Covariance, Summary


def _chunks(n, sizes):
    out, left, i = [], n, 0
    while left > 0:
        c = min(left, sizes[i % len(sizes)])
        out.append(c)
        left -= c
        i += 1
    return tuple(out)


def _row_ids(block, offset):
    # each output row records its global row number: catches wrong offsets
    return np.arange(offset, offset + block.shape[0], dtype=np.float64)[:, None] + 0 * block[:, :1]


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 300), sizes=st.lists(st.integers(1, 120), min_size=1, max_size=5))
def test_map_rows_offsets_are_global(n, sizes):
    X = np.random.default_rng(n).normal(size=(n, 3))
    Xd = da.from_array(X, chunks=(_chunks(n, sizes), 3))
    out = map_rows(_row_ids, Xd, n_out=1, dtype=np.float64).compute(scheduler="sync")
    np.testing.assert_array_equal(out[:, 0], np.arange(n))


def _scaled(block, offset, W):
    return block @ W


def test_map_rows_operand_enters_graph_once():
    X = da.ones((100, 4), chunks=(10, 4))
    W = np.arange(8.0).reshape(4, 2)
    out = map_rows(_scaled, X, W, n_out=2, dtype=np.float64)
    graph = dict(out.__dask_graph__())
    holding = [k for k, v in graph.items() if isinstance(v, np.ndarray) and v.shape == W.shape]
    assert len(holding) <= 1
    # the array value must not be duplicated inside the 10 block tasks
    np.testing.assert_allclose(out.compute(), np.ones((100, 4)) @ W)


class _Sum(Summary):
    def chunk(self, block, row_offset):
        return {"s": block.sum(axis=0), "rows": [row_offset]}

    def merge(self, states):
        return {"s": sum(s["s"] for s in states), "rows": sorted(r for s in states for r in s["rows"])}


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 400), sizes=st.lists(st.integers(1, 150), min_size=1, max_size=4),
       split=st.integers(2, 5))
def test_tree_reduce_equals_single_block(n, sizes, split):
    X = np.random.default_rng(1).integers(-5, 5, size=(n, 3)).astype(np.float64)
    chunks = _chunks(n, sizes)
    Xd = da.from_array(X, chunks=(chunks, 3))
    state = tree_reduce(_Sum(), Xd, split_every=split).compute(scheduler="sync")
    np.testing.assert_array_equal(state["s"], X.sum(axis=0))  # integers: exact
    assert state["rows"] == row_offsets(chunks).tolist()


def test_tree_reduce_fan_in_bounded_by_split_every():
    # 50 blocks: split_every=4 keeps the tree within 3 levels (4**3 >= 50)
    Xd = da.ones((1000, 2), chunks=(20, 2))
    red = tree_reduce(Covariance(), Xd, split_every=4)
    graph = red.__dask_graph__()
    deps = graph.get_all_dependencies()
    merge_keys = [k for k in deps if "merge" in str(k)]
    assert merge_keys
    assert max(len(deps[k]) for k in merge_keys) <= 4


def test_covariance_summary_matches_numpy_all_schedulers():
    X = np.random.default_rng(2).normal(size=(997, 6))
    Xd = da.from_array(X, chunks=(101, 6))
    results = []
    for sched in ("sync", "threads"):
        with dask.config.set(scheduler=sched):
            results.append(tree_reduce(Covariance(), Xd, split_every=3).compute())
    np.testing.assert_allclose(results[0]["ztz"], X.T @ X, rtol=1e-12)
    # same chunking, same tree: bitwise equal across schedulers
    np.testing.assert_array_equal(results[0]["ztz"], results[1]["ztz"])


def test_nan_reported_with_global_row():
    X = np.zeros((50, 3))
    X[37, 1] = np.inf
    Xd = da.from_array(X, chunks=(10, 3))
    with pytest.raises(InputError, match="first bad row is 37"):
        map_rows(_row_ids, Xd, n_out=1, dtype=np.float64).compute(scheduler="sync")
    with pytest.raises(InputError, match="first bad row is 37"):
        tree_reduce(Covariance(), Xd).compute(scheduler="sync")


def test_memory_budget_refuses_before_computing():
    Xd = da.zeros((10_000, 10), chunks=(5_000, 10))
    with dask.config.set({"distsketch.task-memory": "1MiB"}), \
            pytest.raises(MemoryBudgetError, match=r"5000 rows.*budget is 1\.00 MiB.*1048 rows"):
        map_rows(_row_ids, Xd, n_out=1, dtype=np.float64, bytes_per_row=1000)
    # the message's suggested chunking fits
    with dask.config.set({"distsketch.task-memory": "1MiB"}):
        fit = 2**20 // 1000
        out = map_rows(_row_ids, Xd.rechunk({0: fit}), n_out=1, dtype=np.float64, bytes_per_row=1000)
        assert out.shape == (10_000, 1)


def test_column_chunks_are_merged_into_whole_rows():
    X = np.arange(60.0).reshape(10, 6)
    Xd = da.from_array(X, chunks=(4, 2))
    out = map_rows(lambda b, o: b.sum(axis=1, keepdims=True), Xd, n_out=1, dtype=np.float64)
    np.testing.assert_array_equal(out.compute()[:, 0], X.sum(axis=1))
