"""One entry from data to row blocks: plan the block size, number the rows, run.

Every estimator reaches its data through :func:`plan_rows` (or the shorthands
:func:`map_blocks` and :func:`reduce_blocks`): the planner's block size from
the stage's declared memory, the cluster's budget and threads; NumPy cut to the
plan, larger dask blocks split (re-read through their
:class:`~distsketch.graph.row_sources.RowSource` when they have one); each block
told its global first row; maps return the kind of their input, summaries are
tree-reduced on the workers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import dask.array as da
import numpy as np
from dask.utils import format_bytes

from distsketch.errors import MemoryBudgetError
from distsketch.footprint import Footprint
from distsketch.graph.blocks import map_rows, row_offsets, tree_reduce, whole_rows
from distsketch.graph.budget import memory_fraction
from distsketch.graph.engine import reduce_with_engine, wants_engine
from distsketch.graph.inprocess import InProcessBlocks
from distsketch.graph.planner import (
    INPUT_BLOCK_BYTES,
    MIN_PLANNED_ROWS,
    WORKING_SET_BYTES,
    BlockPlan,
    choose_block_rows,
    choose_fan_in,
    input_block_bytes,
    log_plan,
)
from distsketch.graph.row_sources import RowSource, attach_row_source, row_source_of
from distsketch.graph.runtime import active_client, compute, compute_array, rechunk
from distsketch.ops.namespace import host_dtype, host_tree, to_host
from distsketch.validation.finite import (
    FiniteRows,
    FlaggedSummary,
    check_finite_rows,
    is_array_api,
    mark_checked,
)

__all__ = [
    "INPUT_BLOCK_BYTES",
    "MIN_PLANNED_ROWS",
    "WORKING_SET_BYTES",
    "BlockPlan",
    "Footprint",
    "RowBlocks",
    "RowSource",
    "attach_row_source",
    "choose_block_rows",
    "declared_footprint",
    "derive_row_source",
    "input_block_bytes",
    "input_bytes_per_row",
    "map_blocks",
    "plan_rows",
    "reduce_blocks",
    "register_row_source",
    "row_source_of",
    "to_numpy",
]

def register_row_source(X: da.Array, reopen: Callable[[int], da.Array], unit: int,
                        where: str = "") -> da.Array:
    """Tell the planner how to re-read ``X`` with other row blocks.

    Shorthand for ``attach_row_source(X, RowSource(reopen, unit, where,
    input_bytes_per_row(X)))``: ``reopen(block_rows)`` returns the same data
    with blocks of that many rows, ``unit`` is the store's chunk (or shard)
    rows, ``where`` names the store in messages.  Returns ``X`` itself.
    """
    return attach_row_source(X, RowSource(reopen, unit, where, input_bytes_per_row(X)))


def input_bytes_per_row(X: Any) -> int:
    """Bytes one row of ``X`` occupies in a block (sparse: about 12 per stored value)."""
    if hasattr(X, "tocsr") and hasattr(X, "nnz"):
        n = max(1, X.shape[0])
        return 12 * max(1, X.nnz // n)
    width = X.shape[1] if len(X.shape) > 1 else 1
    return max(1, int(width) * host_dtype(X.dtype).itemsize)


def _check_store_chunk(chunk_rows: int, row_bytes: int, rule: BlockPlan, where: str) -> None:
    """Refuse a store whose one chunk (or shard) does not fit the per-task memory.

    A task decodes at least one whole chunk, whatever its block size; a chunk
    above what a task can get is killed (or refused as corrupt) on the workers,
    so it is named here, before anything runs.  What a task can get is the
    memory per thread the budget is a fraction of (``task-memory-fraction``,
    the planning margin for blocks), or the budget itself where the user set
    it (``distsketch.task-memory``): the planner shrinks blocks, never chunks.
    """
    if rule.budget is None:
        return
    chunk = chunk_rows * row_bytes
    limit = rule.budget if "task-memory" in rule.source else int(rule.budget / memory_fraction())
    if chunk > limit:
        raise MemoryBudgetError(
            f"one chunk of the input store{' ' + where if where else ''} is {format_bytes(chunk)} "
            f"({chunk_rows} rows x "
            f"{format_bytes(row_bytes)}/row) but a task may use only {format_bytes(limit)} "
            f"({rule.source}), and every task decodes at least one whole chunk. Fix: re-ingest "
            f"the input with smaller chunks (distsketch ingest --chunk-rows "
            f"{max(1, limit // max(1, 4 * row_bytes))} or less), or give the workers more "
            "memory per thread (or raise the dask config distsketch.task-memory, e.g. "
            "DASK_DISTSKETCH__TASK_MEMORY=4GiB).")


def _cut(n_rows: int, block_rows: int) -> tuple[int, ...]:
    # row chunks of n_rows cut every block_rows rows (one block for an empty input)
    n = max(int(n_rows), 1)
    rows = max(1, min(int(block_rows), n))
    return (rows,) * (n // rows) + ((n % rows,) if n % rows else ())


def _plan_of(chunks: tuple[int, ...], input_row_bytes: float, bytes_per_row: float | None,
             fixed_bytes: float, like: BlockPlan | None = None, limit: str | None = None
             ) -> BlockPlan:
    rows = max(chunks) if chunks else 0
    per_row = bytes_per_row if bytes_per_row else input_row_bytes
    plan = BlockPlan(block_rows=int(rows), n_blocks=len(chunks),
                     task_bytes=int(rows * per_row + fixed_bytes))
    if like is None:
        return plan
    return BlockPlan(plan.block_rows, plan.n_blocks, plan.task_bytes, budget=like.budget,
                     threads=like.threads, limit=limit or like.limit, source=like.source)


def _split_chunks(chunks: tuple[int, ...], rows: int) -> tuple[int, ...]:
    # each block cut into equal parts of at most `rows`: every new block lies
    # inside one old block, so slicing moves no data between blocks
    out: list[int] = []
    for c in chunks:
        k = -(-int(c) // rows)
        out += [c // k + (1 if i < c % k else 0) for i in range(k)] if c else [0]
    return tuple(out)


def _split(data: da.Array, rows: int, source: RowSource | None, read_once: bool = False,
           exact: bool = False) -> da.Array:
    # `source` re-reads the array itself (not one it was derived from), else None: sliced
    if source is not None and rows < source.unit and read_once:
        # blocks smaller than the store's chunk: each chunk is read (decoded) once and
        # cut in memory; a read of part of a compressed chunk decodes all of it
        whole = whole_rows(source.read(source.unit))
        if not exact and source.unit % (part := _part_rows(source.unit, rows)) == 0:
            # equal parts of a chunk: one block size throughout, so an output written from
            # these blocks takes them as its chunks (no rechunk, no slivers across workers)
            return rechunk(whole, {0: part})
        return rechunk(whole, {0: _split_chunks(tuple(whole.chunks[0]), rows)})
    if source is not None:
        if rows < source.unit and not exact:  # planned rows; a user's block_rows= are kept
            rows = _part_rows(source.unit, rows)
        return whole_rows(source.read(rows))
    old = tuple(int(c) for c in data.chunks[0])
    head = old[:-1] if len(old) > 1 else old
    if len(set(head)) == 1 and head[0] % -(-head[0] // rows) == 0 and old[-1] <= head[0]:
        # equal blocks split evenly: uniform blocks (a Zarr write keeps them)
        rows = head[0] // -(-head[0] // rows)
        return rechunk(data, {0: rows})
    return rechunk(data, {0: _split_chunks(old, rows)})


def _part_rows(unit: int, rows: int) -> int:
    # at most `rows` rows dividing the chunk evenly, so no block decodes two chunks; up to
    # twice as many parts as needed, else the next equal size up (straddling chunk bounds)
    k0 = -(-unit // rows)
    return next((unit // k for k in range(k0, 2 * k0 + 1) if unit % k == 0), -(-unit // k0))


def _read_once(source: RowSource | None, n_rows: int, rule: BlockPlan) -> bool:
    """Whether blocks smaller than the store's chunk come from one read of each chunk.

    The chunk must fit the task beside one block.  A chunk read once keeps its
    blocks on the worker that read it, so where the split is for parallelism and
    the chunks do not spread evenly over the task threads (40 on 16), each block
    reads its own rows instead and the blocks are shared out one by one.
    """
    if source is None or rule.budget is None:
        return False
    unit = source.unit
    if unit * source.row_bytes + rule.task_bytes > rule.budget:
        return False
    return rule.limit != "parallelism" or (-(-n_rows // unit)) % max(1, rule.threads or 1) == 0


def derive_row_source(Y: da.Array, X: da.Array, derive: Callable[[da.Array], da.Array]
                      ) -> da.Array:
    """Let the planner re-read ``Y = derive(X)`` through ``X``'s store.

    ``Y`` is made from ``X`` row block by row block (columns appended, a dtype
    cast); when ``X`` itself carries a
    :class:`~distsketch.graph.row_sources.RowSource`, ``Y`` gets the derived
    source, so that smaller blocks of ``Y`` re-read ``X`` at that size and
    derive again inside the task that uses them.  Returns ``Y`` itself.
    """
    source = row_source_of(X, derived=False)
    if source is None or not isinstance(Y, da.Array) or Y.shape[0] != X.shape[0]:
        return Y
    return attach_row_source(Y, source.derived(derive, input_bytes_per_row(Y)))


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

    def _in_driver(self) -> bool:
        # one block: no thread pool; in the driver unless a cluster holds the data
        return self.data.npartitions == 1 and (not self.lazy or active_client() is None)

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
        self.plan = log_plan(self.plan, name)
        out = map_rows(func, self.data, *operands, n_out=n_out, dtype=dtype, kwargs=kwargs,
                       bytes_per_row=self.bytes_per_row, fixed_bytes=self.fixed_bytes,
                       check_finite=check_finite, name=name, where=where,
                       row_start=self.row_start)
        if self.lazy:
            # device blocks were checked on the device by FiniteRows: a writer need not again
            return mark_checked(out) if isinstance(func, FiniteRows) and \
                is_array_api(getattr(out, "_meta", None)) else out
        if self._in_driver():
            return compute(out, progress=False, scheduler="sync")[0]
        return compute_array(out, progress=progress)

    def reduce(self, summary: Any, *operands: Any, split_every: int = 8, name: str | None = None,
               check_finite: bool = True, where: str = "input", progress: bool | None = None,
               lazy: bool = False, state_bytes: float | None = None) -> Any:
        """Tree-reduce ``summary`` over the blocks and return the merged state.

        With ``lazy=True`` the reduction is returned as a ``Delayed`` instead.
        ``split_every`` is the smallest merge fan-in (see
        :func:`~distsketch.graph.planner.choose_fan_in`); ``state_bytes``, the
        size of one state when known, holds merge tasks to the budget.

        Notes
        -----
        Memory per chunk task: the plan's ``task_bytes``; per merge task
        ``fan_in + 1`` states.  Merges run where the states are (on the
        workers); only the final state travels to the caller.
        """
        label = name or type(summary).__name__.lower()
        fan, depth = choose_fan_in(self.plan.n_blocks, split_every, state_bytes,
                                   budget=self.plan.budget, what=label)
        merge = int((fan + 1) * state_bytes) if state_bytes else None
        self.plan = log_plan(replace(self.plan, fan_in=fan, depth=depth, merge_bytes=merge), label)
        # device blocks: the input checks' flags ride with the states, read once at the root
        flagged = (FlaggedSummary(summary, where) if check_finite and not lazy
                   and is_array_api(getattr(self.data, "_meta", None)) else None)
        red = tree_reduce(flagged or summary, self.data, *operands, split_every=split_every,
                          bytes_per_row=self.bytes_per_row, fixed_bytes=self.fixed_bytes,
                          check_finite=check_finite and flagged is None, name=label,
                          where=where, row_start=self.row_start, state_bytes=state_bytes)
        if lazy:
            return red
        if self._in_driver():
            state = compute(red, progress=False, scheduler="sync")[0]
        else:
            state = compute(red, progress=progress)[0]
        if flagged is not None:
            state = flagged.settle(state, lambda row: self._recheck(row, where))
        # blocks of another namespace (dask of CuPy) merged on their device: the small merged
        # state comes to the host, where fits finalise it and keep their learned attributes
        return host_tree(state) if is_array_api(getattr(self.data, "_meta", None)) else state

    def _recheck(self, row: int, where: str) -> None:
        # the block starting at global row `row` was flagged: its synchronous check names it
        starts = [int(v) for v in row_offsets(self.data.chunks[0], self.row_start)]
        block = compute(self.data.blocks[starts.index(int(row))], progress=False)[0]
        check_finite_rows(block, int(row), where)


def plan_rows(X: Any, *, footprint: Footprint | None = None, block_rows: int | None = None,
              row_start: int = 0, align: int | None = None) -> RowBlocks | InProcessBlocks:
    """Plan the row blocks of ``X`` for one stage.

    Parameters
    ----------
    X : ndarray, sparse matrix, array of another namespace or dask array of shape (n, d)
        NumPy is cut to the plan; an in-memory array of another namespace
        (CuPy, array-api-strict) gets the same plan and runs in this process
        (:class:`~distsketch.graph.inprocess.InProcessBlocks`); a dask array's blocks larger than the plan
        are split (re-read at the planned size when its reader attached a
        :class:`~distsketch.graph.row_sources.RowSource`), smaller ones kept.
    footprint : Footprint, optional
        The stage's memory per task, as its op or summary declares it
        (per row: input + output + temporaries; fixed).  ``None``: unknown,
        a multiple of the input row is assumed.
    block_rows : int, optional
        Rows per block, overriding the plan.
    row_start : int, default 0
        Global index of the first row of ``X`` (rows appended to earlier data
        continue its numbering).
    align : int, optional
        Block rows a multiple of this (default for a registered store: its
        chunk rows).

    Returns
    -------
    RowBlocks
    """
    footprint = footprint or Footprint()
    bytes_per_row, fixed_bytes = footprint.per_row, footprint.fixed
    lazy = isinstance(X, da.Array)
    if not lazy and is_array_api(X):
        return _in_process(X, bytes_per_row, fixed_bytes, block_rows, row_start, align)
    if not lazy and not hasattr(X, "tocsr"):
        X = np.asarray(X)
    row_bytes = input_bytes_per_row(X)
    if X.ndim != 2:
        data = X if lazy else da.from_array(X)
        return RowBlocks(data, _plan_of(tuple(data.chunks[0]), row_bytes, bytes_per_row,
                                        fixed_bytes), row_start, lazy, bytes_per_row, fixed_bytes)
    n = X.shape[0]
    if lazy:
        # the store X was read from (also that of an array derived from one, for its
        # chunk rows), and the source that re-reads X itself
        store = row_source_of(X)
        own = row_source_of(X, derived=False)
        unit = align or (store.unit if store is not None else None)
        rule = choose_block_rows(n, row_bytes, bytes_per_row, fixed_bytes, align=unit)
        if store is not None:
            _check_store_chunk(store.unit, store.row_bytes, rule, store.where)
        data = whole_rows(X)
        if block_rows is not None:
            data = (_split(data, int(block_rows), own, exact=True) if own is not None else
                    rechunk(data, {0: int(block_rows)}))
            limit = "block_rows"
        elif max(data.chunks[0], default=0) > rule.block_rows:
            once = _read_once(store, n, rule)
            data, limit = _split(data, rule.block_rows, own, once), rule.limit
        else:
            limit = "chunks"
        plan = _plan_of(tuple(data.chunks[0]), row_bytes, bytes_per_row, fixed_bytes,
                        like=rule, limit=limit)
    else:
        plan = _in_memory_plan(n, row_bytes, bytes_per_row, fixed_bytes, block_rows, align)
        data = _as_blocks(X, plan.block_rows)
    return RowBlocks(data, plan, row_start, lazy, bytes_per_row, fixed_bytes)


def _in_memory_plan(n: int, row_bytes: int, bytes_per_row: float | None, fixed_bytes: float,
                    block_rows: int | None, align: int | None) -> BlockPlan:
    rule = choose_block_rows(n, row_bytes, bytes_per_row, fixed_bytes, align=align)
    if block_rows is None:
        return rule
    return _plan_of(_cut(n, int(block_rows)), row_bytes, bytes_per_row, fixed_bytes, like=rule,
                    limit="block_rows")


def _in_process(X: Any, bytes_per_row: float | None, fixed_bytes: float,
                block_rows: int | None, row_start: int, align: int | None) -> InProcessBlocks:
    # an in-memory array of another namespace: NumPy's plan, run in this process
    plan = _in_memory_plan(X.shape[0], input_bytes_per_row(X), bytes_per_row, fixed_bytes,
                           block_rows, align)
    return InProcessBlocks(X, plan, row_start, bytes_per_row, fixed_bytes)


def map_blocks(X: Any, func: Callable[..., np.ndarray], *operands: Any, n_out: int, dtype: Any,
               kwargs: dict | None = None, footprint: Footprint | None = None,
               row_start: int = 0, block_rows: int | None = None,
               name: str = "map-rows", progress: bool | None = None) -> Any:
    """Map ``func`` over the row blocks of ``X``; the result is the kind of ``X``.

    ``plan_rows(X, ...).map(func, ...)`` in one call: see :func:`plan_rows`
    and :meth:`RowBlocks.map`.  ``footprint`` is the map's own declaration
    (its op's ``*_footprint`` function); ``None`` assumes a multiple of the
    input row.
    """
    blocks = plan_rows(X, footprint=footprint, block_rows=block_rows, row_start=row_start)
    return blocks.map(func, *operands, n_out=n_out, dtype=dtype, kwargs=kwargs, name=name,
                      progress=progress)


def reduce_blocks(summary: Any, X: Any, *operands: Any, split_every: int = 8,
                  footprint: Footprint | None = None, row_start: int = 0,
                  block_rows: int | None = None, progress: bool | None = None,
                  name: str | None = None, where: str = "input") -> Any:
    """Tree-reduce ``summary`` over ``X`` (NumPy, sparse or dask) and return the state.

    ``plan_rows(X, ...).reduce(summary, ...)`` in one call: see
    :func:`plan_rows` and :meth:`RowBlocks.reduce`.  The memory of a chunk
    task and of one state is the summary's own declaration,
    ``summary.footprint(n_features, itemsize)``
    (:meth:`~distsketch.summaries.base.Summary.footprint`), unless
    ``footprint`` is given (a map fused into the chunk adds its own).  With the
    dask config ``distsketch.engine`` it runs on the pass engine (:mod:`distsketch.graph.engine`).
    """
    if footprint is None:
        footprint = declared_footprint(summary, X)
    blocks = plan_rows(X, footprint=footprint, block_rows=block_rows, row_start=row_start)
    if isinstance(blocks, RowBlocks) and wants_engine(blocks.data):  # config distsketch.engine
        return reduce_with_engine(blocks, summary, *operands, split_every=split_every,
                                  name=name, state_bytes=footprint.state, where=where,
                                  progress=progress)
    return blocks.reduce(summary, *operands, split_every=split_every, name=name,
                         progress=progress, state_bytes=footprint.state, where=where)


def declared_footprint(summary: Any, X: Any) -> Footprint:
    """The footprint ``summary`` declares for input ``X`` (unknown when it declares none)."""
    declare = getattr(summary, "footprint", None)
    if declare is None:
        return Footprint()
    d = int(X.shape[1]) if getattr(X, "ndim", 2) == 2 else 1
    itemsize = int(getattr(getattr(X, "dtype", None), "itemsize", 8) or 8)
    return declare(d, itemsize)


def to_numpy(X: Any) -> np.ndarray:
    """Materialise a (small) dask or NumPy array (an array of another namespace: a host copy)."""
    if isinstance(X, da.Array):
        return to_host(compute(X, progress=False)[0])
    return np.asarray(to_host(X))
