"""Turning inputs into row-chunked dask arrays (the block size is planned in
:mod:`distsketch.graph.plan`).

The layers above graph (estimators, io, validation, the CLI) build no dask
array themselves: what they need — an in-memory array made lazy, a store
reader or Zarr array as blocks, columns appended on an array's row blocks, a
store write, generated rows, chosen rows gathered — is one of these functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import dask.array as da
import numpy as np
from dask.base import tokenize

from distsketch.footprint import Footprint
from distsketch.graph.blocks import whole_rows
from distsketch.graph.plan import INPUT_BLOCK_BYTES, plan_rows
from distsketch.graph.planner import choose_block_rows
from distsketch.graph.row_sources import row_source_of
from distsketch.graph.runtime import compute, rechunk
from distsketch.ops.namespace import asarray, densify, namespace, to_host
from distsketch.validation.finite import is_dask  # the one test, re-exported for io

__all__ = [
    "DEFAULT_BLOCK_BYTES",
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
    "store_block_rows",
    "store_graph",
    "to_dask",
    "unknown_stage_footprint",
]

DEFAULT_BLOCK_BYTES = INPUT_BLOCK_BYTES

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


def _same(block: Any) -> Any:
    return block


def gather_rows(X: Any, index: np.ndarray, name: str = "sample-rows") -> np.ndarray:
    """Rows ``X[index]`` as host float64, reading only the chunks that hold them.

    The variant of :func:`distsketch.metrics.sample_rows` for a sample whose row indices were
    chosen before anything is read (e.g. whole strips of rows,
    :func:`~distsketch.estimators.kernel_params.strip_sample_index`): no pass
    over X.  A dask array computes only its blocks that hold a chosen row; a
    store opened by :func:`distsketch.io.open_array` is read again in its own
    chunks (its row source) so that a chosen row costs its chunk, not a whole
    planned block of several chunks.  Every row (``index`` of length n) is
    one read of X.

    Parameters
    ----------
    X : ndarray, sparse matrix, dask array or array of another namespace, shape (n, d)
    index : ndarray of int
        Sorted global row indices.
    name : str
        The read's name in the graph (the label of its progress line).

    Returns
    -------
    ndarray of shape (len(index), d), float64
    """
    index = np.asarray(index, dtype=np.int64)
    every = index.size == X.shape[0]
    if is_dask(X):
        source = row_source_of(X, derived=False)
        if not every and source is not None and source.unit < max(X.chunks[0]):
            X = source.read(source.unit)
        part = X if every else X[index]
        # named, so that its progress line says what is read
        part = part.map_blocks(_same, dtype=part.dtype, name=f"{name}-{tokenize(part.name)}")
        rows = compute(part, progress=False)[0]
    elif every:
        rows = X
    elif isinstance(X, np.ndarray) or hasattr(X, "tocsr"):
        rows = X[index]
    else:  # another namespace (CuPy): gathered on its device, then moved
        rows = namespace(X).take(X, asarray(index, like=X), axis=0)
    return np.asarray(densify(to_host(rows)), dtype=np.float64).reshape(index.size, -1)
