"""Per-task memory budget, checked before anything is computed.

Each map or summary states how many bytes one task needs (as a function of
its block's rows).  :func:`check_task_memory` compares the largest block's
need with the budget and raises :class:`~distsketch.errors.MemoryBudgetError`
with both numbers and the fix.

The budget comes from ``dask.config`` key ``distsketch.task-memory`` (bytes or
a string such as ``"2GiB"``), the environment variable
``DISTSKETCH_TASK_MEMORY``, else 2 GiB.
"""

from __future__ import annotations

import os

import dask
from dask.utils import format_bytes, parse_bytes

from distsketch.errors import ConfigError, MemoryBudgetError

__all__ = ["DEFAULT_TASK_MEMORY", "check_task_memory", "rows_for_budget", "task_memory_budget"]

DEFAULT_TASK_MEMORY = 2 * 2**30


def task_memory_budget() -> int:
    """The per-task memory budget in bytes."""
    value = dask.config.get("distsketch.task-memory", None)
    if value is None:
        value = os.environ.get("DISTSKETCH_TASK_MEMORY")
    if value is None:
        return DEFAULT_TASK_MEMORY
    try:
        return int(parse_bytes(value)) if isinstance(value, str) else int(value)
    except (ValueError, TypeError) as exc:
        raise ConfigError(
            f"distsketch.task-memory={value!r} is not a size; use bytes or e.g. '2GiB'."
        ) from exc


def check_task_memory(what: str, max_block_rows: int, bytes_per_row: float,
                      fixed_bytes: float = 0.0, budget: int | None = None) -> int:
    """Raise if one task of ``what`` would exceed the budget.

    Parameters
    ----------
    what : str
        Name of the operation, for the message.
    max_block_rows : int
        Rows in the largest block.
    bytes_per_row : float
        Working memory per row of a block (inputs, outputs, temporaries).
    fixed_bytes : float
        Memory independent of the block size (operators, summaries).
    budget : int, optional
        Override of :func:`task_memory_budget`.

    Returns
    -------
    int
        The projected bytes of one task.
    """
    budget = task_memory_budget() if budget is None else int(budget)
    need = int(max_block_rows * bytes_per_row + fixed_bytes)
    if need > budget:
        fit_rows = rows_for_budget(bytes_per_row, fixed_bytes, budget)
        hint = (f"rechunk the input to at most {fit_rows} rows per block "
                f"(X.rechunk({{0: {fit_rows}}}))" if fit_rows > 0 else
                "reduce the operator size (n_components, sketch size, landmarks)")
        raise MemoryBudgetError(
            f"{what}: one task needs {format_bytes(need)} "
            f"({max_block_rows} rows x {format_bytes(int(bytes_per_row))}/row + "
            f"{format_bytes(int(fixed_bytes))} fixed) but the per-task budget is "
            f"{format_bytes(budget)}. Fix: {hint}, or raise the budget with "
            f"dask.config.set({{'distsketch.task-memory': '...'}}) / DISTSKETCH_TASK_MEMORY."
        )
    return need


def rows_for_budget(bytes_per_row: float, fixed_bytes: float = 0.0,
                    budget: int | None = None) -> int:
    """Largest number of rows per block that fits the budget (0 if none)."""
    budget = task_memory_budget() if budget is None else int(budget)
    free = budget - fixed_bytes
    if free <= 0 or bytes_per_row <= 0:
        return 0 if free <= 0 else 2**31
    return int(free // bytes_per_row)
