"""Rows held in memory across the passes of one fit: :func:`cached_rows`.

An iterative fit (Falkon's CG: one pass per iteration) reads its input many
times.  When the input is a lazy dask array (a Zarr store, a chain of maps) whose
blocks fit the row cache's budget, the fit reads it once and every later pass
works on the blocks held in memory: in this process on a local scheduler, on the
workers that read them under ``distributed`` (on the GPU when the blocks are
CuPy arrays).  The held rows re-read themselves where the planner would have
re-read the store (the store's :class:`~distsketch.graph.row_sources.RowSource`,
answered from memory), so every pass has the same blocks and gives the same
results bit for bit; only the reads go.

The dask config ``distsketch.cache-rows`` decides: ``"auto"`` (default) holds
the rows when they take at most :data:`CACHE_SHARE` of the memory the tasks of
the active scheduler may use (:func:`~distsketch.graph.budget.cluster_resources`:
the per-task budget times the task threads), a size (bytes or ``"8GiB"``) holds
them when they take at most that, and ``False`` (or ``"off"``) never does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import dask
from dask.base import tokenize
from dask.utils import parse_bytes

from distsketch.errors import ConfigError
from distsketch.graph.arrays import renamed
from distsketch.graph.budget import cluster_resources
from distsketch.graph.row_sources import (
    RowSource,
    attach_row_source,
    detach_row_source,
    row_source_of,
)
from distsketch.graph.runtime import persist, rechunk
from distsketch.validation.finite import is_dask

__all__ = ["CACHE_KEY", "CACHE_SHARE", "cache_budget", "cached_rows"]

#: the dask config key of the row cache
CACHE_KEY = "distsketch.cache-rows"
#: share of the tasks' memory (budget × threads) that ``"auto"`` lets held rows take: the
#: passes' own tasks keep the rest
CACHE_SHARE = 0.5

_OFF = ("off", "false", "no", "0", "none")


def cache_budget() -> tuple[int, str]:
    """Bytes of rows the cache may hold, and where that number comes from.

    Raises
    ------
    ConfigError
        ``distsketch.cache-rows`` is neither ``"auto"``, off, nor a size.
    """
    value = dask.config.get(CACHE_KEY, "auto")
    if value is False or value is None or (isinstance(value, str) and value.strip().lower() in _OFF):
        return 0, f"{CACHE_KEY} off"
    if value is True or (isinstance(value, str) and value.strip().lower() == "auto"):
        res = cluster_resources()
        return (int(CACHE_SHARE * res.task_bytes * res.threads),
                f"{CACHE_SHARE:g} x {res.threads} task thread(s) x {res.task_bytes} bytes "
                f"({res.source})")
    try:
        size = int(parse_bytes(value)) if isinstance(value, str) else int(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"dask config {CACHE_KEY} = {value!r} is not 'auto', 'off' or a size; "
                          "use e.g. dask.config.set({'distsketch.cache-rows': '8GiB'}) or "
                          "DASK_DISTSKETCH__CACHE_ROWS=off.") from exc
    if size < 0:
        raise ConfigError(f"dask config {CACHE_KEY} = {value!r} is negative; use a size, "
                          "'auto' or 'off'.")
    return size, CACHE_KEY


def _holdable(X: Any) -> bool:
    # dense blocks, whose bytes the array knows (sparse blocks: nbytes says nothing)
    return is_dask(X) and not hasattr(getattr(X, "_meta", None), "tocsr")


def _in_memory(X: Any) -> bool:
    # no task to run: every block is data already (an in-memory array, a persisted one)
    from dask._task_spec import DataNode, GraphNode

    def is_task(node: Any) -> bool:
        if isinstance(node, GraphNode):
            return not isinstance(node, DataNode)
        return isinstance(node, tuple) and bool(node) and callable(node[0])

    return not any(is_task(node) for node in dict(X.__dask_graph__()).values())


@contextlib.contextmanager
def cached_rows(X: Any, what: str = "rows") -> Iterator[Any]:
    """``X`` with its blocks held in memory for the block of code, when the cache allows.

    Parameters
    ----------
    X : array or dask array of shape (n, d)
        Anything but a lazy dense dask array is yielded as it is.
    what : str
        Names the read in a fit's progress report (``<what>-cache``).

    Yields
    ------
    X, or the same array with its blocks computed once and held.

    Notes
    -----
    Memory: ``X.nbytes`` held until the block ends (checked against
    :func:`cache_budget`); one pass over X to fill it, then none.
    """
    if not _holdable(X) or _in_memory(X):
        yield X
        return
    budget, _ = cache_budget()
    if not 0 < X.nbytes <= budget:
        yield X
        return
    held = persist(renamed(X, f"{what}-cache-{tokenize(X.name)}"))
    source = row_source_of(X, derived=False)
    if source is not None:
        # the planner cuts held rows where it would have re-read the store: the same blocks
        def reopen(rows: int) -> Any:
            return rechunk(held, {0: int(rows)})

        attach_row_source(held, RowSource(reopen, source.unit, source.where, source.row_bytes))
    try:
        yield held
    finally:
        detach_row_source(held)  # its source refers back to it: the blocks go with the fit
