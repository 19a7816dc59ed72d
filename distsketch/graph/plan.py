"""One entry from data to row blocks: plan the block size, number the rows, run.

Every estimator reaches its data through :func:`plan_rows` (or the two
shorthands :func:`map_blocks` and :func:`reduce_blocks`):

* **input**: NumPy (dense or SciPy sparse), a dask array, or a dask array
  already opened on a Zarr store (paths are opened by ``distsketch.io``, never
  here);
* **block size**: one rule, :func:`choose_block_rows`, from the stage's
  per-row working memory, its fixed memory and the task budget; dask inputs
  keep their chunks (they are the store's) unless ``block_rows=`` is given;
* **global row numbers**: each block learns the global index of its first
  row, counted from ``row_start`` (``partial_fit`` passes the rows it has
  already seen), folded into the block's task rather than a separate task;
* **running**: maps return the kind of their input (NumPy in, NumPy out;
  dask in, lazy dask out); summaries are tree-reduced and returned computed.

The rule is a pure function returning a small :class:`BlockPlan`, so a
cluster-aware planner can replace it without touching any caller.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import dask
import dask.array as da
import numpy as np
from dask.utils import parse_bytes

from distsketch.graph.blocks import map_rows, tree_reduce, whole_rows
from distsketch.graph.budget import rows_for_budget, task_memory_budget
from distsketch.graph.runtime import compute, compute_array

__all__ = [
    "INPUT_BLOCK_BYTES",
    "MIN_PLANNED_ROWS",
    "WORKING_SET_BYTES",
    "BlockPlan",
    "RowBlocks",
    "choose_block_rows",
    "input_block_bytes",
    "input_bytes_per_row",
    "map_blocks",
    "plan_rows",
    "reduce_blocks",
    "to_numpy",
]

INPUT_BLOCK_BYTES = 64 * 2**20
WORKING_SET_BYTES = 256 * 2**20
MIN_PLANNED_ROWS = 256


@dataclass(frozen=True)
class BlockPlan:
    """How rows are split into blocks, and what one task is projected to hold.

    Attributes
    ----------
    block_rows : int
        Rows in the largest block.
    n_blocks : int
        Number of row blocks.
    task_bytes : int
        Projected bytes of one task on the largest block:
        ``block_rows * bytes_per_row + fixed_bytes`` (the input block alone
        when the stage states no model).
    """

    block_rows: int
    n_blocks: int
    task_bytes: int


def input_block_bytes() -> int:
    """Input bytes per block when nothing else limits it (dask config
    ``distsketch.block-bytes``, default 64 MiB)."""
    value = dask.config.get("distsketch.block-bytes", INPUT_BLOCK_BYTES)
    return int(parse_bytes(value)) if isinstance(value, str) else int(value)


def input_bytes_per_row(X: Any) -> int:
    """Bytes one row of ``X`` occupies in a block (sparse: about 12 per stored value)."""
    if hasattr(X, "tocsr") and hasattr(X, "nnz"):
        n = max(1, X.shape[0])
        return 12 * max(1, X.nnz // n)
    width = X.shape[1] if len(X.shape) > 1 else 1
    return max(1, int(width) * np.dtype(X.dtype).itemsize)


def choose_block_rows(n_rows: int, input_row_bytes: float, bytes_per_row: float | None = None,
                      fixed_bytes: float = 0.0, budget: int | None = None,
                      align: int | None = None) -> BlockPlan:
    """The block-size rule: rows per block for one stage over ``n_rows`` rows.

    A block holds at most :func:`input_block_bytes` of input.  A stage that
    states its working memory (``bytes_per_row``: input + output +
    temporaries of one row, and ``fixed_bytes``) is also held to a working set
    of ``min(budget, 256 MiB)`` (so wide outputs neither exceed the budget
    nor thrash the cache), but never below 256 rows, where per-task overhead
    would dominate.  A fixed part alone above that working set leaves the
    input limit in place: smaller blocks could not help it, and
    :func:`~distsketch.graph.check_task_memory` judges it against the budget.

    Parameters
    ----------
    n_rows : int
        Rows of the input.
    input_row_bytes : float
        Bytes of one input row (see :func:`input_bytes_per_row`).
    bytes_per_row : float, optional
        Working memory of the stage per row of a block.
    fixed_bytes : float, default 0
        Memory of one task independent of its rows (operators, states).
    budget : int, optional
        Per-task budget; default :func:`~distsketch.graph.task_memory_budget`.
    align : int, optional
        Make the rows a multiple of this (a store's chunk or shard rows), at
        least one unit.

    Returns
    -------
    BlockPlan
    """
    n = max(int(n_rows), 1)
    rows = max(1, int(input_block_bytes() // max(1.0, float(input_row_bytes))))
    if bytes_per_row:
        target = min(task_memory_budget() if budget is None else int(budget), WORKING_SET_BYTES)
        if target - fixed_bytes > 0:
            rows = min(rows, max(MIN_PLANNED_ROWS, rows_for_budget(bytes_per_row, fixed_bytes,
                                                                   target)))
    if align and align > 1:
        rows = max(int(align), rows // int(align) * int(align))
    return _plan_of(_cut(n, rows), input_row_bytes, bytes_per_row, fixed_bytes)


def _cut(n_rows: int, block_rows: int) -> tuple[int, ...]:
    # row chunks of n_rows cut every block_rows rows (one block for an empty input)
    n = max(int(n_rows), 1)
    rows = max(1, min(int(block_rows), n))
    return (rows,) * (n // rows) + ((n % rows,) if n % rows else ())


def _plan_of(chunks: tuple[int, ...], input_row_bytes: float, bytes_per_row: float | None,
             fixed_bytes: float) -> BlockPlan:
    rows = max(chunks) if chunks else 0
    per_row = bytes_per_row if bytes_per_row else input_row_bytes
    return BlockPlan(block_rows=int(rows), n_blocks=len(chunks),
                     task_bytes=int(rows * per_row + fixed_bytes))


def _as_blocks(X: Any, rows: int) -> da.Array:
    if hasattr(X, "tocsr"):
        csr = X.tocsr()
        # sparse blocks stay sparse: one CSR row slice per task
        return da.from_array(csr, chunks=(rows, csr.shape[1]), asarray=False, meta=csr[:0])
    return da.from_array(X, chunks=(rows, X.shape[1]))


class RowBlocks:
    """Row blocks of one input, planned for one stage; run maps and summaries on them.

    Build with :func:`plan_rows`.

    Attributes
    ----------
    data : dask.array.Array
        The input as a dask array of whole-row blocks.
    plan : BlockPlan
        Rows per block, number of blocks, projected bytes per task.
    row_start : int
        Global index of the input's first row.
    lazy : bool
        True when the input was a dask array: maps stay lazy.
    """

    def __init__(self, data: da.Array, plan: BlockPlan, row_start: int, lazy: bool,
                 bytes_per_row: float | None, fixed_bytes: float):
        self.data = data
        self.plan = plan
        self.row_start = int(row_start)
        self.lazy = bool(lazy)
        self.bytes_per_row = bytes_per_row
        self.fixed_bytes = float(fixed_bytes)

    def _local(self) -> bool:
        # one in-memory block: no scheduler, no thread pool
        return not self.lazy and self.data.npartitions == 1

    def map(self, func: Callable[..., np.ndarray], *operands: Any, n_out: int, dtype: Any,
            kwargs: dict | None = None, name: str = "map-rows", check_finite: bool = True,
            where: str = "input", progress: bool | None = None) -> Any:
        """``func(block, row_start_of_block, *operands, **kwargs)`` on every block.

        Returns
        -------
        ndarray or dask.array.Array of shape (n, n_out)
            NumPy for in-memory input, a lazy dask array for dask input.

        Notes
        -----
        Memory per task: the plan's ``task_bytes``, checked against the
        budget before anything runs.
        """
        out = map_rows(func, self.data, *operands, n_out=n_out, dtype=dtype, kwargs=kwargs,
                       bytes_per_row=self.bytes_per_row, fixed_bytes=self.fixed_bytes,
                       check_finite=check_finite, name=name, where=where,
                       row_start=self.row_start)
        if self.lazy:
            return out
        if self._local():
            return compute(out, progress=False, scheduler="sync")[0]
        return compute_array(out, progress=progress)

    def reduce(self, summary: Any, *operands: Any, split_every: int = 8, name: str | None = None,
               check_finite: bool = True, where: str = "input", progress: bool | None = None,
               lazy: bool = False) -> Any:
        """Tree-reduce ``summary`` over the blocks and return the merged state.

        With ``lazy=True`` the reduction is returned as a ``Delayed`` instead.

        Notes
        -----
        Memory per chunk task: the plan's ``task_bytes``; per merge task
        ``split_every`` states.
        """
        red = tree_reduce(summary, self.data, *operands, split_every=split_every,
                          bytes_per_row=self.bytes_per_row, fixed_bytes=self.fixed_bytes,
                          check_finite=check_finite, name=name, where=where,
                          row_start=self.row_start)
        if lazy:
            return red
        if self.data.npartitions == 1:
            return compute(red, progress=False, scheduler="sync")[0]
        return compute(red, progress=progress)[0]


def plan_rows(X: Any, *, bytes_per_row: float | None = None, fixed_bytes: float = 0.0,
              block_rows: int | None = None, row_start: int = 0,
              align: int | None = None) -> RowBlocks:
    """Plan the row blocks of ``X`` for one stage.

    Parameters
    ----------
    X : ndarray, sparse matrix or dask array of shape (n, d)
        A dask array keeps its row chunks unless ``block_rows`` is given.
    bytes_per_row : float, optional
        Working memory of the stage per row (input + output + temporaries).
    fixed_bytes : float, default 0
        Memory of a task independent of its rows.
    block_rows : int, optional
        Rows per block, overriding :func:`choose_block_rows`.
    row_start : int, default 0
        Global index of the first row of ``X`` (rows appended to earlier data
        continue its numbering).
    align : int, optional
        Block rows a multiple of this (a store's chunk rows).

    Returns
    -------
    RowBlocks
    """
    lazy = isinstance(X, da.Array)
    if not lazy and not hasattr(X, "tocsr"):
        X = np.asarray(X)
    row_bytes = input_bytes_per_row(X)
    if lazy:
        data = whole_rows(X)
        if block_rows is not None:
            data = data.rechunk({0: int(block_rows)})
        plan = _plan_of(tuple(data.chunks[0]), row_bytes, bytes_per_row, fixed_bytes)
    elif X.ndim != 2:
        data = da.from_array(X)
        plan = _plan_of(tuple(data.chunks[0]), row_bytes, bytes_per_row, fixed_bytes)
    else:
        n = X.shape[0]
        plan = (choose_block_rows(n, row_bytes, bytes_per_row, fixed_bytes, align=align)
                if block_rows is None else
                _plan_of(_cut(n, int(block_rows)), row_bytes, bytes_per_row, fixed_bytes))
        data = _as_blocks(X, plan.block_rows)
    return RowBlocks(data, plan, row_start, lazy, bytes_per_row, fixed_bytes)


def map_blocks(X: Any, func: Callable[..., np.ndarray], *operands: Any, n_out: int, dtype: Any,
               kwargs: dict | None = None, bytes_per_row: float | None = None,
               fixed_bytes: float = 0.0, row_start: int = 0, block_rows: int | None = None,
               name: str = "map-rows", progress: bool | None = None) -> Any:
    """Map ``func`` over the row blocks of ``X``; the result is the kind of ``X``.

    ``plan_rows(X, ...).map(func, ...)`` in one call: see :func:`plan_rows`
    and :meth:`RowBlocks.map`.
    """
    blocks = plan_rows(X, bytes_per_row=bytes_per_row, fixed_bytes=fixed_bytes,
                       block_rows=block_rows, row_start=row_start)
    return blocks.map(func, *operands, n_out=n_out, dtype=dtype, kwargs=kwargs, name=name,
                      progress=progress)


def reduce_blocks(summary: Any, X: Any, *operands: Any, split_every: int = 8,
                  bytes_per_row: float | None = None, fixed_bytes: float = 0.0,
                  row_start: int = 0, block_rows: int | None = None,
                  progress: bool | None = None, name: str | None = None) -> Any:
    """Tree-reduce ``summary`` over ``X`` (NumPy, sparse or dask) and return the state.

    ``plan_rows(X, ...).reduce(summary, ...)`` in one call: see
    :func:`plan_rows` and :meth:`RowBlocks.reduce`.
    """
    blocks = plan_rows(X, bytes_per_row=bytes_per_row, fixed_bytes=fixed_bytes,
                       block_rows=block_rows, row_start=row_start)
    return blocks.reduce(summary, *operands, split_every=split_every, name=name,
                         progress=progress)


def to_numpy(X: Any) -> np.ndarray:
    """Materialise a (small) dask or NumPy array."""
    if isinstance(X, da.Array):
        return compute(X, progress=False)[0]
    return np.asarray(X)
