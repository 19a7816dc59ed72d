"""The only layer that builds Dask graphs; it knows no particular algorithm."""

from distsketch.graph.arrays import as_dask, rechunk_rows
from distsketch.graph.blocks import (
    as_operand,
    check_finite_block,
    map_rows,
    row_offsets,
    tree_reduce,
)
from distsketch.graph.budget import check_task_memory, rows_for_budget, task_memory_budget
from distsketch.graph.runtime import (
    active_client,
    blas_single_thread,
    compute,
    compute_array,
    single_threaded_blas,
)
from distsketch.graph.tiles import persist_rows, tile_matvec

__all__ = [
    "active_client",
    "as_dask",
    "as_operand",
    "blas_single_thread",
    "check_finite_block",
    "check_task_memory",
    "compute",
    "compute_array",
    "map_rows",
    "persist_rows",
    "rechunk_rows",
    "row_offsets",
    "rows_for_budget",
    "single_threaded_blas",
    "task_memory_budget",
    "tile_matvec",
    "tree_reduce",
]
