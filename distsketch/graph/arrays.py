"""Turning inputs into row-chunked dask arrays (the block size is planned in
:mod:`distsketch.graph.plan`)."""

from __future__ import annotations

from typing import Any

import dask.array as da

from distsketch.graph.plan import INPUT_BLOCK_BYTES, plan_rows
from distsketch.graph.planner import choose_block_rows

__all__ = ["DEFAULT_BLOCK_BYTES", "as_dask", "default_block_rows", "rechunk_rows"]

DEFAULT_BLOCK_BYTES = INPUT_BLOCK_BYTES


def default_block_rows(n_rows: int, n_cols: int, itemsize: int,
                       block_bytes: int | None = None) -> int:
    """Rows per block so one block of input is about ``block_bytes``.

    The default is :func:`~distsketch.graph.planner.choose_block_rows` for a
    stage that states no working memory: at most ``distsketch.block-bytes``
    (64 MiB) of input, and enough blocks for the scheduler's threads.
    """
    row_bytes = max(1, n_cols * itemsize)
    if block_bytes is not None:
        return int(min(max(n_rows, 1), max(1, int(block_bytes) // row_bytes)))
    return choose_block_rows(n_rows, row_bytes).block_rows


def as_dask(X: Any, block_rows: int | None = None) -> da.Array:
    """A dask array of ``X`` with whole rows in each block.

    NumPy (and SciPy sparse, kept sparse per block) inputs are split into
    blocks of ``block_rows`` rows (default: the planner's).
    """
    if isinstance(X, da.Array) and block_rows is None:
        return X
    return plan_rows(X, block_rows=block_rows).data


def rechunk_rows(X: da.Array, block_rows: int) -> da.Array:
    """Rechunk to ``block_rows`` rows per block and one column block."""
    return X.rechunk({0: int(block_rows), 1: X.shape[1]})
