"""Zarr arrays out: row-aligned, committed writes to local paths and URLs.

Writes create the target with row chunks that the dask blocks align to
exactly (the ``to_zarr`` row-loss pitfall), store without a lock, then verify
that every chunk arrived before committing through
:func:`distsketch.io.commit.publish.atomic_output` (a rename locally, the manifest
written last on an object store).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import zarr
from dask.base import tokenize

from distsketch.errors import InputError, StoreError
from distsketch.graph.arrays import as_dask, is_dask, store_graph
from distsketch.graph.devices import blocks_on_host
from distsketch.graph.engine import wants_engine, write_with_engine
from distsketch.graph.runtime import compute
from distsketch.io.arrays.stores import ZarrRowReader, consolidate, zarr_store
from distsketch.io.commit.layout import LAYOUT_KEY, array_record
from distsketch.io.commit.manifest import provenance, write_manifest
from distsketch.io.commit.publish import atomic_output
from distsketch.io.storage.codecs import codecs
from distsketch.io.storage.urls import Location, resolve
from distsketch.ops.namespace import to_host
from distsketch.validation.finite import first_nonfinite_row, is_checked

__all__ = ["create_array", "layout_of", "write_array"]


def create_array(path: str | os.PathLike | Location, shape: tuple[int, ...], dtype: Any, *,
                 chunk_rows: int, compressor: str | None = "lz4",
                 attrs: dict | None = None, dimension_names: tuple[str, ...] | None = None,
                 storage_options: dict | None = None) -> zarr.Array:
    """Create an empty Zarr array whose row chunks are ``chunk_rows``.

    Empty chunks are written too, so a missing chunk always means a lost write.

    Parameters
    ----------
    path : path-like, URL or Location
    shape : tuple of int
        ``(n, d)``, or ``(n,)`` for a 1-D array.
    dtype : dtype
        NumPy unicode (``<U``) is stored as variable-length UTF-8 strings.
    chunk_rows : int
        Rows per chunk (a chunk spans every column).
    compressor : {"lz4", "zstd", None}
    attrs : dict, optional
        JSON attributes.
    dimension_names : tuple of str, optional
        Names of the axes (read by xarray), e.g. ``("sample", "feature")``.
    storage_options : dict, optional
        fsspec options for a URL.
    """
    shape = tuple(int(s) for s in shape)
    dt: Any = np.dtype(dtype)
    if dt.kind == "U":
        # text (class-name predictions): Zarr's variable-length UTF-8 strings, which have a
        # Zarr v3 specification; fixed-width NumPy unicode does not
        dt = str
    try:
        return zarr.create_array(
            store=zarr_store(path, storage_options=storage_options), shape=shape,
            dtype=dt, chunks=(int(chunk_rows), *shape[1:]),
            compressors=codecs(compressor), attributes=attrs or {}, overwrite=True,
            config={"write_empty_chunks": True}, dimension_names=dimension_names,
        )
    except (OSError, StoreError) as exc:
        raise StoreError(f"cannot create Zarr array at {path}: {exc}.") from exc


def _graph_inputs(Xd: Any) -> list[str]:
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
        self.at(block, block_info[0]["array-location"][0][0] if block_info else 0)
        return block

    def at(self, block: np.ndarray, start: int) -> None:
        """Raise the ``InputError`` naming the first bad row of ``block`` (its first row ``start``)."""
        row = first_nonfinite_row(block)
        if row is not None:
            bad = start + row
            raise InputError(
                f"{self.stage}: the values to write have NaN or Inf in rows "
                f"{start}..{start + block.shape[0]} (first bad row {bad}); nothing was "
                "written. Check the input and parameters of this stage (e.g. a kernel "
                "scale that overflows).")


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
    dimension_names: tuple[str, ...] = ("sample", "component"),
    name: str | None = "X",
    storage_options: dict | None = None,
) -> Any:
    """Write a 2-D (or 1-D) array to a new Zarr group atomically, without losing rows.

    The store is a Zarr group holding the array as ``X`` (like an ingested
    store), so ``xarray.open_zarr(path)`` opens it and ``open_array(path)``,
    ``fit`` and ``transform`` read it directly.

    Parameters
    ----------
    X : ndarray or dask array of shape (n, d) or (n,)
    path : path-like or URL
        Output store: a local directory, or a URL (``s3://bucket/out.zarr``)
        written through Zarr's fsspec store.
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
    dimension_names : tuple of str, default ("sample", "component")
        Names of the axes, recorded in the Zarr metadata (xarray reads them);
        a 1-D array takes the first, ``("sample",)``.
    name : str or None, default "X"
        Name of the array in the Zarr group written at ``path`` (with
        consolidated metadata), which ``xarray.open_zarr(path)`` opens as a
        Dataset; ``open_array(path)`` reads ``X`` (or the group's only array),
        ``path::name`` names it.  ``None`` writes the bare array at ``path``
        instead, for readers that expect one (xarray cannot open it).
    storage_options : dict, optional
        fsspec options for a URL ``path`` (credentials, endpoint), merged over
        the dask config ``distsketch.storage-options``.

    Returns
    -------
    pathlib.Path or str
        The committed path (absolute), or the canonical URL.

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
    fused with the write (no extra read); a dask array of device blocks already
    checked where they were made (a ``transform`` on ``device="cuda"``,
    :func:`distsketch.validation.finite.mark_checked`) is not checked again.  The manifest's entries are also
    stored as the Zarr attribute ``provenance`` of the array (and group).  On an object store the output is
    written under a temporary prefix and copied into place with its manifest
    last (:mod:`distsketch.io.commit.publish`): one more copy of every chunk, made
    by the store itself where it can (S3 copies server-side).  With the dask
    config ``distsketch.engine`` (``"device"``, or ``"auto"`` for CuPy blocks)
    the blocks are written by the pass engine's writer pool
    (:func:`distsketch.graph.engine.write_with_engine`) instead of one task per
    block: the same store, the same checks and errors.
    """
    t0 = time.perf_counter()
    # device blocks that FiniteRows checked on the device are not checked again on the host
    checked = is_dask(X) and is_checked(X)
    # the dask config distsketch.engine: one engine writer instead of a task per block
    engine = wants_engine(X)
    # GPU blocks (device="cuda") move to the host in the task that writes them, or the
    # engine's thread moves them
    Xd = (X if engine else blocks_on_host(X)) if is_dask(X) else as_dask(np.asarray(to_host(X)))
    if Xd.ndim not in (1, 2):  # 1-D: predictions, labels
        raise InputError(f"write_array expects a 1-D or 2-D array, got shape {Xd.shape}.")
    if chunk_rows is None:
        chunk_rows = int(Xd.chunks[0][0]) if Xd.shape[0] else 1
    if isinstance(chunk_rows, bool) or int(chunk_rows) != chunk_rows or chunk_rows < 1:
        raise InputError(f"chunk_rows must be a positive integer (rows per Zarr chunk); got "
                         f"{chunk_rows!r} for {path}.")
    chunk_rows = int(chunk_rows)
    Xd = Xd.rechunk({0: chunk_rows, **({1: Xd.shape[1]} if Xd.ndim == 2 else {})})
    check = None
    if not allow_nonfinite and not checked and np.issubdtype(Xd.dtype, np.inexact):
        check = _FiniteCheck(stage or f"writing {path}")
        if not engine:  # the engine's writer threads check each block on the host
            Xd = Xd.map_blocks(check, dtype=Xd.dtype, name="finite-" + tokenize(Xd.name))
    inputs = [*inputs, *_graph_inputs(Xd)]
    dest = resolve(path, storage_options)
    with atomic_output(dest, overwrite=overwrite, inputs=inputs,
                       storage_options=storage_options) as tmp:
        where = tmp
        if name is not None:
            # "w-", not "w": "w" deletes and re-creates tmp, dropping atomic_dir's lock on it
            zarr.open_group(store=zarr_store(tmp), mode="w-")
            where = tmp.child(name)
        target = create_array(where, Xd.shape, Xd.dtype, chunk_rows=chunk_rows,
                              compressor=compressor, attrs=attrs,
                              dimension_names=tuple(dimension_names)[:Xd.ndim])
        if Xd.shape[0]:
            guarded = _GuardedTarget(target)
            try:
                if engine:
                    write_with_engine(Xd, guarded, check=check.at if check else None,
                                      progress=progress)
                else:
                    compute(store_graph(Xd, guarded), progress=progress)
            except BaseException:
                guarded.close()
                raise
        arr = zarr.open_array(zarr_store(where, read_only=True), mode="r")
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
        if name is not None:
            info["array"] = name
        info[LAYOUT_KEY] = layout_of(tmp, [name])  # what readers check the array against
        prov = provenance(info)
        target.attrs["provenance"] = prov
        if name is not None:
            zarr.open_group(store=zarr_store(tmp), mode="r+").attrs["provenance"] = prov
            consolidate(tmp)
        write_manifest(tmp, info)
    return dest.user_path()


def layout_of(root: Location, names: Sequence[str | None]) -> dict[str, dict[str, Any]]:
    """The records of the arrays ``names`` of the store at ``root`` (``None``: the root array).

    Read from each array's own metadata, with its digest
    (:mod:`distsketch.io.commit.digests`).  After an append the CRCs recorded
    for the full chunks below the old rows are kept: only the rewritten last
    chunk and the new ones are read, and a chunk moved before stays detected.
    """
    from distsketch.io.commit.digests import DIGEST_KEY, array_digests
    from distsketch.io.commit.manifest import read_manifest

    try:
        before = read_manifest(root)
    except StoreError:
        before = None
    previous = before.get(LAYOUT_KEY) if isinstance(before, dict) else None
    digests = array_digests(root, list(names), previous if isinstance(previous, dict) else None)
    out = {}
    for name in names:
        where = root if name is None else root.child(name)
        arr = zarr.open_array(zarr_store(where, read_only=True), mode="r")
        key = "" if name is None else name
        out[key] = array_record(arr) | {DIGEST_KEY: digests[key]}
    return out
