"""Zarr storage of a symmetric sparse matrix as lower-triangular CSR row strips.

Layout (a Zarr v3 group, written atomically, manifest last)::

    <path>/
      zarr.json                 attrs given by the writer
      diagonal                  (n,) float64
      strips/<s>/data           (nnz_s,) values
      strips/<s>/indices        (nnz_s,) global column indices
      strips/<s>/indptr         (rows_s + 1,) int64
      distsketch-manifest.json

Estimators hold no Zarr handles: they write through :func:`write_csr_strips`
and read through :class:`CSRStripReader`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import scipy.sparse as sp
import zarr

from distsketch.io.arrays.stores import consolidate, zarr_store
from distsketch.io.commit.manifest import write_manifest
from distsketch.io.commit.publish import atomic_output
from distsketch.io.storage.codecs import codecs
from distsketch.io.storage.urls import resolve

__all__ = ["CSRStripReader", "CSRStripWriter", "write_csr_strips"]

_CHUNK = 2**22


def _write_1d(group: zarr.Group, name: str, arr: np.ndarray, dim: str) -> None:
    a = group.create_array(name, shape=arr.shape, dtype=arr.dtype, dimension_names=(dim,),
                           chunks=(max(1, min(arr.shape[0], _CHUNK)),), overwrite=True,
                           compressors=codecs("zstd"))
    if arr.size:
        a[...] = arr


class CSRStripWriter:
    """Writes strips into an open temporary group (see :func:`write_csr_strips`)."""

    def __init__(self, root: zarr.Group):
        self._root = root
        self._strips = root.create_group("strips")

    def strip(self, s: int, m: sp.csr_array) -> None:
        """Store strip ``s`` (its data, indices and indptr)."""
        g = self._strips.create_group(str(s))
        _write_1d(g, "data", np.asarray(m.data), "nonzero")
        _write_1d(g, "indices", np.asarray(m.indices), "nonzero")
        _write_1d(g, "indptr", np.asarray(m.indptr), "row_pointer")

    def diagonal(self, diagonal: np.ndarray) -> None:
        """Store the (n,) diagonal."""
        _write_1d(self._root, "diagonal", np.asarray(diagonal), "sample")


@contextlib.contextmanager
def write_csr_strips(path: str | os.PathLike, *, attrs: dict[str, Any], manifest: dict[str, Any],
                     overwrite: bool = False,
                     storage_options: dict | None = None) -> Iterator[CSRStripWriter]:
    """Write a strip store atomically: strips and diagonal inside the block, then
    the attributes (JSON: sizes, bounds, parameters) and the manifest, then the
    rename into place (a URL is committed by its manifest, written last).
    """
    with atomic_output(path, overwrite=overwrite, storage_options=storage_options) as tmp:
        root = zarr.open_group(store=zarr_store(tmp), mode="w-")
        yield CSRStripWriter(root)
        root.attrs.update(attrs)
        consolidate(tmp)  # named dimensions and consolidated metadata: xarray opens each group
        write_manifest(tmp, manifest)


class CSRStripReader:
    """Read-only access to the strips of a store, opened on first use.

    Picklable: the Zarr handle is dropped and reopened where it is used.
    """

    def __init__(self, path: str, storage_options: dict | None = None):
        # resolved here, on the client: the reader may be unpickled in another directory
        loc = resolve(path, storage_options)
        loc.refuse_links("sparse strip store")  # read only from inside itself
        self.path = loc.url
        self.storage_options = loc.worker_options
        self._group: zarr.Group | None = None

    def __getstate__(self) -> dict:
        return {"path": self.path, "storage_options": self.storage_options, "_group": None}

    def strip(self, s: int, shape: tuple[int, int]) -> sp.csr_array:
        """Strip ``s`` as a CSR array of ``shape`` (errors propagate to the caller)."""
        if self._group is None:
            self._group = zarr.open_group(store=zarr_store(
                self.path, read_only=True, storage_options=self.storage_options), mode="r")
        g: Any = self._group[f"strips/{s}"]
        return sp.csr_array((np.asarray(g["data"][...]), np.asarray(g["indices"][...]),
                             np.asarray(g["indptr"][...])), shape=shape)
