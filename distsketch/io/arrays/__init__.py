"""Row-aligned arrays: opened as validated dask arrays, written, appended to,
their targets and class codes, and their fingerprints.
"""

# the package keeps the names of the module it replaced (distsketch.io.arrays)
from distsketch.io.arrays.access import (
    MAX_CHUNKS,
    ZarrRowReader,
    check_grid,
    consolidate,
    create_array,
    open_array,
    open_zarr,
    split_array_path,
    write_array,
    zarr_store,
)

__all__ = [
    "MAX_CHUNKS",
    "ZarrRowReader",
    "check_grid",
    "consolidate",
    "create_array",
    "open_array",
    "open_zarr",
    "split_array_path",
    "write_array",
    "zarr_store",
]
