"""``map_row_columns``: each stage is held to the footprint its op declares."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

from distsketch.errors import MemoryBudgetError
from distsketch.footprint import Footprint
from distsketch.graph.arrays import UNKNOWN_STAGE_ROWS, store_block_rows, unknown_stage_footprint
from distsketch.graph.columns import map_row_columns
from distsketch.graph.planner import choose_block_rows

_rng = np.random.default_rng(3)
X = _rng.normal(size=(200, 9))
G = _rng.normal(size=(9, 4))


def _linear(block: np.ndarray, row_offset: int, col_offset: int) -> np.ndarray:
    return block @ G[col_offset:col_offset + block.shape[1]]


def _combine(summed: np.ndarray, row_offset: int) -> np.ndarray:
    return np.cos(summed)


def _run(**footprints: Footprint) -> np.ndarray:
    Xd = da.from_array(X, chunks=(50, 4))
    return map_row_columns(_linear, _combine, Xd, n_linear=4, n_out=4, dtype=np.float64,
                           **footprints).compute()


def test_stages_run_under_their_footprints() -> None:
    got = _run(linear_footprint=Footprint(per_row=8.0 * 12), combine_footprint=Footprint(per_row=64.0))
    np.testing.assert_allclose(got, np.cos(X @ G), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("stage", ["linear", "combine"])
def test_each_stage_is_checked_against_the_budget(stage: str) -> None:
    # 50-row blocks: a 2 MiB fixed part alone exceeds a 1 MiB task budget
    too_big = Footprint(per_row=8.0, fixed=2.0 * 2**20)
    with dask.config.set({"distsketch.task-memory": "1MiB"}):
        with pytest.raises(MemoryBudgetError, match=f"-{stage}"):
            _run(**{f"{stage}_footprint": too_big})
        _run()  # undeclared stages are not refused


def test_unknown_stage_footprint_sets_store_blocks() -> None:
    row_bytes = 9 * 8
    fp = unknown_stage_footprint(row_bytes)
    assert fp == Footprint(per_row=UNKNOWN_STAGE_ROWS * row_bytes)
    n, unit = 10**7, 1000
    want = choose_block_rows(n, row_bytes, fp.per_row, fp.fixed, align=unit).block_rows
    assert store_block_rows(n, 9, 8, unit, any_stage=True) == min(
        want, store_block_rows(n, 9, 8, unit))
