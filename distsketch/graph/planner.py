"""The block planner: rows per block and the reduction tree, from memory and the cluster.

Pure rules, no data (:mod:`distsketch.graph.plan` applies them): :func:`choose_block_rows`
and :func:`choose_fan_in` make a :class:`BlockPlan`; every plan applied is logged at INFO
on the ``"distsketch"`` logger and can be collected with :func:`record_plans`.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field, replace

import dask
from dask.utils import format_bytes, parse_bytes

from distsketch.errors import MemoryBudgetError
from distsketch.graph.budget import cluster_resources, fix_hint, rows_for_budget

__all__ = [
    "BLOCKS_PER_THREAD",
    "INPUT_BLOCK_BYTES",
    "MAX_DEPTH",
    "MIN_PLANNED_ROWS",
    "MIN_SPLIT_BYTES",
    "WORKING_SET_BYTES",
    "BlockPlan",
    "choose_block_rows",
    "choose_fan_in",
    "input_block_bytes",
    "last_plan",
    "log_plan",
    "record_plans",
    "tree_depth",
]

logger = logging.getLogger("distsketch")

INPUT_BLOCK_BYTES = 64 * 2**20
WORKING_SET_BYTES = 256 * 2**20
MIN_PLANNED_ROWS = 256
# Blocks are split for parallelism only down to this working set: below it a
# task costs less than its scheduling.
MIN_SPLIT_BYTES = 4 * 2**20
BLOCKS_PER_THREAD = 4
MAX_DEPTH = 3


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
    budget : int or None
        Per-task budget the plan was made for.
    threads : int or None
        Task threads of the scheduler the plan was made for.
    limit : str
        What set the block size: ``"input"``, ``"working set"``,
        ``"memory budget"``, ``"parallelism"``, ``"chunks"`` (the input's
        own, smaller, blocks) or ``"block_rows"`` (the caller's override).
    source : str
        Where the budget comes from (override, workers, local memory).
    name : str
        The stage planned.
    fan_in, depth : int or None
        Merge fan-in and levels of a tree reduction over the blocks.
    merge_bytes : int or None
        Projected bytes of one merge task (``fan_in + 1`` states).
    """

    block_rows: int
    n_blocks: int
    task_bytes: int
    budget: int | None = field(default=None, compare=False)
    threads: int | None = field(default=None, compare=False)
    limit: str = field(default="input", compare=False)
    source: str = field(default="", compare=False)
    name: str = field(default="", compare=False)
    fan_in: int | None = field(default=None, compare=False)
    depth: int | None = field(default=None, compare=False)
    merge_bytes: int | None = field(default=None, compare=False)

    def __str__(self) -> str:
        head = f"{self.name}: " if self.name else ""
        text = (f"{head}{self.n_blocks} block{'s' if self.n_blocks != 1 else ''} of "
                f"{self.block_rows} rows (set by {self.limit}), "
                f"{format_bytes(self.task_bytes)} per task")
        if self.budget is not None:
            text += f" of a {format_bytes(self.budget)} budget"
            if self.source:
                text += f" ({self.source})"
        if self.threads is not None:
            text += f", {self.threads} task thread{'s' if self.threads != 1 else ''}"
        if self.fan_in is not None:
            text += f"; merge fan-in {self.fan_in}, depth {self.depth}"
            if self.merge_bytes is not None:
                text += f", {format_bytes(self.merge_bytes)} per merge"
        return text


def input_block_bytes() -> int:
    """Input bytes per block when nothing else limits it (dask config
    ``distsketch.block-bytes``, default 64 MiB)."""
    value = dask.config.get("distsketch.block-bytes", INPUT_BLOCK_BYTES)
    return int(parse_bytes(value)) if isinstance(value, str) else int(value)


def choose_block_rows(n_rows: int, input_row_bytes: float, bytes_per_row: float | None = None,
                      fixed_bytes: float = 0.0, budget: int | None = None,
                      align: int | None = None, n_threads: int | None = None) -> BlockPlan:
    """The block-size rule: rows per block for one stage over ``n_rows`` rows.

    In order:

    1. **input**: a block holds at most :func:`input_block_bytes` of input;
    2. **working set**: a stage that states its working memory
       (``bytes_per_row``: input + output + temporaries of one row, and
       ``fixed_bytes``) is held to ``min(budget, 256 MiB)`` so wide outputs do
       not thrash the cache, but not below 256 rows, where per-task overhead
       would dominate;
    3. **memory budget** (hard): ``rows * bytes_per_row + fixed_bytes`` never
       exceeds the budget, down to one row;
    4. **parallelism**: at least ``4 x n_threads`` blocks when each still
       holds 4 MiB of working set and 256 rows;
    5. **alignment**: a multiple of ``align`` (the store's chunk or shard
       rows) when at least one unit fits.

    Parameters
    ----------
    n_rows : int
        Rows of the input.
    input_row_bytes : float
        Bytes of one input row (see :func:`~distsketch.graph.plan.input_bytes_per_row`).
    bytes_per_row : float, optional
        Working memory of the stage per row of a block.
    fixed_bytes : float, default 0
        Memory of one task independent of its rows (operators, states).
    budget : int, optional
        Per-task budget; default from :func:`~distsketch.graph.budget.cluster_resources`.
    align : int, optional
        Make the rows a multiple of this (a store's chunk or shard rows).
    n_threads : int, optional
        Task threads; default from the active scheduler.

    Returns
    -------
    BlockPlan
        Its ``task_bytes`` may exceed the budget only when no block size
        fits (then :func:`~distsketch.graph.check_task_memory` refuses).
    """
    res = cluster_resources() if budget is None or n_threads is None else None
    budget = res.task_bytes if budget is None else int(budget)  # type: ignore[union-attr]
    threads = res.threads if n_threads is None else max(1, int(n_threads))  # type: ignore[union-attr]
    source = res.source if res is not None else "given"
    n = max(int(n_rows), 1)
    per_row = float(bytes_per_row) if bytes_per_row else max(1.0, float(input_row_bytes))
    rows = max(1, int(input_block_bytes() // max(1.0, float(input_row_bytes))))
    limit = "input"
    if bytes_per_row:
        target = min(budget, WORKING_SET_BYTES)
        if target - fixed_bytes > 0:
            soft = max(MIN_PLANNED_ROWS, rows_for_budget(bytes_per_row, fixed_bytes, target))
            if soft < rows:
                rows, limit = soft, "working set" if target < budget else "memory budget"
    hard = max(1, rows_for_budget(per_row, fixed_bytes, budget))
    if hard < rows:
        rows, limit = hard, "memory budget"
    floor = max(MIN_PLANNED_ROWS, math.ceil(MIN_SPLIT_BYTES / per_row))
    spread = max(floor, -(-n // (BLOCKS_PER_THREAD * threads)))
    if spread < rows and spread < n:
        rows, limit = spread, "parallelism"
    if align and 1 < int(align) <= rows:
        rows = rows // int(align) * int(align)
    rows = max(1, min(rows, n))
    return BlockPlan(block_rows=rows, n_blocks=-(-n // rows), task_bytes=int(rows * per_row
                                                                             + fixed_bytes),
                     budget=budget, threads=threads, limit=limit, source=source)


def tree_depth(n_blocks: int, fan_in: int) -> int:
    """Levels of merges that reduce ``n_blocks`` states with fan-in ``fan_in``."""
    depth, n = 0, max(1, int(n_blocks))
    while n > 1:
        n = -(-n // int(fan_in))
        depth += 1
    return depth


def choose_fan_in(n_blocks: int, split_every: int = 8, state_bytes: float | None = None,
                  budget: int | None = None, what: str = "reduction") -> tuple[int, int]:
    """Merge fan-in and depth of a tree reduction over ``n_blocks`` states.

    ``split_every`` is the smallest fan-in; more than ``split_every³`` blocks
    raise it so the tree stays at most 3 merge levels deep (a fan-in of 47
    for 10⁵ blocks).  With a known ``state_bytes`` a merge task, which holds
    its ``fan_in`` inputs and its result, stays within the budget.

    Returns
    -------
    (fan_in, depth) : tuple of int

    Raises
    ------
    MemoryBudgetError
        When not even two states and their merge fit the budget.
    """
    if split_every < 2:
        raise ValueError("split_every must be >= 2")
    n = max(1, int(n_blocks))
    fan = int(split_every)
    while fan ** MAX_DEPTH < n:
        fan += 1
    if state_bytes:
        budget = cluster_resources().task_bytes if budget is None else int(budget)
        cap = int(budget // float(state_bytes)) - 1
        if cap < 2:
            raise MemoryBudgetError(
                f"{what}: merging two states needs {format_bytes(int(3 * state_bytes))} "
                f"({format_bytes(int(state_bytes))} per state) but the per-task budget is "
                f"{format_bytes(budget)}. Fix: {fix_hint(0, 0.0, 3 * state_bytes, budget)}")
        fan = min(fan, cap)
    return fan, tree_depth(n, fan)


_RECORD: ContextVar[list[BlockPlan] | None] = ContextVar("distsketch_plans", default=None)
_LAST: list[BlockPlan] = []


def log_plan(plan: BlockPlan, name: str = "") -> BlockPlan:
    """Name ``plan``, log it at INFO on ``"distsketch"`` and record it."""
    plan = replace(plan, name=name or plan.name)
    logger.info("block plan %s", plan)
    record = _RECORD.get()
    if record is not None:
        record.append(plan)
    _LAST[:] = [plan]
    return plan


@contextlib.contextmanager
def record_plans() -> Iterator[list[BlockPlan]]:
    """Collect every plan applied inside the ``with`` block, in order.

    Examples
    --------
    >>> with record_plans() as plans:          # doctest: +SKIP
    ...     est.fit(X)
    >>> print(*plans, sep="\\n")               # doctest: +SKIP
    """
    plans: list[BlockPlan] = []
    token = _RECORD.set(plans)
    try:
        yield plans
    finally:
        _RECORD.reset(token)


def last_plan() -> BlockPlan | None:
    """The most recent plan applied in this process (None before any)."""
    return _LAST[0] if _LAST else None
