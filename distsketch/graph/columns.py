"""Row maps of column-chunked (wide) inputs: a linear stage summed over column blocks.

Many sketches are ``combine(Σ_j linear(X[:, block_j]))``: :func:`map_row_columns`
applies the caller's linear part to each column block and combines the sums, so
a d = 10⁶ input is never rechunked into whole rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dask.array as da
import numpy as np

from distsketch.footprint import Footprint
from distsketch.graph.blocks import map_rows, row_offsets

__all__ = ["map_row_columns"]


class _ColumnBlockLinear:
    """Picklable wrapper passing the block's global column offset to ``linear``."""

    def __init__(self, linear: Callable, col_offset: int):
        self.linear = linear
        self.col_offset = int(col_offset)

    def __call__(self, block: Any, row_offset: int, *operands: Any) -> np.ndarray:
        return self.linear(block, row_offset, self.col_offset, *operands)

    def __dask_tokenize__(self) -> Any:
        from dask.base import tokenize

        return ("column-block-linear", tokenize(self.linear), self.col_offset)


def _tree_sum(parts: list[da.Array]) -> da.Array:
    # pairwise sums: depth log2(#column blocks), fixed order (deterministic rounding)
    while len(parts) > 1:
        nxt = [parts[i] + parts[i + 1] for i in range(0, len(parts) - 1, 2)]
        if len(parts) % 2:
            nxt.append(parts[-1])
        parts = nxt
    return parts[0]


def map_row_columns(
    linear: Callable[..., np.ndarray],
    combine: Callable[..., np.ndarray],
    X: da.Array,
    *operands: Any,
    n_linear: int,
    n_out: int,
    dtype: Any,
    linear_footprint: Footprint | None = None,
    combine_footprint: Footprint | None = None,
    name: str = "map-row-columns",
) -> da.Array:
    """``combine(Σ_j linear(X[:, block_j]))`` for every row block of X.

    Parameters
    ----------
    linear : callable
        ``linear(block, row_offset, col_offset, *operands) -> (rows, n_linear)``,
        linear in ``block``; ``col_offset`` is the global index of the block's
        first column.
    combine : callable
        ``combine(summed, row_offset, *operands) -> (rows, n_out)``.
    X : dask.array.Array of shape (n, d)
        Input, any row and column chunking.
    *operands : array_like
        Arrays both stages need (one key each in the graph).
    n_linear, n_out : int
        Widths of the linear stage and of the output.
    dtype : dtype
        Dtype of both stages.
    linear_footprint, combine_footprint : Footprint, optional
        Per-task memory of the two stages as their ops declare it (checked
        against the budget); ``None``: unknown.
    name : str
        Task-name prefix.

    Returns
    -------
    dask.array.Array of shape (n, n_out)
        Row chunks of X.

    Notes
    -----
    One task per (row block, column block) holding a block of X and its
    rows × n_linear partial sums; then log2(#column blocks) levels of
    elementwise sums of rows × n_linear arrays, and one combine task per row
    block.  With a single column block this is ``combine(linear(X))``.
    """
    bytes_per_row, fixed_bytes = _task_bytes(linear_footprint)
    parts = []
    for off, width in zip(row_offsets(X.chunks[1]).tolist(), X.chunks[1], strict=True):
        Xj = X[:, off:off + width]
        parts.append(map_rows(_ColumnBlockLinear(linear, off), Xj, *operands, n_out=n_linear,
                              dtype=dtype, bytes_per_row=bytes_per_row, fixed_bytes=fixed_bytes,
                              name=f"{name}-linear"))
    summed = _tree_sum(parts)
    bytes_per_row, fixed_bytes = _task_bytes(combine_footprint)
    return map_rows(combine, summed, *operands, n_out=n_out, dtype=dtype,
                    bytes_per_row=bytes_per_row, fixed_bytes=fixed_bytes,
                    name=f"{name}-combine", check_finite=False)


def _task_bytes(footprint: Footprint | None) -> tuple[float | None, float]:
    # the declaration in map_rows' terms (unknown per-row memory stays None)
    return (None, 0.0) if footprint is None else (footprint.per_row, footprint.fixed)
