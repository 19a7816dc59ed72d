"""Turning inputs into row-chunked dask arrays."""

from __future__ import annotations

from typing import Any

import dask
import dask.array as da
import numpy as np
from dask.utils import parse_bytes

__all__ = ["DEFAULT_BLOCK_BYTES", "as_dask", "default_block_rows", "rechunk_rows"]

DEFAULT_BLOCK_BYTES = 64 * 2**20


def default_block_rows(n_rows: int, n_cols: int, itemsize: int,
                       block_bytes: int | None = None) -> int:
    """Rows per block so one block of input is about ``block_bytes``.

    The default comes from dask config ``distsketch.block-bytes`` (64 MiB):
    lower it to cut per-task memory of algorithms that upcast blocks.
    """
    if block_bytes is None:
        value = dask.config.get("distsketch.block-bytes", DEFAULT_BLOCK_BYTES)
        block_bytes = int(parse_bytes(value)) if isinstance(value, str) else int(value)
    rows = max(1, block_bytes // max(1, n_cols * itemsize))
    return int(min(max(n_rows, 1), rows))


def as_dask(X: Any, block_rows: int | None = None) -> da.Array:
    """A dask array of ``X`` with whole rows in each block.

    NumPy (and SciPy sparse, kept sparse per block) inputs are split into
    blocks of ``block_rows`` rows (default: about 64 MiB each).
    """
    if isinstance(X, da.Array):
        return X if block_rows is None else rechunk_rows(X, block_rows)
    if hasattr(X, "tocsr"):
        csr = X.tocsr()
        rows = block_rows or default_block_rows(
            csr.shape[0], max(1, csr.nnz // max(1, csr.shape[0])), 12)
        return da.from_array(csr, chunks=(rows, csr.shape[1]), asarray=False,
                             meta=csr[:0])
    arr = np.asarray(X)
    if arr.ndim != 2:
        return da.from_array(arr)
    rows = block_rows or default_block_rows(arr.shape[0], arr.shape[1], arr.itemsize)
    return da.from_array(arr, chunks=(rows, arr.shape[1]))


def rechunk_rows(X: da.Array, block_rows: int) -> da.Array:
    """Rechunk to ``block_rows`` rows per block and one column block."""
    return X.rechunk({0: int(block_rows), 1: X.shape[1]})
