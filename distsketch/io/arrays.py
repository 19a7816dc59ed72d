"""Zarr arrays in and out: validated reads, row-aligned atomic writes.

Reads go through :class:`ZarrRowReader`, which turns low-level failures
(a corrupt chunk, a vanished file) into :class:`~distsketch.errors.StoreError`
naming the store and the row range.  Writes create the target with row chunks
that the dask blocks align to exactly (the ``to_zarr`` row-loss pitfall), store
without a lock, then verify that every chunk arrived before committing.

This is the one place that opens a path as an array; the shape and dtype
checks it applies come from :mod:`distsketch.validation`.
"""

from __future__ import annotations

import functools
import os
import time
import warnings
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
import zarr
from dask.base import tokenize

from distsketch.errors import InputError, StoreError
from distsketch.graph.arrays import as_dask, default_block_rows
from distsketch.graph.plan import register_row_source
from distsketch.graph.runtime import compute
from distsketch.io.atomic import atomic_dir
from distsketch.io.codecs import codecs
from distsketch.io.manifest import write_manifest
from distsketch.validation.arrays import check_input, check_shape_dtype

__all__ = [
    "ZarrRowReader",
    "create_array",
    "open_array",
    "open_zarr",
    "write_array",
]


def open_zarr(path: str | os.PathLike, component: str | None = None) -> zarr.Array:
    """Open a Zarr array read-only, with a clear error if it is missing or broken."""
    p = str(path)
    if "://" not in p and not Path(p).exists():
        raise StoreError(
            f"no Zarr store at {p}: the path does not exist. Check the path, or create it "
            "with `distsketch ingest`."
        )
    try:
        node = zarr.open(store=p, mode="r")
    except Exception as exc:
        raise StoreError(
            f"cannot open {p} as a Zarr store ({type(exc).__name__}: {exc}). The store is "
            "missing its metadata or is corrupt; re-create it with `distsketch ingest`."
        ) from exc
    if isinstance(node, zarr.Group):
        with warnings.catch_warnings():
            # the distsketch manifest beside the arrays is not a Zarr node
            warnings.filterwarnings("ignore", message=".*not recognized.*")
            names = sorted(node.array_keys())
        key = component or ("X" if "X" in names else (names[0] if len(names) == 1 else None))
        if key is None or key not in names:
            raise StoreError(
                f"{p} is a Zarr group; name the array inside it (one of {names}), e.g. "
                f"{p}::{names[0] if names else 'X'}."
            )
        node = node[key]
    return node


class ZarrRowReader:
    """Array-like read adapter over a Zarr array for :func:`dask.array.from_array`.

    Holds only the path, so it pickles cheaply to workers; opens lazily there.
    """

    def __init__(self, path: str, component: str | None, shape: tuple, dtype: np.dtype):
        self.path = path
        self.component = component
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.ndim = len(shape)
        self._arr: zarr.Array | None = None

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_arr"} | {"_arr": None}

    def __getitem__(self, key: Any) -> np.ndarray:
        try:
            if self._arr is None:
                self._arr = open_zarr(self.path, self.component)
            return np.asarray(self._arr[key])
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(self._describe_failure(key, exc)) from exc

    def _describe_failure(self, key: Any, exc: Exception) -> str:
        rows = key[0] if isinstance(key, tuple) else key
        if not isinstance(rows, slice) or self._arr is None:
            return (f"cannot read selection {key!r} of {self.path}: {type(exc).__name__}: {exc}. "
                    "Restore the data or re-ingest it.")
        c = (self._arr.shards or self._arr.chunks)[0]
        start = rows.start or 0
        stop = self.shape[0] if rows.stop is None else rows.stop
        bad = []
        # re-read chunk by chunk so the message names the broken chunk, not the block
        for i in range(start // c, (stop - 1) // c + 1):
            try:
                self._arr[i * c: min(self.shape[0], (i + 1) * c)]
            except Exception:
                bad.append(i)
        where = ", ".join(f"chunk {i} (rows {i * c}..{min(self.shape[0], (i + 1) * c)})"
                          for i in bad) or f"rows {start}..{stop}"
        return (f"cannot read {where} of Zarr array {self.path}: {type(exc).__name__}: {exc}. "
                "The chunk is corrupt or unreadable; restore it or re-ingest the data.")


def _missing_chunks(arr: zarr.Array, path: str) -> list[tuple[int, ...]]:
    if arr.nchunks_initialized >= arr.nchunks:
        return []
    grid = [int(np.ceil(s / c)) for s, c in zip(arr.shape, arr.shards or arr.chunks)]
    base = Path(path)
    missing = []
    for idx in np.ndindex(*grid):
        if arr.metadata.zarr_format == 3:
            key = base / "c" / Path(*[str(i) for i in idx])
        else:
            key = base / ".".join(str(i) for i in idx)
        if not key.exists():
            missing.append(tuple(int(i) for i in idx))
            if len(missing) >= 5:
                break
    return missing


def open_array(
    source: Any,
    *,
    component: str | None = None,
    block_rows: int | None = None,
    check_chunks: bool = True,
) -> da.Array:
    """A validated, row-chunked dask array from a Zarr path, NumPy or dask array.

    Parameters
    ----------
    source : str, path-like, zarr.Array, ndarray or dask array
        ``"store.zarr"``, ``"store.zarr::name"`` for an array in a group, or an
        in-memory array.
    component : str, optional
        Array name inside a Zarr group.
    block_rows : int, optional
        Rows per dask block.  Default: whole shards/chunks, grouped to about
        64 MiB per block.
    check_chunks : bool, default True
        Fail if chunks of the store are missing (Zarr would silently read the
        fill value instead).

    Returns
    -------
    dask.array.Array of shape (n, d)

    Raises
    ------
    StoreError
        Missing or corrupt store, missing chunks.
    InputError
        Not 2-D, not numeric, zero rows.
    """
    if isinstance(source, da.Array) or isinstance(source, np.ndarray) or hasattr(source, "tocsr"):
        X = check_input(source, where="input array")
        return as_dask(X, block_rows)
    if isinstance(source, zarr.Array):
        arr, path = source, str(source.store_path)
    else:
        path = os.fspath(source) if not isinstance(source, str) else source
        if "::" in path and component is None:
            path, component = path.split("::", 1)
        arr = open_zarr(path, component)
    check_shape_dtype(arr.shape, arr.dtype, f"Zarr array {path}", 1)
    if check_chunks and isinstance(source, (str, os.PathLike)):
        # arr.path is the array's location inside a group (e.g. "X"), "" for a bare array
        array_dir = str(Path(path) / arr.path) if getattr(arr, "path", "") else path
        missing = _missing_chunks(arr, array_dir) if Path(array_dir).exists() else []
        if missing:
            raise StoreError(
                f"Zarr array {path} is missing chunk(s) {missing} (grid index; rows "
                f"{missing[0][0] * (arr.shards or arr.chunks)[0]}..). Reading would silently "
                "return fill values; re-ingest or restore the data."
            )
    unit = (arr.shards or arr.chunks)[0]
    if block_rows is None:
        target = default_block_rows(arr.shape[0], arr.shape[1], arr.dtype.itemsize)
        block_rows = max(unit, (target // unit) * unit)
    reader = ZarrRowReader(path, component, arr.shape, arr.dtype)
    name = "zarr-" + tokenize(path, component, arr.shape, str(arr.dtype), block_rows,
                              _mtime(path))
    out = da.from_array(reader, chunks=(block_rows, arr.shape[1]), asarray=False,
                        fancy=False, lock=False, name=name, meta=np.empty((0, 0), dtype=arr.dtype))
    # the planner may re-read the store with smaller blocks (aligned to its chunks)
    return register_row_source(out, functools.partial(_reopen, source, component), unit)


def _reopen(source: Any, component: str | None, block_rows: int) -> da.Array:
    return open_array(source, component=component, block_rows=block_rows, check_chunks=False)


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0.0


def create_array(path: str | os.PathLike, shape: tuple[int, int], dtype: Any, *,
                 chunk_rows: int, compressor: str | None = "lz4",
                 attrs: dict | None = None) -> zarr.Array:
    """Create an empty Zarr array whose row chunks are ``chunk_rows``.

    Empty chunks are written too, so a missing chunk always means a lost write.
    """
    try:
        return zarr.create_array(
            store=str(path), shape=tuple(int(s) for s in shape), dtype=np.dtype(dtype),
            chunks=(int(chunk_rows), int(shape[1])), compressors=codecs(compressor),
            attributes=attrs or {}, overwrite=True, config={"write_empty_chunks": True},
        )
    except OSError as exc:
        raise StoreError(f"cannot create Zarr array at {path}: {exc}.") from exc


def write_array(
    X: Any,
    path: str | os.PathLike,
    *,
    chunk_rows: int | None = None,
    compressor: str | None = "lz4",
    overwrite: bool = False,
    attrs: dict | None = None,
    manifest: dict | None = None,
    progress: bool | None = None,
) -> Path:
    """Write a 2-D array to a new Zarr store atomically, without losing rows.

    Parameters
    ----------
    X : ndarray or dask array of shape (n, d)
    path : path-like
        Output store (local directory).
    chunk_rows : int, optional
        Zarr row chunk; default the first dask block's rows.  The dask array is
        rechunked to exactly these rows so every task writes whole chunks.
    compressor : {"lz4", "zstd", None}
        Codec: fast LZ4 for scratch features, zstd for archival.
    overwrite : bool
        Replace an existing store.
    attrs : dict, optional
        JSON attributes of the array.
    manifest : dict, optional
        Extra manifest entries; a manifest is written last.
    progress : bool, optional
        Progress bar.

    Returns
    -------
    pathlib.Path
        The committed path.
    """
    t0 = time.perf_counter()
    Xd = X if isinstance(X, da.Array) else as_dask(np.asarray(X))
    if Xd.ndim != 2:
        raise InputError(f"write_array expects a 2-D array, got shape {Xd.shape}.")
    if chunk_rows is None:
        chunk_rows = int(Xd.chunks[0][0]) if Xd.shape[0] else 1
    chunk_rows = max(1, int(chunk_rows))
    Xd = Xd.rechunk({0: chunk_rows, 1: Xd.shape[1]})
    with atomic_dir(path, overwrite=overwrite) as tmp:
        target = create_array(tmp, Xd.shape, Xd.dtype, chunk_rows=chunk_rows,
                              compressor=compressor, attrs=attrs)
        if Xd.shape[0]:
            compute(da.store(Xd, target, lock=False, compute=False), progress=progress)
        arr = zarr.open_array(str(tmp), mode="r")
        if arr.nchunks_initialized != arr.nchunks:
            raise StoreError(
                f"writing {path}: only {arr.nchunks_initialized} of {arr.nchunks} chunks "
                "arrived; nothing was committed. Retry the write."
            )
        info = {
            "kind": "array",
            "shape": list(Xd.shape),
            "dtype": str(Xd.dtype),
            "chunk_rows": chunk_rows,
            "seconds": round(time.perf_counter() - t0, 3),
        }
        info.update(manifest or {})
        write_manifest(tmp, info)
    return Path(path).expanduser().absolute()
