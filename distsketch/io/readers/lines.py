"""Bounded line reads for line-based text readers (CSV).

A text file without line breaks (a 2 GB "one-line CSV") would otherwise be
read into memory whole before anything could refuse it.  A line may hold at
most an eighth of the per-task memory budget in characters: its text and
its parsed values (at most one float64 per two characters) then fit one task.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import IO

from distsketch.errors import MemoryBudgetError

__all__ = ["MIN_LINE_CHARS", "line_reader", "max_line_chars"]

#: the limit is never below this, whatever the budget
MIN_LINE_CHARS = 4096


def max_line_chars() -> int:
    """Most characters one line may have: the per-task budget / 8 (at least 4096)."""
    from distsketch.graph import task_memory_budget

    return max(MIN_LINE_CHARS, task_memory_budget() // 8)


def line_reader(f: IO[str], source: Path | str) -> Callable[[int], str]:
    """``readline(line_number)`` for ``f``, refusing a line longer than :func:`max_line_chars`.

    The 1-based number of the line about to be read is for the message; at
    most the limit is read before a line is refused.
    """
    limit = max_line_chars()

    def readline(line_number: int) -> str:
        line = f.readline(limit + 1)
        if len(line) > limit and not line.endswith(("\n", "\r")):
            raise MemoryBudgetError(
                f"{source}, line {line_number}: longer than {limit} characters (the limit of one "
                "line, an eighth of the per-task memory budget); nothing was ingested. Is it "
                "line-delimited text? A row that wide belongs in a .npy file; or raise the budget "
                "(dask config distsketch.task-memory / DISTSKETCH_TASK_MEMORY).")
        return line

    return readline
