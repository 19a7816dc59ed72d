"""Row blocks of an in-memory array of another namespace, run in this process.

dask cannot hold every library's arrays as blocks (``array-api-strict`` refuses
NumPy calls), and a CuPy array already on the GPU gains nothing from a
scheduler.  Such input runs the planner's blocks here, in row order, merging
states by the same tree as :func:`~distsketch.graph.blocks.merge_tree` (so the
results of dask's synchronous scheduler); the blocks' checks are read once per
pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from distsketch.graph.blocks import BlockTask
from distsketch.graph.budget import check_task_memory
from distsketch.graph.planner import BlockPlan, choose_fan_in, log_plan
from distsketch.graph.runtime import task_blas
from distsketch.ops.namespace import host_tree, namespace
from distsketch.validation.finite import deferred_checks

__all__ = ["InProcessBlocks"]


class InProcessBlocks:
    """Planned row blocks of an in-memory non-NumPy array (see the module docstring).

    The same ``map`` / ``reduce`` interface as :class:`~distsketch.graph.plan.RowBlocks`;
    ``data`` is the array itself.
    """

    lazy = False

    def __init__(self, data: Any, plan: BlockPlan, row_start: int,
                 bytes_per_row: float | None, fixed_bytes: float):
        self.data = data
        self.plan = plan
        self.row_start = int(row_start)
        self.bytes_per_row = bytes_per_row
        self.fixed_bytes = float(fixed_bytes)

    def _blocks(self) -> list[tuple[int, Any]]:
        # (global first row, block) for each planned block, in row order
        n, rows = int(self.data.shape[0]), max(1, int(self.plan.block_rows))
        return [(self.row_start + s, self.data[s:min(n, s + rows), ...])
                for s in range(0, max(n, 1), rows)]

    def map(self, func: Callable[..., Any], *operands: Any, n_out: int, dtype: Any,
            kwargs: dict | None = None, name: str = "map-rows", check_finite: bool = True,
            where: str = "input", progress: bool | None = None) -> Any:
        """``func(block, row_start_of_block, *operands, **kwargs)`` on every block, concatenated
        in the input's namespace."""
        self.plan = log_plan(self.plan, name)
        if self.bytes_per_row is not None:
            check_task_memory(name, self.plan.block_rows, self.bytes_per_row, self.fixed_bytes)
        task = BlockTask(func, dict(kwargs or {}), check_finite, where, self.bytes_per_row,
                          self.fixed_bytes)
        with deferred_checks():  # every block's check flags read once, after the last block
            outs = [task(block, start, *operands) for start, block in self._blocks()]
        return outs[0] if len(outs) == 1 else namespace(*outs).concat(outs, axis=0)

    def reduce(self, summary: Any, *operands: Any, split_every: int = 8, name: str | None = None,
               check_finite: bool = True, where: str = "input", progress: bool | None = None,
               lazy: bool = False, state_bytes: float | None = None) -> Any:
        """Chunk every block and merge the states ``fan_in`` at a time, level by level.

        States are computed and merged on the input's device; the merged state is
        returned as host NumPy (also with ``lazy=True``: there is no graph here).
        """
        label = name or type(summary).__name__.lower()
        fan, depth = choose_fan_in(self.plan.n_blocks, split_every, state_bytes,
                                   budget=self.plan.budget, what=label)
        self.plan = log_plan(replace(self.plan, fan_in=fan, depth=depth), label)
        task = BlockTask(summary.chunk, {}, check_finite, where, self.bytes_per_row,
                          self.fixed_bytes)
        with deferred_checks():  # every block's check flags read once, after the last block
            states = [task(block, start, *operands) for start, block in self._blocks()]
        # the fan-in tree_reduce gives dask (without the budget), so the merges are the same
        fan, _ = choose_fan_in(len(states), split_every, state_bytes, what=label)
        while True:  # merge_tree's grouping: consecutive states; the root is always a merge
            groups = [states[i:i + fan] for i in range(0, len(states), fan)]
            with task_blas():
                states = [summary.merge(group) for group in groups]
            if len(groups) == 1:
                # the merged state is small: it comes to the host for the fit's finalisation
                return host_tree(states[0])
