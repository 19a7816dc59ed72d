"""The only layer that builds Dask graphs; it knows no particular algorithm."""

from distsketch.graph.arrays import as_dask, rechunk_rows
from distsketch.graph.blocks import (
    as_operand,
    block_starts,
    map_rows,
    row_offsets,
    tree_reduce,
)
from distsketch.graph.budget import (
    Resources,
    check_operator_memory,
    check_task_memory,
    cluster_resources,
    rows_for_budget,
    task_memory_budget,
)
from distsketch.graph.plan import (
    RowBlocks,
    map_blocks,
    plan_rows,
    reduce_blocks,
    register_row_source,
    to_numpy,
)
from distsketch.graph.planner import (
    BlockPlan,
    choose_block_rows,
    choose_fan_in,
    last_plan,
    record_plans,
)
from distsketch.graph.runtime import (
    active_client,
    blas_single_thread,
    compute,
    compute_array,
    single_threaded_blas,
)
from distsketch.graph.tiles import persist_rows, row_matvec, tile_matvec

__all__ = [
    "BlockPlan",
    "Resources",
    "RowBlocks",
    "active_client",
    "as_dask",
    "as_operand",
    "blas_single_thread",
    "block_starts",
    "check_operator_memory",
    "check_task_memory",
    "choose_block_rows",
    "choose_fan_in",
    "cluster_resources",
    "compute",
    "compute_array",
    "last_plan",
    "map_blocks",
    "map_rows",
    "persist_rows",
    "plan_rows",
    "rechunk_rows",
    "record_plans",
    "reduce_blocks",
    "register_row_source",
    "row_matvec",
    "row_offsets",
    "rows_for_budget",
    "single_threaded_blas",
    "task_memory_budget",
    "tile_matvec",
    "to_numpy",
    "tree_reduce",
]
