"""The one sink of file ingestion: row blocks into a Zarr group, committed atomically.

The group holds ``X`` (n, d) and, when labelled, ``y`` (n,), in row chunks of
``chunk_rows`` (their dimensions and attributes: docs/storage.md), with the
attributes ``ingest`` and ``provenance``; ``distsketch-manifest.json`` is written last.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from distsketch.errors import StoreError
from distsketch.io.arrays.stores import consolidate, zarr_store
from distsketch.io.arrays.writes import create_array, layout_of
from distsketch.io.commit.layout import LAYOUT_KEY
from distsketch.io.commit.manifest import provenance, write_manifest
from distsketch.io.commit.publish import atomic_output
from distsketch.io.storage.urls import Location

__all__ = ["RowWriter", "ZarrSink"]


class RowWriter:
    """Append row blocks to a Zarr array in whole, row-aligned chunks.

    Rows are buffered until a full chunk is available, so every write covers
    complete chunks (the last one may be partial); nothing is written
    concurrently, so no row can be lost to unaligned writes.
    """

    def __init__(self, path: Location, dtype: np.dtype, chunk_rows: int,
                 compressor: str | None, n_rows: int | None = None):
        self.path = path
        self.dtype = np.dtype(dtype)
        self.chunk_rows = int(chunk_rows)
        self.compressor = compressor
        self.n_known = n_rows
        self.rows = 0
        self.arr: zarr.Array | None = None
        self._buf: np.ndarray | None = None
        self._fill = 0

    def _create(self, n_cols: int | None) -> None:
        n0 = self.n_known if self.n_known is not None else 0
        shape = (n0,) if n_cols is None else (n0, n_cols)  # n_cols None: 1-D labels
        self.arr = create_array(self.path, shape, self.dtype, chunk_rows=self.chunk_rows,
                                compressor=self.compressor,
                                dimension_names=("sample", "feature")[:len(shape)])
        self._buf = np.empty((self.chunk_rows, *shape[1:]), dtype=self.dtype)

    def write(self, block: np.ndarray) -> None:
        if self.arr is None:
            self._create(None if block.ndim == 1 else block.shape[1])
        assert self._buf is not None
        pos = 0
        while pos < block.shape[0]:
            take = min(self.chunk_rows - self._fill, block.shape[0] - pos)
            self._buf[self._fill:self._fill + take] = block[pos:pos + take]
            self._fill += take
            pos += take
            if self._fill == self.chunk_rows:
                self._flush()

    def _flush(self) -> None:
        if not self._fill or self.arr is None or self._buf is None:
            return
        start, stop = self.rows, self.rows + self._fill
        if self.n_known is None:
            self.arr.resize((stop, *self.arr.shape[1:]))
        elif stop > self.n_known:
            raise StoreError(f"{self.path}: more rows ({stop}) than announced ({self.n_known}).")
        self.arr[start:stop] = self._buf[:self._fill]
        self.rows = stop
        self._fill = 0

    def close(self) -> zarr.Array | None:
        self._flush()
        return self.arr


class ZarrSink:
    """Arrays of one ingest output, written under a temporary directory.

    Use :meth:`open` (a context manager): the group is renamed into place only
    when :meth:`commit` has verified every array and written the manifest and
    the block exits without an error; otherwise nothing is left behind.
    """

    def __init__(self, tmp: Location, compressor: str | None):
        self.tmp = tmp
        self.compressor = compressor
        self.writers: dict[str, RowWriter] = {}
        # JSON attributes of the arrays, set at commit (class names are known only then)
        self.attrs: dict[str, dict[str, Any]] = {}

    @classmethod
    @contextlib.contextmanager
    def open(cls, dest: str | os.PathLike | Location, *, compressor: str | None,
             overwrite: bool, inputs: Any = (),
             storage_options: dict | None = None) -> Iterator[ZarrSink]:
        with atomic_output(dest, overwrite=overwrite, inputs=inputs,
                           storage_options=storage_options) as tmp:
            # "w-", not "w": "w" deletes and re-creates tmp, dropping atomic_dir's lock on it
            zarr.open_group(store=zarr_store(tmp), mode="w-")
            yield cls(tmp, compressor)

    def array(self, name: str, dtype: np.dtype, chunk_rows: int,
              n_rows: int | None) -> RowWriter:
        """A writer for array ``name`` (created at its first block)."""
        w = RowWriter(self.tmp.child(name), dtype, chunk_rows, self.compressor, n_rows)
        self.writers[name] = w
        return w

    def commit(self, n_rows: int, source: Path, manifest: dict[str, Any]) -> None:
        """Flush, check that every array has ``n_rows`` rows and all chunks, write the manifest."""
        for w in self.writers.values():
            w.close()
        for name in self.writers:
            _verify(self.tmp.child(name), n_rows, source, name)
            if self.attrs.get(name):
                zarr.open_array(zarr_store(self.tmp.child(name)), mode="r+").attrs.update(
                    self.attrs[name])
        # what readers check the arrays against (io.commit.layout)
        manifest[LAYOUT_KEY] = layout_of(self.tmp, sorted(self.writers))
        root = zarr.open_group(store=zarr_store(self.tmp), mode="r+")
        root.attrs["ingest"] = {k: manifest[k] for k in ("source", "format", "rows", "n_features")}
        root.attrs["provenance"] = provenance(manifest)
        consolidate(self.tmp)
        write_manifest(self.tmp, manifest)


def _verify(path: Location, expected_rows: int, source: Path, what: str) -> None:
    """Re-open a written array and check that every row and chunk arrived."""
    arr = zarr.open_array(zarr_store(path, read_only=True), mode="r")
    if arr.shape[0] != expected_rows or arr.nchunks_initialized != arr.nchunks:
        raise StoreError(
            f"ingesting {source}: {what} has {arr.shape[0]} rows and {arr.nchunks_initialized} "
            f"of {arr.nchunks} chunks, expected {expected_rows} rows; nothing was committed. "
            "Retry; if it persists the output disk may be full."
        )
