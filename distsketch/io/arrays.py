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
import threading
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
from distsketch.io.atomic import atomic_dir, recover
from distsketch.io.codecs import codecs
from distsketch.io.manifest import MANIFEST_NAME, write_manifest
from distsketch.io.safety import split_array_path, written_by_distsketch
from distsketch.validation.arrays import check_input, check_shape_dtype

__all__ = [
    "ZarrRowReader",
    "create_array",
    "open_array",
    "open_zarr",
    "split_array_path",
    "write_array",
    "zarr_store",
]


def zarr_store(path: str | os.PathLike, *, read_only: bool = False) -> Any:
    """The ``store=`` argument of zarr for ``path``.

    A local path becomes a :class:`zarr.storage.LocalStore`, because zarr reads
    a plain string containing ``::`` as a chained fsspec URL (``/data/a::b``
    would open ``/data/a``); a URL (``s3://...``) is passed on as it is.
    """
    p = os.fspath(path)
    if "://" in p:
        return p
    return zarr.storage.LocalStore(p, read_only=read_only)


def open_zarr(path: str | os.PathLike, component: str | None = None) -> zarr.Array:
    """Open a Zarr array read-only, with a clear error if it is missing or broken.

    A local store that is missing because a writer was killed between the two
    renames of its commit is first recovered (:func:`distsketch.io.atomic.recover`).
    """
    p = str(path)
    if "://" not in p and not Path(p).exists():
        recover(p)
    if "://" not in p and not Path(p).exists():
        raise StoreError(
            f"no Zarr store at {p}: the path does not exist. Check the path, or create it "
            "with `distsketch ingest`."
        )
    try:
        node = zarr.open(store=zarr_store(p, read_only=True), mode="r")
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
    return node  # type: ignore[return-value]


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
        unit = "shard" if self._arr.shards else "chunk"
        cols = (0,) * (len(self.shape) - 1)
        where = ", ".join(f"{unit} {(i, *cols)} (rows {i * c}..{min(self.shape[0], (i + 1) * c)})"
                          for i in bad) or f"rows {start}..{stop}"
        return (f"cannot read {where} of Zarr array {self.path}: {type(exc).__name__}: {exc}. "
                "The chunk is corrupt or unreadable; restore it or re-ingest the data.")


def _missing_chunks(arr: zarr.Array, array_dir: Path) -> list[tuple[int, ...]]:
    """Grid indices of the storage units (shards, else chunks) absent from a local store.

    The keys follow the array's own chunk key encoding (``c/3/0``, ``3.0``,
    ``3/0`` ...), so the indices are the array's real grid indices.
    """
    if arr.nchunks_initialized >= arr.nchunks:
        return []
    grid = [-(-s // c) for s, c in zip(arr.shape, arr.shards or arr.chunks)]
    missing = []
    for idx in np.ndindex(*grid):
        if not (array_dir / arr.metadata.encode_chunk_key(idx)).exists():
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
) -> da.Array:
    """A validated, row-chunked dask array from a Zarr path, NumPy or dask array.

    Parameters
    ----------
    source : str, path-like, zarr.Array, ndarray or dask array
        ``"store.zarr"``, ``"store.zarr::name"`` for an array in a group, or an
        in-memory array.  A path that exists is a path, even with ``::`` in
        it; otherwise the text is split at its last ``::`` when what follows
        is an array name without ``/`` (:func:`split_array_path`).
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
        like the store (:func:`distsketch.io.targets.open_targets`).

    Returns
    -------
    dask.array.Array of shape (n, d), or (n,) / (n, t) for targets

    Raises
    ------
    StoreError
        Missing or corrupt store, missing chunks.
    InputError
        Not 2-D, not numeric, zero rows.
    """
    if targets:
        return _open_targets(source, component)
    if isinstance(source, da.Array) or isinstance(source, np.ndarray) or hasattr(source, "tocsr"):
        X = check_input(source, where="input array")
        return as_dask(X, block_rows)
    if isinstance(source, zarr.Array):
        arr, path = source, str(source.store_path)
    else:
        path = os.fspath(source) if not isinstance(source, str) else source
        if component is None:
            path, component = split_array_path(path)
        arr = open_zarr(path, component)
    if arr.ndim == 1:
        raise InputError(f"Zarr array {path}{'::' + component if component else ''}: expected a "
                         f"2-D array (rows are points), got 1-D with shape {tuple(arr.shape)}. For "
                         "targets pass targets=True (fit(X, y) takes the path as y directly); for "
                         "a single feature store the data with shape (n, 1).")
    check_shape_dtype(arr.shape, arr.dtype, f"Zarr array {path}", 1)
    if check_chunks and isinstance(source, (str, os.PathLike)):
        # arr.path is the array's location inside a group (e.g. "X"), "" for a bare array
        array_dir = Path(path) / arr.path if getattr(arr, "path", "") else Path(path)
        missing = _missing_chunks(arr, array_dir) if array_dir.exists() else []
        if missing:
            ours = (Path(path) / MANIFEST_NAME).is_file() or written_by_distsketch(array_dir)
            if ours or not allow_missing_chunks:
                raise StoreError(_missing_message(arr, path, missing, ours))
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
    # a path is reopened split (``store::X`` -> store, X), as it was opened here
    again = path if isinstance(source, (str, os.PathLike)) else source
    return register_row_source(out, functools.partial(_reopen, again, component), unit)


def _open_targets(source: Any, component: str | None) -> da.Array:
    """1-D (or 2-D) targets as a dask array chunked like the store (``open_array(targets=True)``)."""
    if isinstance(source, zarr.Array):
        arr, where = source, str(source.store_path)
    elif isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if component is None:
            path, component = split_array_path(path)
        arr, where = open_zarr(path, component), path + (f"::{component}" if component else "")
    else:
        return source if isinstance(source, da.Array) else da.asarray(source)
    if arr.ndim not in (1, 2) or arr.shape[0] < 1:
        raise InputError(f"targets {where} have shape {arr.shape}: expected a 1-D array of labels "
                         "or values (or 2-D, one column per target) with rows.")
    return da.from_array(arr, chunks=arr.chunks)


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
            store=zarr_store(path), shape=tuple(int(s) for s in shape), dtype=np.dtype(dtype),
            chunks=(int(chunk_rows), int(shape[1])), compressors=codecs(compressor),
            attributes=attrs or {}, overwrite=True, config={"write_empty_chunks": True},
        )
    except OSError as exc:
        raise StoreError(f"cannot create Zarr array at {path}: {exc}.") from exc


def _graph_inputs(Xd: da.Array) -> list[str]:
    """Paths of the Zarr stores a dask array reads (its ZarrRowReader operands)."""
    graph = Xd.__dask_graph__()
    layers = getattr(graph, "layers", {"": graph})
    paths = []
    for name, layer in layers.items():
        if not str(name).startswith("original-"):
            continue  # from_array keeps its source object in an "original-<name>" layer
        for value in layer.values():
            if isinstance(value, ZarrRowReader):
                paths.append(value.path)
    return paths


class _GuardedTarget:
    """A write target that stops writing once the write is abandoned.

    When one task of a local computation fails, dask raises at once while
    tasks already running go on; their chunk writes would recreate the
    removed temporary directory.  :meth:`close` refuses new writes and waits
    for the running ones, so the temporary can then be removed for good.  A
    copy sent to another process (distributed workers) writes unguarded.
    """

    def __init__(self, arr: zarr.Array):
        self.arr = arr
        self.shape, self.dtype, self.ndim = arr.shape, arr.dtype, arr.ndim
        self._init_sync()

    def _init_sync(self) -> None:
        self._cond = threading.Condition()
        self._active = 0
        self._closed = False

    def __getstate__(self) -> dict:
        return {"arr": self.arr}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["arr"])  # type: ignore[misc]

    def __setitem__(self, key: Any, value: Any) -> None:
        with self._cond:
            if self._closed:
                return
            self._active += 1
        try:
            self.arr[key] = value
        finally:
            with self._cond:
                self._active -= 1
                self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.wait_for(lambda: self._active == 0)


class _FiniteCheck:
    """Per-block finiteness check of what is being written (a dask map_blocks callable)."""

    def __init__(self, stage: str):
        self.stage = stage

    def __call__(self, block: np.ndarray, block_info: dict | None = None) -> np.ndarray:
        ok = np.isfinite(block)
        if not ok.all():
            start = block_info[0]["array-location"][0][0] if block_info else 0
            bad = start + int(np.flatnonzero(~ok.all(axis=1))[0])
            raise InputError(
                f"{self.stage}: the values to write have NaN or Inf in rows "
                f"{start}..{start + block.shape[0]} (first bad row {bad}); nothing was "
                "written. Check the input and parameters of this stage (e.g. a kernel "
                "scale that overflows).")
        return block


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
    inputs: Any = (),
    allow_nonfinite: bool = False,
    stage: str | None = None,
) -> Path:
    """Write a 2-D array to a new Zarr store atomically, without losing rows.

    Parameters
    ----------
    X : ndarray or dask array of shape (n, d)
    path : path-like
        Output store (local directory).
    chunk_rows : int, optional
        Zarr row chunk (>= 1); default the first dask block's rows.  The dask
        array is rechunked to exactly these rows so every task writes whole
        chunks.
    compressor : {"lz4", "zstd", None}
        Codec: fast LZ4 for scratch features, zstd for archival.
    overwrite : bool
        Replace an existing store, which must be one distsketch wrote.
    attrs : dict, optional
        JSON attributes of the array.
    manifest : dict, optional
        Extra manifest entries; a manifest is written last.
    progress : bool, optional
        Progress bar.
    inputs : iterable of path-like, optional
        Stores the values come from, which ``path`` may not be, contain or lie
        in.  The Zarr stores a dask ``X`` reads are added automatically.
    allow_nonfinite : bool, default False
        Write NaN/Inf as they are; by default every block is checked before
        the commit and a non-finite one is an ``InputError``.
    stage : str, optional
        What is being written, for error messages (default ``"writing <path>"``).

    Returns
    -------
    pathlib.Path
        The committed path.

    Raises
    ------
    InputError
        Not 2-D, ``chunk_rows`` < 1, NaN/Inf in the values (naming the rows),
        ``path`` overlapping an input.
    StoreError
        ``path`` exists (see ``overwrite``), the disk is full, a chunk did not
        arrive.  In every case nothing is committed and no temporary is left.

    Notes
    -----
    The finiteness check is one ``isfinite`` pass over each block in memory,
    fused with the write (no extra read).
    """
    t0 = time.perf_counter()
    Xd = X if isinstance(X, da.Array) else as_dask(np.asarray(X))
    if Xd.ndim != 2:
        raise InputError(f"write_array expects a 2-D array, got shape {Xd.shape}.")
    if chunk_rows is None:
        chunk_rows = int(Xd.chunks[0][0]) if Xd.shape[0] else 1
    if isinstance(chunk_rows, bool) or int(chunk_rows) != chunk_rows or chunk_rows < 1:
        raise InputError(f"chunk_rows must be a positive integer (rows per Zarr chunk); got "
                         f"{chunk_rows!r} for {path}.")
    chunk_rows = int(chunk_rows)
    Xd = Xd.rechunk({0: chunk_rows, 1: Xd.shape[1]})
    if not allow_nonfinite and np.issubdtype(Xd.dtype, np.inexact):
        Xd = Xd.map_blocks(_FiniteCheck(stage or f"writing {path}"), dtype=Xd.dtype,
                           name="finite-" + tokenize(Xd.name))
    inputs = [*inputs, *_graph_inputs(Xd)]
    with atomic_dir(path, overwrite=overwrite, inputs=inputs) as tmp:
        target = create_array(tmp, Xd.shape, Xd.dtype, chunk_rows=chunk_rows,
                              compressor=compressor, attrs=attrs)
        if Xd.shape[0]:
            guarded = _GuardedTarget(target)
            try:
                compute(da.store(Xd, guarded, lock=False, compute=False), progress=progress)  # type: ignore[arg-type]
            except BaseException:
                guarded.close()
                raise
        arr = zarr.open_array(zarr_store(tmp, read_only=True), mode="r")
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
