"""Zarr stores of local paths and URLs: the store object, opening, the row reader.

:func:`zarr_store` is the one place a resolved location becomes a Zarr store;
:func:`open_zarr` opens an array with clear errors; :class:`ZarrRowReader` is what
dask graphs hold to read it.  A local store is read only from inside itself
(:func:`refuse_links`, re-exported here).
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np
import zarr

from distsketch.errors import MemoryBudgetError, StoreError
from distsketch.io.storage.safety import refuse_links
from distsketch.io.storage.urls import Location, resolve
from distsketch.ops.device import to_device

__all__ = ["ZarrRowReader", "chunk_error_detail", "consolidate", "open_zarr", "refuse_links",
           "zarr_store"]


def zarr_store(path: str | os.PathLike | Location, *, read_only: bool = False,
               storage_options: Any = None) -> Any:
    """The ``store=`` argument of zarr for ``path``.

    A local path becomes a :class:`zarr.storage.LocalStore` (absolute), because
    zarr reads a plain string containing ``::`` as a chained fsspec URL
    (``/data/a::b`` would open ``/data/a``); a URL becomes a
    :class:`zarr.storage.FsspecStore` with ``storage_options`` (merged over
    the dask config ``distsketch.storage-options``).
    """
    return resolve(path, storage_options).zarr_store(read_only=read_only)


def chunk_error_detail(exc: BaseException) -> str:
    """What went wrong reading a chunk, for a message: a checksum mismatch said plainly."""
    from distsketch.io.storage.codecs import is_checksum_error

    if is_checksum_error(exc):
        return ("its CRC-32C checksum does not match: the bytes changed after distsketch wrote "
                "them (a flipped bit on disk or in transfer, or an edit)")
    return f"{type(exc).__name__}: {exc}"


def open_zarr(path: str | os.PathLike | Location, component: str | None = None, *,
              storage_options: Any = None, check: bool = True) -> zarr.Array:
    """Open a Zarr array read-only, with a clear error if it is missing or broken.

    A local store that is missing because a writer was killed between the two
    renames of its commit is first recovered (:func:`distsketch.io.commit.atomic.recover`).
    A URL store that distsketch began to write but did not commit (its marker
    without its manifest) is refused (:func:`distsketch.io.commit.publish.check_committed`).
    ``check=False`` skips these requests for a URL (a graph's reader, opening
    a store that was checked when the graph was built).
    """
    loc = resolve(path, storage_options)
    p = loc.url
    loc.recover()
    if loc.absent(check):
        raise StoreError(
            f"no Zarr store at {p}: the {loc.noun} does not exist. "
            "Check it, or create it with `distsketch ingest`."
        )
    if check:
        loc.refuse_links("Zarr store")
        loc.check_committed()
    try:
        node = _open_node(loc.zarr_store(read_only=True))
    except Exception as exc:
        raise StoreError(
            f"cannot open {p} as a Zarr store ({type(exc).__name__}: {exc}). The store is "
            "missing its metadata or is corrupt; re-create it with `distsketch ingest`."
        ) from exc
    if not isinstance(node, zarr.Group):
        return _checked(loc, node, p, check)
    # the named array, else X, is opened directly: listing the group warns about the
    # distsketch files beside the arrays, from zarr's own thread (unfilterable here)
    member = _member_array(node, component or "X")
    if member is None:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*not recognized.*")
            names = sorted(node.array_keys())
        if component is None and len(names) == 1:
            member = _member_array(node, names[0])
        if member is None:
            raise StoreError(
                f"{p} is a Zarr group{f' with no array {component!r}' if component else ''}; "
                f"name the array inside it (one of {names}), e.g. "
                f"{p}::{names[0] if names else 'X'}."
            )
    return _checked(loc, member, f"{p}::{member.path}", check)


def _checked(loc: Location, arr: zarr.Array, where: str, check: bool) -> zarr.Array:
    """``arr`` once its metadata agree with the store's manifest and consolidated view; where
    the manifest records its digest, opened through a store that checks each chunk read."""
    if check:
        from distsketch.io.commit.digests import checked_array, input_digest
        from distsketch.io.commit.layout import check_array

        check_array(loc, arr, where)
        digest = input_digest(loc, arr, where)
        if digest is not None:
            return checked_array(arr, digest)
    return arr


def _member_array(group: zarr.Group, name: str) -> zarr.Array | None:
    """The array ``name`` directly inside ``group``, or None (absent, or not an array)."""
    if not name or "/" in name or name in (".", ".."):  # zarr raises on '.' segments
        return None
    try:
        node = group[name]
    except KeyError:
        return None
    return node if isinstance(node, zarr.Array) else None


def _open_node(store: Any) -> zarr.Array | zarr.Group:
    """The array or group at the root of ``store``, from its own metadata (never the
    consolidated view: what is read is what the arrays' metadata say, even if edited)."""
    try:
        return zarr.open_array(store=store, mode="r")
    except Exception as exc:
        try:
            return zarr.open_group(store=store, mode="r", use_consolidated=False)
        except Exception:
            raise exc from None


class ZarrRowReader:
    """Array-like read adapter over a Zarr array for :func:`dask.array.from_array`.

    Holds only the (absolute) path or URL and its storage options, so it
    pickles cheaply to workers; opens lazily there.
    """

    def __init__(self, path: str, component: str | None, shape: tuple, dtype: np.dtype,
                 storage_options: dict | None = None, device: str = "cpu", digest: Any = None):
        self.path = path
        # the array's digest from the manifest (distsketch.io.commit.digests.ArrayDigest), checked on
        # every chunk this reader fetches; None for a store that records none
        self.digest = digest
        self.device = device  # "cuda": each block read moves to the GPU in its read task
        self.storage_options = storage_options
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
                # checked when the graph was built: no existence/commit requests per task
                arr = open_zarr(self.path, self.component,
                                storage_options=self.storage_options, check=False)
                if self.digest is not None:
                    from distsketch.io.commit.digests import checked_array

                    # an array that shrank since the graph was built is refused below, naming
                    # the rows that are gone: its metadata are not compared here
                    arr = checked_array(arr, self.digest,
                                        metadata=arr.shape[:1] >= self.shape[:1])
                self._arr = arr
            out = np.asarray(self._arr[key])
        except (StoreError, MemoryBudgetError):
            raise
        except MemoryError as exc:
            # out of memory is not a damaged chunk: say so, and what to change
            raise MemoryBudgetError(
                f"out of memory reading {key!r} of Zarr array {self.path} ({self.shape[1:]} "
                f"{self.dtype} per row): the block or one of its chunks does not fit the memory "
                "of this process. Re-ingest the input with smaller --chunk-rows, use smaller "
                "blocks (--block-rows), or give the process/workers more memory.") from exc
        except Exception as exc:
            raise StoreError(self._describe_failure(key, exc)) from exc
        rows = key[0] if isinstance(key, tuple) else key
        if isinstance(rows, slice) and out.shape[:1] != (len(range(*rows.indices(self.shape[0]))),):
            # the store shrank since the graph was built: never a short block
            raise StoreError(f"{self.path}: rows {rows.start}..{rows.stop} are gone (the array now "
                             f"has {self._arr.shape[0]} rows, {self.shape[0]} when it was opened); "
                             "rows may only be appended to an input being read. Rerun.")
        return out if self.device == "cpu" else to_device(out, self.device)

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
        return (f"cannot read {where} of Zarr array {self.path}: {chunk_error_detail(exc)}. "
                "The chunk is corrupt or unreadable; restore it or re-ingest the data.")


def consolidate(path: str | os.PathLike | Location, storage_options: Any = None) -> None:
    """Consolidate the metadata of the Zarr group at ``path`` (one read opens it all).

    xarray and other readers open a consolidated group with one request,
    which matters on object stores.
    """
    with warnings.catch_warnings():
        # consolidated metadata is not yet in the Zarr v3 specification
        warnings.simplefilter("ignore")
        zarr.consolidate_metadata(zarr_store(path, storage_options=storage_options))
