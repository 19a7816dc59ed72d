"""Zarr arrays in: validated reads of local paths and URLs, the one place that opens a
path as an array.

Reads go through :class:`ZarrRowReader`, which names the store and the row range
of a low-level failure.  Paths are resolved on the client, so a relative path is
absolute before the graph is built.  Writes (:func:`create_array`,
:func:`write_array`) live in :mod:`distsketch.io.arrays.writes`, re-exported here.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import numpy as np
import zarr
from dask.base import tokenize

from distsketch.errors import InputError, StoreError
from distsketch.graph.arrays import as_dask, from_source, is_dask, store_block_rows, to_dask
from distsketch.graph.devices import blocks_on_device, current_device
from distsketch.graph.plan import input_bytes_per_row
from distsketch.graph.row_sources import RowSource, attach_row_source
from distsketch.io.arrays.small_chunks import warn_small_chunks
from distsketch.io.arrays.stores import ZarrRowReader, consolidate, open_zarr, zarr_store
from distsketch.io.arrays.writes import create_array, write_array
from distsketch.io.storage.safety import split_array_path
from distsketch.io.storage.urls import Location, resolve
from distsketch.ops.device import check_device, device_meta, require_cupy
from distsketch.validation.arrays import check_input, check_shape_dtype

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


#: most storage units (chunks, or shards) distsketch reads from one array; far above any
#: real store (10**9 rows in chunks of 100 rows), far below what exhausts memory to list
MAX_CHUNKS = 10**7


def check_grid(arr: zarr.Array, where: str) -> None:
    """Refuse a chunk grid no real store has, before Zarr or Dask enumerates it.

    An edited ``zarr.json`` (a zero chunk extent, a shape of 2**62 rows or
    2**40 columns) would otherwise end in ZeroDivisionError or MemoryError
    while the chunks are listed: a chunk (or shard) extent below 1 is a
    StoreError, more than :data:`MAX_CHUNKS` chunks an InputError.
    """
    units = tuple(int(c) for c in (arr.shards or arr.chunks))
    unit = "shard" if arr.shards else "chunk"
    if any(c < 1 for c in units):
        raise StoreError(f"{where}: its {unit} shape {units} has an extent below 1; its "
                         "zarr.json is corrupt or was edited. Restore the store or re-create it "
                         "(e.g. distsketch ingest).")
    count = 1
    for size, c in zip(arr.shape, units):
        count *= -(-int(size) // c)
    if count > MAX_CHUNKS:
        raise InputError(f"{where} has shape {tuple(int(s) for s in arr.shape)} in {unit}s of "
                         f"{units}: {count} {unit}s, more than the {MAX_CHUNKS} distsketch reads "
                         "from one array. If the shape is wrong, its zarr.json was edited: restore "
                         "the store; otherwise re-create it with larger chunks (distsketch ingest "
                         "--chunk-rows).")


def missing_chunks(arr: zarr.Array) -> list[tuple[int, ...]]:
    """Grid indices of the storage units (shards, else chunks) absent from the store.

    The keys are listed through the array's own store (local directory or
    fsspec URL) and follow its chunk key encoding (``c/3/0``, ``3.0``,
    ``3/0`` ...), so the indices are the array's real grid indices.
    """
    from zarr.core.sync import collect_aiterator

    if arr.nchunks_initialized >= arr.nchunks:
        return []
    prefix = f"{arr.path}/" if getattr(arr, "path", "") else ""
    present = set(collect_aiterator(arr.store.list_prefix(prefix)))
    grid = [-(-s // c) for s, c in zip(arr.shape, arr.shards or arr.chunks)]
    missing = []
    for idx in np.ndindex(*grid):
        if prefix + arr.metadata.encode_chunk_key(idx) not in present:
            missing.append(tuple(int(i) for i in idx))
            if len(missing) >= 5:
                break
    return missing


def _missing_message(arr: zarr.Array, path: str, missing: list[tuple[int, ...]],
                     distsketch_store: bool) -> str:
    unit = "shard" if arr.shards else "chunk"
    rows = (arr.shards or arr.chunks)[0]
    names = ", ".join(f"{idx} (rows {idx[0] * rows}..{min(arr.shape[0], (idx[0] + 1) * rows)})"
                      for idx in missing)
    head = (f"Zarr array {path} is missing {unit}{'s' if len(missing) > 1 else ''} {names} "
            f"(grid index{'es' if len(missing) > 1 else ''}"
            f"{', the first 5' if len(missing) >= 5 else ''}).")
    if distsketch_store:
        return (f"{head} distsketch writes every chunk of its stores, so the data was lost; "
                "restore the store or re-create it (e.g. re-ingest).")
    fill = arr.fill_value.item() if hasattr(arr.fill_value, "item") else arr.fill_value
    return (f"{head} Zarr would silently read the fill value {fill!r} there. If the "
            "store was written with empty chunks skipped (Zarr's write_empty_chunks=False), "
            "the fill value is the data: pass allow_missing_chunks=True (CLI: "
            "--allow-missing-chunks); otherwise the chunk was lost: restore the data or "
            "re-ingest it.")


def open_array(
    source: Any,
    *,
    component: str | None = None,
    block_rows: int | None = None,
    check_chunks: bool = True,
    allow_missing_chunks: bool = False,
    targets: bool = False,
    storage_options: dict | None = None,
    any_stage: bool = False,
    device: str | None = None,
) -> Any:
    """A validated, row-chunked dask array from a Zarr path, NumPy or dask array.

    Parameters
    ----------
    source : str, path-like, zarr.Array, ndarray or dask array
        ``"store.zarr"``, ``"store.zarr::name"`` for an array in a group, a
        URL (``"s3://bucket/store.zarr::X"``) or an in-memory array.  A path
        that exists is a path, even with ``::`` in it; otherwise the text is
        split at its last ``::`` when what follows is an array name without
        ``/`` (:func:`split_array_path`).  A relative path is made absolute
        here, so workers running elsewhere read the same store.
    component : str, optional
        Array name inside a Zarr group.
    block_rows : int, optional
        Rows per dask block.  Default: whole shards/chunks, grouped to about
        64 MiB per block.
    check_chunks : bool, default True
        Fail if chunks of the store are missing (Zarr would silently read the
        fill value instead).
    allow_missing_chunks : bool, default False
        Read the absent chunks of a store written with empty chunks skipped
        (Zarr's ``write_empty_chunks=False``) as the fill value.  A store
        written by distsketch (it has a manifest) writes every chunk, so an
        absent chunk there is always lost and always refused.
    targets : bool, default False
        Open targets instead of an input: a 1-D array of labels or values
        (or 2-D, one column per target), e.g. ``"store.zarr::y"``, chunked
        like the store (:func:`distsketch.io.arrays.targets.open_targets`).  Numeric
        targets take the device of the inputs (the config ``distsketch.device``),
        so that ``fit("X.zarr", "X.zarr::y")`` reads both on the GPU.
    storage_options : dict, optional
        fsspec options for a URL source (credentials, endpoint), merged over
        the dask config ``distsketch.storage-options``; they travel with the
        graph to the workers.
    any_stage : bool, default False
        Without ``block_rows``: the input is opened before the stage that reads
        it is known (the command line), its blocks planned for any stage
        (:func:`distsketch.graph.store_block_rows`).
    device : {"cpu", "cuda"}, optional
        Where the blocks are computed: ``"cpu"`` gives NumPy blocks,
        ``"cuda"`` CuPy blocks, each moved to the GPU inside the task that
        reads it (an in-memory NumPy input: inside the task that cuts it).
        Default: the dask config ``distsketch.device`` (``"cpu"`` unless set,
        e.g. ``dask.config.set({"distsketch.device": "cuda"})``); docs/gpu.md.

    Returns
    -------
    dask.array.Array of shape (n, d), or (n,) / (n, t) for targets

    Raises
    ------
    StoreError
        Missing or corrupt store, missing chunks.
    InputError
        Not 2-D, not numeric, zero rows.
    ConfigError
        An unknown ``device``; ``"cuda"`` without CuPy or without a visible GPU.
    """
    if targets:
        return _open_targets(source, component, storage_options)
    device = current_device() if device is None else check_device(device)
    if device != "cpu":
        require_cupy(f"device={device!r}")
    if is_dask(source) or isinstance(source, np.ndarray) or hasattr(source, "tocsr"):
        X = check_input(source, where="input array")
        return blocks_on_device(as_dask(X, block_rows), device)
    loc: Location | None = None
    if isinstance(source, zarr.Array):
        arr, path = source, str(source.store_path)
    else:
        path = os.fspath(source) if not isinstance(source, str) else source
        if component is None:
            path, component = split_array_path(path)
        # resolved here, on the client: workers may run in another directory
        loc = resolve(path, storage_options)
        path = loc.url
        arr = open_zarr(loc, component)
    if arr.ndim == 1:
        raise InputError(f"Zarr array {path}{'::' + component if component else ''}: expected a "
                         f"2-D array (rows are points), got 1-D with shape {tuple(arr.shape)}. For "
                         "targets pass targets=True (fit(X, y) takes the path as y directly); for "
                         "a single feature store the data with shape (n, 1).")
    check_shape_dtype(arr.shape, arr.dtype, f"Zarr array {path}", 1)
    check_grid(arr, f"Zarr array {path}")
    if check_chunks:  # the first open only: a re-read by the planner (_reopen) says nothing
        warn_small_chunks(arr, path + (f"::{component}" if component else ""))
    if check_chunks and loc is not None:
        missing = missing_chunks(arr)
        if missing:
            ours = _written_by_distsketch(loc, arr)
            if ours or not allow_missing_chunks:
                raise StoreError(_missing_message(arr, path, missing, ours))
    unit = (arr.shards or arr.chunks)[0]
    if block_rows is None:
        block_rows = store_block_rows(arr.shape[0], arr.shape[1], arr.dtype.itemsize, unit,
                                      any_stage=any_stage)
    so = loc.worker_options if loc is not None else None
    from distsketch.io.commit.digests import digest_of

    reader = ZarrRowReader(path, component, arr.shape, arr.dtype, so, device=device,
                           digest=digest_of(arr))
    name = "zarr-" + tokenize(path, component, arr.shape, str(arr.dtype), block_rows,
                              loc.mtime() if loc is not None else 0.0,
                              *(() if device == "cpu" else (device,)))
    out = from_source(reader, (block_rows, arr.shape[1]), asarray=False, fancy=False, lock=False,
                      name=name, meta=device_meta(arr.dtype, device))
    # the planner may re-read the store with smaller blocks (aligned to its chunks)
    again = source if loc is None else path
    # re-read at the shape read here: rows appended meanwhile are not part of this array
    reopen = functools.partial(_reopen, again, component, so, tuple(arr.shape), arr.dtype,
                               device=device)
    return attach_row_source(out, RowSource(
        reopen, unit, where=path + (f"::{component}" if component else ""),
        row_bytes=input_bytes_per_row(out)))


def _written_by_distsketch(loc: Location, arr: zarr.Array) -> bool:
    """Whether the store (or the array inside it) carries a distsketch manifest or marker."""
    inner = loc.child(arr.path) if getattr(arr, "path", "") else loc
    return loc.written_by_distsketch() or inner.written_by_distsketch()


def _open_targets(source: Any, component: str | None,
                  storage_options: dict | None = None) -> Any:
    """1-D (or 2-D) targets as a dask array chunked like the store (``open_array(targets=True)``)."""
    if isinstance(source, zarr.Array):
        arr, where = source, str(source.store_path)
    elif isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if component is None:
            path, component = split_array_path(path)
        arr = open_zarr(path, component, storage_options=storage_options)
        where = path + (f"::{component}" if component else "")
    else:
        return source if is_dask(source) else to_dask(source)
    check_grid(arr, f"targets {where}")
    if arr.ndim not in (1, 2) or arr.shape[0] < 1:
        raise InputError(f"targets {where} have shape {arr.shape}: expected a 1-D array of labels "
                         "or values (or 2-D, one column per target) with rows.")
    from distsketch.io.arrays.class_codes import dask_targets

    y = dask_targets(arr, where)  # class codes read as their names
    device = current_device()
    if device != "cpu" and np.issubdtype(y.dtype, np.number):
        # numeric targets read where the inputs are (device="cuda": CuPy blocks beside X's);
        # labels by name stay on the host, where classifiers encode them
        require_cupy(f"device={device!r}")
        y = blocks_on_device(y, device)
    return y


def _reopen(source: Any, component: str | None, storage_options: dict | None,
            shape: tuple[int, ...], dtype: np.dtype, block_rows: int, *,
            device: str = "cpu") -> Any:
    """``source`` again with blocks of ``block_rows``: its first ``shape[0]`` rows only.

    A store that grew since it was first opened (an append) is read up to the
    rows recorded then; one that shrank or changed width or dtype is refused.
    """
    X = open_array(source, component=component, block_rows=block_rows, check_chunks=False,
                   storage_options=storage_options, device=device)
    if X.shape[0] < shape[0] or tuple(X.shape[1:]) != tuple(shape[1:]) or X.dtype != dtype:
        where = source if isinstance(source, str) else "the input array"
        raise StoreError(f"{where}{'::' + component if component else ''} changed while being "
                         f"read: it was opened with shape {tuple(shape)} and dtype {dtype}, and "
                         f"now has shape {tuple(X.shape)} and dtype {X.dtype}. Rows may only be "
                         "appended while a computation reads a store; rerun it.")
    return X if X.shape[0] == shape[0] else X[: shape[0]]
