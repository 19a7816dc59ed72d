"""The one entry from data to blocks: the block-size rule, kinds in and out,
global row numbers from ``row_start``, and laziness for dask input."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp

from distsketch.footprint import Footprint
from distsketch.graph import (
    BlockPlan,
    choose_block_rows,
    map_blocks,
    plan_rows,
    reduce_blocks,
    row_offsets,
)
from distsketch.graph.arrays import default_block_rows
from distsketch.summaries.base import Summary

MiB = 2**20


def _row_ids(block, offset):
    return np.arange(offset, offset + block.shape[0], dtype=np.float64)[:, None]


class _FirstRows(Summary):
    """State: the global first row of every block (merge concatenates)."""

    def chunk(self, block, row_offset, *operands):
        return {"rows": [int(row_offset)], "n": block.shape[0]}

    def merge(self, states):
        return {"rows": sorted(r for s in states for r in s["rows"]),
                "n": sum(s["n"] for s in states)}


def _refuse(*args, **kwargs):
    raise AssertionError("something was computed")


@pytest.mark.parametrize("n_rows, row_bytes, bytes_per_row, fixed, budget, want", [
    # input only: 64 MiB of input per block
    (10**6, 400, None, 0, None, 64 * MiB // 400),
    # fewer rows than one block
    (1000, 400, None, 0, None, 1000),
    # a stated working set: min(budget, 256 MiB) / bytes_per_row
    (10**6, 400, 4000.0, 0, None, 256 * MiB // 4000),
    # ... minus the fixed part
    (10**6, 400, 4000.0, 56 * MiB, None, 200 * MiB // 4000),
    # a small budget is the target
    (10**6, 400, 4000.0, 0, 1 * MiB, 262),
    # ... and a hard limit: below 256 rows, down to what fits
    (10**6, 400, 40_000.0, 0, 1 * MiB, MiB // 40_000),
    # input still caps a cheap stage
    (10**6, 400, 800.0, 0, None, 64 * MiB // 400),
    # a fixed part beyond the working set leaves the input rule (smaller blocks cannot help)
    (10**6, 400, 800.0, 300 * MiB, None, 64 * MiB // 400),
])
def test_block_rule_on_one_thread(n_rows, row_bytes, bytes_per_row, fixed, budget, want):
    plan = choose_block_rows(n_rows, row_bytes, bytes_per_row, fixed,
                             budget=2 * 2**30 if budget is None else budget, n_threads=1)
    assert plan.block_rows == want
    assert plan.n_blocks == -(-n_rows // want)
    per_row = bytes_per_row if bytes_per_row else row_bytes
    assert plan.task_bytes == int(want * per_row + fixed)
    assert plan.task_bytes <= plan.budget


def test_input_rule_is_the_default_block_rows_of_io():
    assert default_block_rows(10**6, 100, 4) == choose_block_rows(10**6, 400).block_rows
    with dask.config.set({"distsketch.block-bytes": "1MiB"}):
        assert choose_block_rows(10**6, 400).block_rows == MiB // 400


def test_align_rounds_to_store_chunks():
    plan = choose_block_rows(10**6, 400, align=5000)
    assert plan.block_rows % 5000 == 0 and plan.block_rows <= 64 * MiB // 400
    # memory wins over alignment: a store chunk that does not fit is read in parts
    small = choose_block_rows(10**6, 400, 40_000.0, budget=MiB, align=5000, n_threads=1)
    assert small.block_rows == MiB // 40_000


def test_plan_of_numpy_sparse_and_dask():
    X = np.zeros((1000, 4))
    blocks = plan_rows(X, block_rows=300)
    assert blocks.plan == BlockPlan(block_rows=300, n_blocks=4, task_bytes=300 * 32)
    assert blocks.data.chunks == ((300, 300, 300, 100), (4,))
    assert not blocks.lazy
    S = sp.random(1000, 50, density=0.1, format="csr", random_state=0)
    sb = plan_rows(S, block_rows=400)
    assert sb.data.chunks[0] == (400, 400, 200) and sp.issparse(sb.data.blocks[0].compute())
    # a dask input keeps its (store's) chunks; column blocks are joined into whole rows
    Xd = da.zeros((1000, 4), chunks=(250, 2))
    db = plan_rows(Xd, footprint=Footprint(per_row=100.0, fixed=10.0))
    assert db.lazy and db.data.chunks == ((250,) * 4, (4,))
    assert db.plan == BlockPlan(block_rows=250, n_blocks=4, task_bytes=250 * 100 + 10)
    assert plan_rows(Xd, block_rows=400).data.chunks[0] == (400, 400, 200)


def test_map_returns_the_kind_of_its_input_with_global_rows():
    X = np.ones((1000, 3))
    got = map_blocks(X, _row_ids, n_out=1, dtype=np.float64, block_rows=300, row_start=50)
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got[:, 0], np.arange(50, 1050))
    Xd = da.from_array(X, chunks=(300, 3))
    with dask.config.set(scheduler=_refuse):
        lazy = map_blocks(Xd, _row_ids, n_out=1, dtype=np.float64, row_start=7)
        # building the map (and its plan) computes nothing
        assert isinstance(lazy, da.Array) and lazy.chunks[0] == Xd.chunks[0]
    np.testing.assert_array_equal(lazy.compute(scheduler="sync")[:, 0], np.arange(7, 1007))


def test_reduce_sees_global_rows():
    X = np.ones((1000, 3))
    state = reduce_blocks(_FirstRows(), X, block_rows=300, row_start=2000)
    assert state == {"rows": row_offsets((300, 300, 300, 100), 2000).tolist(), "n": 1000}
    lazy = plan_rows(da.from_array(X, chunks=(400, 3)), row_start=5).reduce(_FirstRows(), lazy=True)
    assert lazy.compute(scheduler="sync")["rows"] == [5, 405, 805]


def test_row_start_costs_no_task_of_its_own():
    Xd = da.from_array(np.ones((1000, 3)), chunks=(100, 3))
    out = map_blocks(Xd, _row_ids, n_out=1, dtype=np.float64, row_start=3)
    # one read and one map task per block: the offsets are written into the map tasks
    assert len(dict(out.__dask_graph__())) == 2 * Xd.npartitions


def test_one_offset_helper():
    np.testing.assert_array_equal(row_offsets([3, 4, 5]), [0, 3, 7])
    np.testing.assert_array_equal(row_offsets([3, 4, 5], 10), [10, 13, 17])
    assert row_offsets([3, 4]).dtype == np.int64
