"""Blockwise maps over row blocks and tree reductions of mergeable summaries.

:func:`map_rows` and :func:`tree_reduce` are the only graph builders that
algorithms use: each block's function learns the global number of its first
row, summaries are merged ``fan_in`` at a time up :func:`merge_tree`, and
operands enter the graph once, as single-chunk arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import dask.array as da
import numpy as np
from dask.array.utils import meta_from_array
from dask.base import tokenize
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph
from dask.layers import ArrayValuesDep

from distsketch.graph.budget import check_task_memory
from distsketch.graph.devices import operands_on_device
from distsketch.graph.planner import choose_fan_in
from distsketch.graph.runtime import lean_graphs, rechunk, task_blas
from distsketch.ops.namespace import is_sparse, to_host
from distsketch.validation.finite import deferred_checks, is_array_api

__all__ = ["as_operand", "block_starts", "map_rows", "merge_tree", "row_offsets", "tree_reduce",
           "whole_rows"]


def row_offsets(chunks: Sequence[int], start: int = 0) -> np.ndarray:
    """Global index of the first row (or column) of each block, the first at ``start``."""
    ends = np.cumsum(np.asarray(chunks, dtype=np.int64))
    return (int(start) + np.concatenate(([0], ends[:-1]))).astype(np.int64)


def block_starts(chunks: Sequence[int], start: int = 0) -> ArrayValuesDep:
    """The blocks' global first rows as a blockwise argument (index ``i``), written into
    each block's task as a plain int: numbering rows costs no task of its own."""
    offs = row_offsets(chunks, start)
    return ArrayValuesDep((tuple(chunks),), {(i,): int(v) for i, v in enumerate(offs)})


def as_operand(value: Any) -> da.Array:
    """Wrap a NumPy operand as a one-chunk dask array (one key in the graph)."""
    if isinstance(value, da.Array):
        return rechunk(value, value.shape) if value.npartitions > 1 else value
    arr = np.asarray(to_host(value))  # host operands; tasks move them to their block's device
    return da.from_array(arr, chunks=arr.shape or (), name="operand-" + tokenize(arr))


def _boxed(state: Any) -> np.ndarray:
    # a one-element object array: one summary state per block of a blockwise array
    out = np.empty((1,), dtype=object)
    out[0] = state
    return out


class BlockTask:
    """Callable run on one block: offset, finite check, BLAS pinning.

    The task of a map and of a summary's ``chunk`` (``boxed``: its state in a
    one-element object array).  The projected memory is kept on the task so
    that measurements can be compared with the plan.
    """

    def __init__(self, func: Callable, kwargs: dict, check_finite: bool, where: str,
                 bytes_per_row: float | None = None, fixed_bytes: float = 0.0,
                 boxed: bool = False):
        self.func = func
        self.kwargs = kwargs
        self.check_finite = check_finite
        self.where = where
        self.bytes_per_row = bytes_per_row
        self.fixed_bytes = float(fixed_bytes)
        self.boxed = boxed

    def __call__(self, block, offset, *operands):
        off = int(offset)
        if is_array_api(block):
            operands_on_device(operands, block)  # uploaded once per process, not per block
        # device blocks: the checks' flags are read once, when the scope ends (the task's,
        # or the whole pass's when it runs in this process); NumPy blocks are checked here
        with deferred_checks() as checks:
            if self.check_finite:
                checks.input(block, off, self.where)
            with task_blas():
                out = self.func(block, off, *operands, **self.kwargs)
        return _boxed(out) if self.boxed else out


def _operand_args(operands: Sequence[Any]) -> list[Any]:
    # every operand axis gets its own index, never one of the output's ("i", "j", "z"): one
    # letter per axis ran out at 49 axes (e.g. cross-validation over 5 gammas' fold weights)
    args: list[Any] = []
    for n, op in enumerate(operands):
        op_da = as_operand(op)
        args += [op_da, tuple(f"op{n}.{a}" for a in range(op_da.ndim)) or None]
    return args


def dense_meta(X: Any, ndim: int, dtype: Any) -> Any:
    """An empty ``ndim``-D array of ``dtype`` of the kind of X's blocks, for ``meta=``.

    Dense blocks keep their array type (a CuPy input gives CuPy blocks); a
    sparse input's per-block results are dense NumPy.
    """
    meta = getattr(X, "_meta", None)
    if meta is None or is_sparse(meta):
        return np.empty((0,) * ndim, dtype=dtype)
    return meta_from_array(meta, ndim=ndim, dtype=dtype)


def whole_rows(X: da.Array) -> da.Array:
    """``X`` with one column block, so every block holds whole rows."""
    return rechunk(X, {1: X.shape[1]}) if X.ndim == 2 and len(X.chunks[1]) > 1 else X


def map_rows(
    func: Callable[..., np.ndarray],
    X: da.Array,
    *operands: Any,
    n_out: int,
    dtype: Any,
    kwargs: dict | None = None,
    bytes_per_row: float | None = None,
    fixed_bytes: float = 0.0,
    check_finite: bool = True,
    name: str = "map-rows",
    where: str = "input",
    row_start: int = 0,
) -> da.Array:
    """Apply ``func`` to every row block of ``X``.

    Parameters
    ----------
    func : callable
        ``func(block, row_offset, *operands, **kwargs)`` returning an array of
        shape ``(block.shape[0], n_out)``.  Runs with BLAS pinned to 1 thread.
    X : dask.array.Array of shape (n, d)
        Input; column chunks are merged so each block holds whole rows.
    *operands : array_like
        Arrays every block needs (passed once as single-chunk keys).
    n_out : int
        Number of output columns.
    dtype : dtype
        Output dtype.
    kwargs : dict, optional
        Small keyword arguments for ``func``.
    bytes_per_row, fixed_bytes : float, optional
        Per-task memory model, checked against the budget before building.
    check_finite : bool, default True
        Fail with the first bad global row on NaN/Inf.
    name : str
        Prefix of the task names.
    where : str
        Name of the input for error messages (a path or array name).
    row_start : int, default 0
        Global index of the first row of ``X``.

    Returns
    -------
    dask.array.Array of shape (n, n_out)
        Same row chunks as ``X``.

    Notes
    -----
    Memory per task: ``bytes_per_row * block_rows + fixed_bytes``.  No
    communication beyond one copy of each operand per worker.
    """
    X = whole_rows(X)
    if bytes_per_row is not None:
        check_task_memory(name, max(X.chunks[0]), bytes_per_row, fixed_bytes)
    task = BlockTask(func, dict(kwargs or {}), check_finite, where, bytes_per_row, fixed_bytes)
    meta = dense_meta(X, 2, dtype)
    return da.blockwise(
        task, "iz", X, "ij", block_starts(X.chunks[0], row_start), "i",
        *_operand_args(operands),
        new_axes={"z": n_out}, dtype=dtype, concatenate=True, align_arrays=False,
        name=f"{name}-" + tokenize(func, X.name, operands, task.kwargs, n_out, int(row_start)),
        meta=meta,
    )


def _flatten(nested: Any) -> list[Any]:
    flat: list[Any] = []
    stack = [nested]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            stack.extend(reversed(v))
        else:
            flat.extend(np.asarray(v, dtype=object).ravel().tolist())
    return flat


class _Combine:
    """One merge of the tree: states in, the merged state (wrapped) out."""

    def __init__(self, summary: Any):
        self.summary = summary

    def __call__(self, parts):
        with task_blas():
            state = self.summary.merge(_flatten(parts))
        # wrapped: a state that is itself a list must not be flattened by the next merge
        return _boxed(state)


class _Aggregate(_Combine):
    """The root merge: returns the state itself."""

    def __call__(self, parts):
        return super().__call__(parts).item()


def merge_tree(keys: list, fan_in: int, combine: Callable, aggregate: Callable,
               name: str) -> tuple[dict, Any]:
    """Tasks merging ``keys`` ``fan_in`` at a time, level by level, into one root.

    Consecutive keys are merged together (the grouping of
    :func:`dask.array.reduction`), and the root is always a merge, also of a
    single key.

    Returns
    -------
    (dict, key)
        The merge tasks and the root's key (``name``).
    """
    dsk: dict = {}
    level = 0
    while True:
        groups = [keys[i:i + fan_in] for i in range(0, len(keys), fan_in)]
        if len(groups) == 1:
            dsk[name] = (aggregate, list(groups[0]))
            return dsk, name
        keys = []
        for i, group in enumerate(groups):
            key = (f"{name}-partial{level}", i)
            dsk[key] = (combine, list(group))
            keys.append(key)
        level += 1


def tree_reduce(
    summary: Any,
    X: da.Array,
    *operands: Any,
    split_every: int = 8,
    bytes_per_row: float | None = None,
    fixed_bytes: float = 0.0,
    check_finite: bool = True,
    name: str | None = None,
    where: str = "input",
    row_start: int = 0,
    state_bytes: float | None = None,
) -> Any:
    """Tree-reduce a mergeable summary over the row blocks of ``X``.

    Parameters
    ----------
    summary : Summary
        Object with ``chunk(block, row_offset, *operands) -> state`` and
        ``merge(list_of_states) -> state`` (associative).
    X : dask.array.Array of shape (n, d)
    *operands : array_like
        Arrays every chunk call needs (one key each in the graph).
    split_every : int, default 8
        Smallest fan-in of a merge: more than ``split_every³`` blocks raise it
        so the tree is at most 3 merges deep
        (:func:`~distsketch.graph.planner.choose_fan_in`).
    bytes_per_row, fixed_bytes : float, optional
        Per-task memory model of ``chunk``, checked against the budget.
    check_finite : bool, default True
        Fail with the first bad global row on NaN/Inf.
    name : str, optional
        Task-name prefix.
    where : str
        Name of the input for error messages.
    row_start : int, default 0
        Global index of the first row of ``X``: ``chunk`` sees global rows.
    state_bytes : float, optional
        Size of one state; when given, the fan-in is capped so that a merge
        task (its inputs and its result) fits the budget.

    Returns
    -------
    dask.delayed.Delayed
        Computes to the merged state (call ``summary.finalize`` on it).  States
        may be any picklable object (dicts, arrays, lists, tuples).

    Notes
    -----
    Memory per merge task: ``(fan_in + 1) x state``.  Merges run as tasks
    where their inputs are (on the workers under ``distributed``); only the
    final state is returned.
    """
    X = whole_rows(X)
    label = name or type(summary).__name__.lower()
    fan_in, _ = choose_fan_in(X.numblocks[0], split_every, state_bytes, what=label)
    if bytes_per_row is not None:
        check_task_memory(label, max(X.chunks[0]), bytes_per_row, fixed_bytes)
    token = tokenize(summary, X.name, operands, int(row_start))
    states = da.blockwise(
        BlockTask(summary.chunk, {}, check_finite, where, bytes_per_row, fixed_bytes, boxed=True),
        "i", X, "ij",
        block_starts(X.chunks[0], row_start), "i",
        *_operand_args(operands), dtype=object, concatenate=True, align_arrays=False,
        adjust_chunks={"i": 1}, meta=np.empty((0,), dtype=object),
        name=f"{label}-chunk-{token}",
    )
    with lean_graphs():
        # read and chunk fused per block, keyed by the chunk's key
        parts = states.to_delayed(optimize_graph=True).ravel().tolist()
    tree, root = merge_tree([p.key for p in parts], fan_in, _Combine(summary),
                            _Aggregate(summary), f"{label}-merge-{token}")
    graph = HighLevelGraph.from_collections(root, tree, dependencies=parts)
    return Delayed(root, graph)
