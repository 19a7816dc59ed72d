"""Turning inputs into row-chunked dask arrays (the block size is planned in
:mod:`distsketch.graph.plan`): the layers above graph build no dask array themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import dask.array as da
import numpy as np
from dask.base import tokenize

from distsketch.footprint import Footprint
from distsketch.graph.blocks import whole_rows
from distsketch.graph.plan import plan_rows
from distsketch.graph.planner import choose_block_rows
from distsketch.graph.row_sources import row_source_of
from distsketch.graph.runtime import compute, rechunk
from distsketch.ops.namespace import asarray, densify, namespace, to_host
from distsketch.validation.finite import is_dask  # the one test, re-exported for io

__all__ = [
    "KERNEL_TILE_ROWS",
    "LAZY_BLOCK_ROWS",
    "UNKNOWN_STAGE_ROWS",
    "as_dask",
    "as_lazy",
    "default_block_rows",
    "from_source",
    "gather_rows",
    "generate_rows",
    "hstack_blocks",
    "is_dask",
    "rechunk_rows",
    "renamed",
    "store_block_rows",
    "store_graph",
    "to_dask",
    "unknown_stage_footprint",
]

#: rows of one kernel tile side (``KernelSolver.block_rows``, the sparsified Gram's
#: ``tile_rows``): a tile task holds ``rows²`` floats (32 MiB at 2048)
KERNEL_TILE_ROWS = 2048

#: rows per block when an in-memory input is made lazy so that a map over it stays
#: lazy (:func:`as_lazy`); the map's own plan splits these blocks further
LAZY_BLOCK_ROWS = 65536

#: working set, in input rows per row, of a stage not known when its input is opened
#: (a command opens its input before it knows which estimator reads it): a feature
#: map about ten times as wide as the input, with the input and temporaries
UNKNOWN_STAGE_ROWS = 16


def unknown_stage_footprint(row_bytes: float) -> Footprint:
    """The footprint assumed for a stage not known yet: :data:`UNKNOWN_STAGE_ROWS` input rows
    of ``row_bytes`` per row, nothing fixed."""
    return Footprint(per_row=UNKNOWN_STAGE_ROWS * row_bytes)


def default_block_rows(n_rows: int, n_cols: int, itemsize: int) -> int:
    """Rows per block of a stage that states no working memory: at most
    ``distsketch.block-bytes`` (64 MiB) of input, enough blocks for the threads."""
    return choose_block_rows(n_rows, max(1, n_cols * itemsize)).block_rows


def store_block_rows(n_rows: int, n_cols: int, itemsize: int, unit: int, *,
                     any_stage: bool = False) -> int:
    """Rows per block of a Zarr store opened as an input: whole chunks (or shards).

    About :func:`default_block_rows` of input per block, rounded down to whole
    storage units of ``unit`` rows (at least one).  With ``any_stage`` the
    input is opened before the stage that reads it is known (the command
    line): the blocks are then no larger than the plan of a stage whose
    working set is :data:`UNKNOWN_STAGE_ROWS` input rows per row.
    """
    unit = max(1, int(unit))
    target = default_block_rows(n_rows, n_cols, itemsize)
    rows = max(unit, (target // unit) * unit)
    if any_stage:
        row_bytes = max(1, n_cols * itemsize)
        stage = unknown_stage_footprint(row_bytes)
        plan = choose_block_rows(n_rows, row_bytes, stage.per_row, stage.fixed,
                                 align=unit).block_rows
        # the first block of the default blocks: the plan applies when it is smaller
        if plan < min(rows, max(int(n_rows), 1)):
            rows = plan
    return int(rows)


def as_dask(X: Any, block_rows: int | None = None) -> da.Array:
    """A dask array of ``X`` with whole rows in each block.

    NumPy (and SciPy sparse, kept sparse per block) inputs are split into
    blocks of ``block_rows`` rows (default: the planner's).
    """
    if isinstance(X, da.Array) and block_rows is None:
        return X
    return plan_rows(X, block_rows=block_rows).data


def as_lazy(X: Any) -> da.Array:
    """``X`` as a lazy dask array: a dask array as it is, an in-memory one in blocks
    of at most :data:`LAZY_BLOCK_ROWS` rows, so that a map over it returns a lazy
    array (the map plans its own blocks within these)."""
    if isinstance(X, da.Array):
        return X
    return as_dask(X, block_rows=min(X.shape[0], LAZY_BLOCK_ROWS))


def to_dask(X: Any) -> da.Array:
    """``X`` as a dask array in the chunks dask chooses (a dask array as it is)."""
    return da.asarray(X)


def from_source(source: Any, chunks: Any, **kwargs: Any) -> da.Array:
    """A dask array reading ``source`` (a store reader, a Zarr array, NumPy) in ``chunks``.

    ``kwargs`` go to :func:`dask.array.from_array` (``name``, ``meta``,
    ``asarray``, ``lock``, ``fancy``).
    """
    return da.from_array(source, chunks=chunks, **kwargs)


def rechunk_rows(X: da.Array, block_rows: int) -> da.Array:
    """Rechunk to ``block_rows`` rows per block and one column block."""
    return rechunk(X, {0: int(block_rows), 1: X.shape[1]})


def hstack_blocks(A: da.Array, *parts: Any) -> da.Array:
    """``[A | parts...]``: columns appended on ``A``'s row blocks.

    Each part (NumPy or dask, 2-D) is cut (or rechunked) to ``A``'s row
    blocks; the result has ``A``'s row blocks and whole rows per block.
    """
    rows = A.chunks[0]
    cols = [whole_rows(A)]
    for part in parts:
        if isinstance(part, da.Array):
            cols.append(rechunk(part, (rows, part.shape[1])))
        else:
            cols.append(da.from_array(part, chunks=(rows, part.shape[1])))
    return da.concatenate(cols, axis=1)


def store_graph(X: da.Array, target: Any) -> Any:
    """The (uncomputed) graph writing ``X`` into ``target`` block by block, unlocked."""
    return da.store(X, target, lock=False, compute=False)


def generate_rows(func: Callable[..., np.ndarray], n_rows: int, n_cols: int,
                  block_rows: int | Sequence[int], dtype: Any, name: str) -> da.Array:
    """A lazy ``(n_rows, n_cols)`` array whose blocks ``func(block_info=...)`` generates.

    Blocks of ``block_rows`` rows (an int, or the rows of each block); each
    task generates only its rows.
    """
    rows = da.core.normalize_chunks((block_rows,), (int(n_rows),))[0]
    dtype = np.dtype(dtype)
    return da.map_blocks(func, dtype=dtype, chunks=(rows, (int(n_cols),)),
                         meta=np.empty((0, 0), dtype=dtype), name=name)


def renamed(X: da.Array, name: str) -> da.Array:
    """``X`` under the task name ``name`` (its blocks unchanged, not copied): what a
    progress line calls the computation that makes them."""
    return da.map_blocks(_same, X, dtype=X.dtype, meta=X._meta, name=name)


def _same(block: Any) -> Any:
    return block


def gather_rows(X: Any, index: np.ndarray, name: str = "sample-rows") -> np.ndarray:
    """Rows ``X[index]`` (sorted indices) as host float64, reading only the chunks that hold them.

    For a sample whose rows were chosen before anything is read (no pass over
    X): a dask array computes only the blocks holding a chosen row, and a
    store is read again in its own chunks (its row source), so a chosen row
    costs its chunk, not a whole planned block.  ``name`` labels the read.
    """
    index = np.asarray(index, dtype=np.int64)
    every = index.size == X.shape[0]
    if is_dask(X):
        source = row_source_of(X, derived=False)
        if not every and source is not None and source.unit < max(X.chunks[0]):
            X = source.read(source.unit)
        part = X if every else X[index]
        # named, so that its progress line says what is read
        part = renamed(part, f"{name}-{tokenize(part.name)}")
        rows = compute(part, progress=False)[0]
    elif every:
        rows = X
    elif isinstance(X, np.ndarray) or hasattr(X, "tocsr"):
        rows = X[index]
    else:  # another namespace (CuPy): gathered on its device, then moved
        rows = namespace(X).take(X, asarray(index, like=X), axis=0)
    return np.asarray(densify(to_host(rows)), dtype=np.float64).reshape(index.size, -1)
