"""In-memory arrays of another namespace run the NumPy plan in this process.

Dask cannot hold ``array_api_strict`` blocks, so :func:`distsketch.graph.plan_rows`
runs them block by block here: the same block rows, the same global offsets, the
same merge tree (so the same merged state) as dask's synchronous scheduler gives
NumPy input, map outputs concatenated on the input's device, merged states on the host.
"""

from __future__ import annotations

import numpy as np
import pytest

from distsketch.errors import InputError
from distsketch.footprint import Footprint
from distsketch.graph import map_blocks, plan_rows, reduce_blocks
from distsketch.graph.inprocess import InProcessBlocks
from distsketch.ops.namespace import asarray, namespace
from distsketch.summaries.base import Summary
from distsketch.testing import from_strict_device, to_strict_device

pytest.importorskip("array_api_strict")

X = np.random.default_rng(0).normal(size=(1000, 3))


class _Tree(Summary):
    """State: (first row, rows, column sums, merge tree as nested tuples of first rows)."""

    def chunk(self, block, row_offset, *operands):
        xp = namespace(block)
        sums = xp.sum(block * asarray(operands[0], like=block), axis=0)
        return {"rows": int(block.shape[0]), "sum": sums, "tree": row_offset}

    def merge(self, states):
        xp = namespace(*[s["sum"] for s in states])
        total = states[0]["sum"]
        for s in states[1:]:
            total = total + s["sum"]
        assert xp is namespace(total)
        return {"rows": sum(s["rows"] for s in states), "sum": total,
                "tree": tuple(s["tree"] for s in states)}


def _offsets(block, offset):
    # each row: its global index, then twice its first value
    xp = namespace(block)
    rows = xp.arange(offset, offset + block.shape[0], dtype=xp.float64, device=block.device)
    return xp.stack([rows, 2.0 * block[:, 0]], axis=1)


@pytest.mark.parametrize("block_rows,split_every", [(100, 2), (64, 3), (1000, 8), (7, 4)])
def test_reduce_merges_by_the_tree_dask_uses(block_rows, split_every):
    w = np.array([1.0, 2.0, 3.0])
    ref = reduce_blocks(_Tree(), X, w, block_rows=block_rows, split_every=split_every,
                        row_start=5)
    got = reduce_blocks(_Tree(), to_strict_device(X), w, block_rows=block_rows,
                        split_every=split_every, row_start=5)
    assert got["tree"] == ref["tree"] and got["rows"] == ref["rows"] == X.shape[0]
    assert isinstance(got["sum"], np.ndarray)  # the merged state comes back on the host
    np.testing.assert_allclose(got["sum"], ref["sum"], rtol=1e-12)


def test_map_numbers_rows_globally_and_stays_on_the_device():
    Xs = to_strict_device(X)
    blocks = plan_rows(Xs, block_rows=128, row_start=10)
    assert isinstance(blocks, InProcessBlocks) and blocks.plan.block_rows == 128
    out = map_blocks(Xs, _offsets, n_out=2, dtype=np.float64, block_rows=128, row_start=10)
    np.testing.assert_array_equal(from_strict_device(out),
                                  map_blocks(X, _offsets, n_out=2, dtype=np.float64,
                                             block_rows=128, row_start=10))
    np.testing.assert_array_equal(from_strict_device(out)[:, 0], np.arange(10, 1010))


def test_the_planner_gives_the_numpy_plan():
    assert plan_rows(to_strict_device(X), footprint=Footprint(per_row=4096.0)).plan.block_rows == \
        plan_rows(X, footprint=Footprint(per_row=4096.0)).plan.block_rows


def test_a_nan_in_a_block_names_its_global_row():
    bad = X.copy()
    bad[517, 1] = np.inf
    with pytest.raises(InputError, match="first bad row is 517"):
        map_blocks(to_strict_device(bad), _offsets, n_out=2, dtype=np.float64, block_rows=100)

