"""The merge tree of :func:`~distsketch.graph.blocks.merge_tree`, folded as states arrive."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from distsketch.graph.runtime import task_blas

__all__ = ["TreeFold", "merge_levels", "range_level"]


def merge_levels(n_leaves: int, fan_in: int) -> int:
    """Levels of merges below the root that :func:`~distsketch.graph.blocks.merge_tree` builds."""
    levels, n = 0, max(1, int(n_leaves))
    while -(-n // fan_in) > 1:
        n, levels = -(-n // fan_in), levels + 1
    return levels


def range_level(n_leaves: int, fan_in: int, n_workers: int) -> int:
    """The tree level whose nodes the workers return: the highest with ≥ ``n_workers`` nodes.

    A node at level ``k`` covers ``fan_in ** k`` consecutive leaves (fewer at
    the end), so ranges of that many blocks split the work without changing
    a merge; ``0`` (one leaf per node) when there are fewer leaves than workers.
    """
    top = merge_levels(n_leaves, fan_in)
    for k in range(top, 0, -1):
        if -(-n_leaves // fan_in ** k) >= n_workers:
            return k
    return 0


class TreeFold:
    """Merges states as they come, in the order and grouping of ``merge_tree``.

    States (or nodes of level ``base``) are pushed in index order; levels
    below ``top`` merge every ``fan_in`` consecutive nodes into one node of
    the next level.  :meth:`result` merges the trailing, partial groups and
    returns the nodes of level ``top``: with ``top = merge_levels(n, fan_in)``
    the root is ``summary.merge(result())``, exactly the dask tree's root.
    At most ``fan_in`` states per level are held.
    """

    def __init__(self, merge: Callable[[list], Any], fan_in: int, top: int):
        self.merge = merge
        self.fan_in = int(fan_in)
        self.levels: list[list[Any]] = [[] for _ in range(int(top) + 1)]

    def push(self, state: Any, level: int = 0) -> None:
        """Add the next node of ``level``."""
        self.levels[level].append(state)
        while level < len(self.levels) - 1 and len(self.levels[level]) == self.fan_in:
            group, self.levels[level] = self.levels[level], []
            self.levels[level + 1].append(self._merge(group))
            level += 1

    def _merge(self, group: list[Any]) -> Any:
        with task_blas():
            return self.merge(group)

    def result(self) -> list[Any]:
        """The nodes of the top level, after merging every partial group below it."""
        for level in range(len(self.levels) - 1):
            if self.levels[level]:
                group, self.levels[level] = self.levels[level], []
                self.push(self._merge(group), level + 1)
        return self.levels[-1]

    def root(self) -> Any:
        """The root: the merge of the top level's nodes (a merge also of a single one)."""
        return self._merge(self.result())
