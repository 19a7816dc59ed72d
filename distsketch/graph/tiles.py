"""Tile products ``Σ_j T(A_i, B_j) V_j`` over row blocks of two matrices, never forming T.

The n_a × n_b matrix T is defined tile by tile by a function of one row block
of A and one of B (a kernel block, a distance block); these functions know
nothing about what the tile is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dask.array as da
import numpy as np
from dask.array import chunk
from dask.base import tokenize

from distsketch.graph.arrays import as_dask
from distsketch.graph.blocks import block_starts, dense_meta, whole_rows
from distsketch.graph.budget import check_task_memory
from distsketch.graph.runtime import active_client, pin_blas_for_tasks, rechunk

__all__ = ["persist_rows", "row_matvec", "tile_matvec"]


class _TileTask:
    """One tile: ``T(A_i, B_j) @ V_j`` with global row offsets passed to ``tile_fn``."""

    def __init__(self, tile_fn: Callable[..., np.ndarray], kwargs: dict):
        self.tile_fn = tile_fn
        self.kwargs = kwargs

    def __call__(self, a, b, v, off_a, off_b):
        pin_blas_for_tasks()
        T = self.tile_fn(a, b, int(off_a), int(off_b), **self.kwargs)
        return (np.asarray(T, dtype=np.float64) @ np.asarray(v, dtype=np.float64))[:, None, :]


def _matvec_operands(A: Any, B: Any, V: Any, what: str) -> tuple[da.Array, da.Array, da.Array, int]:
    # A and B in whole rows; V as (n_b, t) float64 in B's row blocks
    Ad = whole_rows(as_dask(A))
    Bd = whole_rows(as_dask(B))
    Vd = as_dask(np.asarray(V, dtype=np.float64)) if not isinstance(V, da.Array) else V
    if Vd.ndim == 1:
        Vd = Vd[:, None]
    if Vd.shape[0] != Bd.shape[0]:
        raise ValueError(f"{what}: V has {Vd.shape[0]} rows but B has {Bd.shape[0]}.")
    t = int(Vd.shape[1])
    return Ad, Bd, rechunk(Vd, (Bd.chunks[0], t)), t


def tile_matvec(
    A: Any,
    B: Any,
    V: Any,
    tile_fn: Callable[..., np.ndarray],
    *,
    kwargs: dict | None = None,
    split_every: int = 8,
    name: str = "tile-matvec",
) -> da.Array:
    """Lazy ``T(A, B) @ V`` where T is evaluated tile by tile and never stored.

    Parameters
    ----------
    A : ndarray or dask array of shape (n_a, d)
        Row points of T (its row blocks are the output's row blocks).
    B : ndarray or dask array of shape (n_b, d)
        Column points of T.
    V : ndarray or dask array of shape (n_b, t)
        Right-hand side; rechunked to B's row blocks.
    tile_fn : callable
        ``tile_fn(A_i, B_j, row_offset_i, row_offset_j, **kwargs)`` returning
        the ``(len(A_i), len(B_j))`` tile of T.  It must be picklable for
        ``distributed``.
    kwargs : dict, optional
        Small keyword arguments for ``tile_fn``.
    split_every : int, default 8
        Fan-in of the tree sum over column blocks.
    name : str
        Task-name prefix.

    Returns
    -------
    dask.array.Array of shape (n_a, t), float64
        Row blocks as A's.

    Notes
    -----
    Memory per tile task: ``rows_i · rows_j`` tile values plus the two blocks
    and ``rows_j × t`` of V (checked against the task budget).  Work:
    one ``tile_fn`` call per (i, j) pair, i.e. ``n_a n_b`` tile entries; the
    tree sum moves ``n_blocks(B)`` partial ``rows_i × t`` results per row
    block.  B's blocks are shared inputs: on ``distributed`` each travels to
    the workers that need it.
    """
    Ad, Bd, Vd, t = _matvec_operands(A, B, V, "tile_matvec")
    max_a, max_b = max(Ad.chunks[0]), max(Bd.chunks[0])
    check_task_memory(name, max_a, 8.0 * max_b + 8.0 * (Ad.shape[1] + 2 * t),
                      8.0 * max_b * (Bd.shape[1] + t))
    off_a = block_starts(Ad.chunks[0])
    off_b = block_starts(Bd.chunks[0])
    task = _TileTask(tile_fn, dict(kwargs or {}))
    parts = da.blockwise(
        task, "ijk", Ad, "ia", Bd, "ja", Vd, "jk", off_a, "i", off_b, "j",
        adjust_chunks={"j": 1}, dtype=np.float64, concatenate=True, align_arrays=False,
        meta=dense_meta(Ad, 3, np.float64),
        name=f"{name}-tiles-" + tokenize(tile_fn, task.kwargs, Ad.name, Bd.name, Vd.name),
    )
    # ``parts.sum`` under ``name``: the tile tasks fuse into the sum's first step and
    # take its key, so the prefix keeps the tiles recognisable on the scheduler
    return da.reduction(parts, chunk.sum, chunk.sum, axis=1, keepdims=False,
                        dtype=np.float64, split_every=split_every, name=f"{name}-sum")


#: The smallest row block :func:`row_matvec` makes when it splits blocks for more tasks.
MIN_SPLIT_ROWS = 256


def _split_rows(chunks: tuple[int, ...], min_tasks: int, align: int = 1) -> tuple[int, ...]:
    # each chunk cut into about even pieces, at least `min_tasks` in all where pieces of
    # MIN_SPLIT_ROWS allow; all but a block's last a multiple of `align` rows, so they start
    # where an unsplit block's sub-tiles of `align` rows do
    align = max(1, int(align))
    target = max(1, -(-sum(chunks) // max(1, min_tasks)))
    out: list[int] = []
    for c in chunks:
        k = max(1, min(-(-c // target), c // max(MIN_SPLIT_ROWS, align)))
        per_piece = -(-c // k)
        size = -(-per_piece // align) * align  # ceil(c / k) rounded up to align
        pieces = [size] * (c // size) + ([c % size] if c % size else [])
        out.extend(pieces)
    return tuple(out)


class _RowTask:
    """One row block: ``row_fn(A_i, [B_j], [V_j]) = Σ_j T(A_i, B_j) V_j`` in one task."""

    def __init__(self, row_fn: Callable[..., np.ndarray], kwargs: dict):
        self.row_fn = row_fn
        self.kwargs = kwargs

    def __call__(self, a, b, v):
        pin_blas_for_tasks()
        # the contracted column index gives lists: [A_i] for A, [[B_j] for j] for B
        return np.asarray(self.row_fn(a[0], [blk[0] for blk in b], list(v), **self.kwargs),
                          dtype=np.float64)


def row_matvec(
    A: Any,
    B: Any,
    V: Any,
    row_fn: Callable[..., np.ndarray],
    *,
    kwargs: dict | None = None,
    work_bytes: float = 0.0,
    work_bytes_per_row: float = 0.0,
    min_tasks: int = 0,
    split_align: int = 1,
    name: str = "row-matvec",
) -> da.Array:
    """Lazy ``T(A, B) @ V`` with one task per row block of A, each looping over all of B.

    The graph has one task per row block of A (no tile tasks, no tree sum):
    task i receives A_i and the list of B's and V's blocks (shared inputs,
    never concatenated) and returns ``Σ_j T(A_i, B_j) V_j``.  It suits B small
    enough to be held whole by every worker, as in an iterative solver that
    keeps X in memory; :func:`tile_matvec` is the fallback when it is not.

    Parameters
    ----------
    A : ndarray or dask array of shape (n_a, d)
    B : ndarray or dask array of shape (n_b, d)
    V : ndarray or dask array of shape (n_b, t)
        Rechunked to B's row blocks.
    row_fn : callable
        ``row_fn(A_i, B_blocks, V_blocks, **kwargs)`` returning the
        ``(len(A_i), t)`` product.  Picklable for ``distributed``.
    kwargs : dict, optional
        Small keyword arguments for ``row_fn``.
    work_bytes, work_bytes_per_row : float
        Working memory ``row_fn`` allocates beyond its inputs and result:
        fixed (a tile buffer) and per row of A_i (a copy of the block).
    min_tasks : int, default 0
        Split A's row blocks evenly until there are at least this many tasks
        (pieces of :data:`MIN_SPLIT_ROWS` rows at least, but a block's
        remainder), so that every thread of the
        scheduler gets work when A has fewer blocks than threads.
    split_align : int, default 1
        Pieces of a split block are multiples of this many rows (but the
        block's last): a ``row_fn`` that works in sub-blocks of that many rows
        from its block's start then makes the same sub-blocks split or not, so
        its result need not depend on ``min_tasks``.
    name : str
        Task-name prefix.

    Returns
    -------
    dask.array.Array of shape (n_a, t), float64
        A's row blocks (split further for ``min_tasks``).

    Raises
    ------
    MemoryBudgetError
        When A_i, all of B and V, the result and ``work_bytes`` exceed the
        per-task budget (use :func:`tile_matvec` then).

    Notes
    -----
    Memory per task: ``rows_i · (d + t)`` of A_i and its result, plus the
    whole of B and V (``n_b · (d + t)`` values, resident once per worker and
    shared by its threads) and the work memory.
    """
    Ad, Bd, Vd, t = _matvec_operands(A, B, V, "row_matvec")
    if len(Ad.chunks[0]) < int(min_tasks):
        Ad = rechunk(Ad, (_split_rows(Ad.chunks[0], int(min_tasks), split_align), Ad.shape[1]))
    check_task_memory(name, max(Ad.chunks[0]), 8.0 * (Ad.shape[1] + t) + float(work_bytes_per_row),
                      8.0 * Bd.shape[0] * (Bd.shape[1] + t) + float(work_bytes))
    task = _RowTask(row_fn, dict(kwargs or {}))
    return da.blockwise(
        task, "ik", Ad, "ia", Bd, "ja", Vd, "jk", dtype=np.float64, concatenate=False,
        align_arrays=False, meta=dense_meta(Ad, 2, np.float64),
        name=f"{name}-" + tokenize(row_fn, task.kwargs, Ad.name, Bd.name, Vd.name),
    )


def persist_rows(X: Any) -> Any:
    """Keep the blocks of a lazy array in (cluster) memory for repeated passes.

    Iterative solvers read X once per iteration; persisting turns every pass
    after the first into memory reads.  NumPy input is returned unchanged.
    Memory: the whole array, spread over the workers.
    """
    if not isinstance(X, da.Array):
        return X
    client = active_client()
    if client is not None:
        return client.persist(X)
    return X.persist(scheduler="threads")
