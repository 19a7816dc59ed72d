"""Rows appended to an ingested store: :func:`append`, all arrays together, atomically.

A store written by :func:`distsketch.io.ingest` holds ``X`` and, when
labelled, ``y``, and a manifest recording their rows and layout
(:mod:`distsketch.io.layout`).  Readers refuse arrays whose shape differs
from that record, so rows added by hand (``resize`` and a write, possibly
through a stale consolidated view that leaves fill values) are never read as
data; this module is the way to add rows.  The protocol::

    1. lock the store (an OS lock; on an object store a writer's claim), roll back
       an append that was interrupted before (its journal is still there);
       check X and y against the manifest
    2. write the journal .distsketch-append.json: the old shapes, and a copy of
       the group's zarr.json and of each array's last, partly filled chunk
       (the only existing objects an append rewrites besides metadata)
    3. grow X and y and write the new rows (old rows keep their values)
    4. check every row and chunk, update the group attributes, re-consolidate
       the metadata, then write the manifest (rows, layout) LAST
    5. delete the journal

A failure in 2–4 rolls back at once: the arrays are cut back to their old
shapes (chunks past them deleted), the saved chunks and group metadata
restored; the manifest was not touched.  A process killed in 2–4
leaves the journal: readers refuse the store (its arrays disagree with the
manifest) until the next append rolls it back.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from distsketch.errors import DistsketchError, InputError, StoreError
from distsketch.io.class_codes import MAX_CLASSES, class_names
from distsketch.io.layout import JOURNAL_NAME, LAYOUT_KEY
from distsketch.io.manifest import provenance, read_manifest, write_manifest
from distsketch.io.stores import consolidate, open_zarr, zarr_store
from distsketch.io.urls import Location, resolve
from distsketch.io.writes import layout_of
from distsketch.ops.namespace import densify
from distsketch.validation.finite import cast_checked, check_finite_stored

__all__ = ["JOURNAL_NAME", "StoreAppender", "append"]

def append(store: str | os.PathLike, X: Any, y: Any = None, *, allow_nan: bool = False,
           source: str | None = None, storage_options: dict | None = None) -> Path | str:
    """Append in-memory rows ``X`` (and labels ``y``) to an ingested store, atomically.

    The array case of :func:`distsketch.io.append` (:mod:`distsketch.io.growing`),
    which also reads files and documents the parameters, the errors and what
    readers see; the protocol is this module's.

    Returns
    -------
    pathlib.Path or str
        The store (a URL for a URL ``store``).
    """
    with StoreAppender.open(store, storage_options=storage_options) as app:
        app.write(X, y, allow_nan=allow_nan)
        app.commit(source=source)
    return app.loc.user_path()


class StoreAppender:
    """One append to a store (use :meth:`open`; :func:`append` is the usual entry)."""

    def __init__(self, loc: Location, manifest: dict, arrays: dict[str, zarr.Array]):
        self.loc = loc
        self.manifest = manifest
        self.arrays = arrays
        self.old = {name: tuple(int(s) for s in a.shape) for name, a in arrays.items()}
        self.n0 = self.old["X"][0]
        self.rows = 0
        self.committed = False
        self.claim: Any = None  # the location's writer lock (confirm() before the commit)
        # a y of class codes: the stored names, grown by names first seen in an append
        names = class_names(arrays["y"], f"{loc.url}::y") if "y" in arrays else None
        self.classes: list[str] | None = None if names is None else names.tolist()
        self.n_classes0 = 0 if self.classes is None else len(self.classes)

    @classmethod
    @contextlib.contextmanager
    def open(cls, store: str | os.PathLike | Location, *,
             storage_options: dict | None = None) -> Iterator[StoreAppender]:
        """Lock ``store``, check it and journal it; roll back unless :meth:`commit` ran."""
        loc = resolve(store, storage_options)
        # one writer per store: an OS lock on its folder, or a claim object beside it
        with loc.writer_lock("appending to") as claim:
            rollback(loc)
            app = cls._checked(loc)
            app.claim = claim
            app._journal()
            try:
                yield app
            except BaseException:
                if not app.committed:
                    app._undo()
                raise
            if not app.committed:
                app._undo()

    @classmethod
    def _checked(cls, loc: Location) -> StoreAppender:
        manifest = read_manifest(loc)
        manifest = manifest or {}
        kind = manifest.get("kind")
        if kind == "ingest":
            names = [n for n in ("X", "y") if n in (manifest.get("arrays") or ["X"])]
        elif kind == "array" and manifest.get("array") == "X":
            names = ["X"]  # write_array's group of one array
        else:
            raise StoreError(
                f"{loc.url} is not a store written by `distsketch ingest` (its manifest "
                f"{'is missing' if not manifest else 'says ' + repr(kind)}); rows can be "
                "appended only to an ingested store (or write_array's X). Ingest the data first.")
        arrays = {}
        for name in names:
            open_zarr(loc, name)  # refuses arrays that disagree with the manifest
            # every chunk written, zeros included: a missing chunk means lost data (the
            # config= argument is not applied when opening, the global setting is)
            with zarr.config.set({"array.write_empty_chunks": True}):
                arrays[name] = zarr.open_array(zarr_store(loc.child(name)), mode="r+")
        return cls(loc, manifest, arrays)

    def write(self, X: Any, y: Any = None, *, allow_nan: bool = False,
              line_of: Any = None) -> None:
        """Append the rows ``X`` (and their labels ``y``), checked and cast."""
        where = f"rows appended to {self.loc.url}"
        X = np.asarray(densify(X))
        xa = self.arrays["X"]
        if X.ndim != 2 or X.shape[1] != xa.shape[1]:
            raise InputError(f"cannot append rows of shape {X.shape} to {self.loc.url}: its X has "
                             f"{xa.shape[1]} columns; append rows of shape (k, {xa.shape[1]}).")
        _check_kind(X.dtype, xa.dtype, "X", self.loc)
        first = self.n0 + self.rows
        X = cast_checked(X, xa.dtype, where=where, row_start=first, line_of=line_of)
        if not allow_nan:
            check_finite_stored(X, first, where, line_of, action="appending")
        Y = None
        if "y" in self.arrays:
            ya = self.arrays["y"]
            if y is None:
                raise InputError(f"{self.loc.url} has labels y: pass the labels of the "
                                 f"{X.shape[0]} new rows (y=, CLI: --labels).")
            Y = np.asarray(y)
            if self.classes is not None:
                Y = self._codes(Y, first)
            if Y.shape != (X.shape[0], *ya.shape[1:]):
                raise InputError(f"labels of shape {Y.shape} for {X.shape[0]} new rows; expected "
                                 f"{(X.shape[0], *ya.shape[1:])} to match the rows and the "
                                 f"store's y {tuple(ya.shape)}.")
            _check_kind(Y.dtype, ya.dtype, "y", self.loc)
            Y = cast_checked(Y, ya.dtype, where=f"labels {where}", row_start=first)
            if not allow_nan:
                check_finite_stored(Y.reshape(Y.shape[0], -1), first, f"labels {where}",
                                    action="appending")
        elif y is not None:
            raise InputError(f"{self.loc.url} has no labels y; append its rows without labels.")
        k = int(X.shape[0])
        if not k:
            return
        try:
            self._write(first, k, X, Y)
        except DistsketchError:
            raise
        except Exception as exc:
            raise StoreError(f"cannot append to {self.loc.url} ({type(exc).__name__}: {exc}); "
                             "the store is left as it was.") from exc
        self.rows += k

    def _codes(self, labels: np.ndarray, first: int) -> np.ndarray:
        """Class names as the store's codes; a name not seen before gets the next code."""
        assert self.classes is not None
        if labels.dtype.kind not in "UO" or labels.ndim != 1:
            raise InputError(
                f"{self.loc.url} stores its labels as class names ({', '.join(self.classes[:5])}"
                f"{', ...' if len(self.classes) > 5 else ''}); pass the labels of the new rows "
                "as names (strings), not numbers (CLI: a CSV label column with --class-labels).")
        codes = {name: i for i, name in enumerate(self.classes)}
        out = np.empty(labels.shape[0], dtype=np.int32)
        for i, label in enumerate(labels.tolist()):
            if not isinstance(label, str) or not label or len(label) > 1024:
                raise InputError(f"label of appended row {first + i} is {str(label)[:40]!r}; class "
                                 "names are non-empty strings of at most 1024 characters.")
            code = codes.get(label)
            if code is None:
                if len(self.classes) >= MAX_CLASSES:
                    raise InputError(f"appended row {first + i} brings more than {MAX_CLASSES} "
                                     "class names; is the label column an identifier?")
                code = codes[label] = len(self.classes)
                self.classes.append(label)
            out[i] = code
        return out

    def _write(self, first: int, k: int, X: np.ndarray, Y: np.ndarray | None) -> None:
        for name, block in (("X", X), ("y", Y)):
            if block is None:
                continue
            arr = self.arrays[name]
            arr.resize((first + k, *arr.shape[1:]))
            arr[first:first + k] = block

    def commit(self, source: str | None = None) -> None:
        """Verify, re-consolidate and write the manifest (last); the journal is then removed."""
        n = self.n0 + self.rows
        for name in self.arrays:
            arr = zarr.open_array(zarr_store(self.loc.child(name), read_only=True), mode="r")
            if arr.shape[0] != n or arr.nchunks_initialized != arr.nchunks:
                raise StoreError(
                    f"appending to {self.loc.url}: {name} has {arr.shape[0]} rows and "
                    f"{arr.nchunks_initialized} of {arr.nchunks} chunks, expected {n} rows; the "
                    "store is left as it was. Retry; if it persists the disk may be full.")
        if self.classes is not None and len(self.classes) > self.n_classes0:
            # new names only ever extend the list: the codes of stored rows keep their names
            self.arrays["y"].attrs["classes"] = list(self.classes)
        man = dict(self.manifest)
        if self.classes is not None:
            man["n_classes"] = len(self.classes)
        if man.get("kind") == "ingest" or "rows" in man:
            man["rows"] = n
        if isinstance(man.get("shape"), list):
            man["shape"] = [n, *man["shape"][1:]]
        man[LAYOUT_KEY] = layout_of(self.loc, sorted(self.arrays))
        man["appends"] = [*(man.get("appends") or []),
                          {"rows": self.rows, "first_row": self.n0, "at": time.time(),
                           **({"source": str(source)} if source else {})}]
        self.claim.confirm()  # no other writer took the store meanwhile
        root = zarr.open_group(store=zarr_store(self.loc), mode="r+", use_consolidated=False)
        if isinstance(root.attrs.get("ingest"), dict):
            old: Any = root.attrs["ingest"]
            root.attrs["ingest"] = dict(old) | {"rows": n}
        root.attrs["provenance"] = provenance(man)
        consolidate(self.loc)
        write_manifest(self.loc, man)
        self.committed = True
        _remove_journal(self.loc)

    # the journal: old shapes and the one chunk per array an append rewrites

    def _journal(self) -> None:
        token = uuid.uuid4().hex[:12]
        saved = {}
        for name, arr in self.arrays.items():
            unit = (arr.shards or arr.chunks)[0]
            n = self.old[name][0]
            if n % unit == 0:
                continue  # the last chunk is full: an append only adds chunks
            key = f"{name}/" + arr.metadata.encode_chunk_key((n // unit,) + (0,) * (arr.ndim - 1))
            backup = f".distsketch-append-{token}-{name}.bak"
            try:
                self.loc.write_bytes(backup, self.loc.read_bytes(key))
            except FileNotFoundError:
                continue
            saved[name] = {"key": key, "backup": backup}
        # the group's metadata (attributes, consolidated view) come back byte for byte
        saved[""] = {"key": "zarr.json", "backup": f".distsketch-append-{token}-root.bak"}
        self.loc.write_bytes(saved[""]["backup"], self.loc.read_bytes("zarr.json"))
        body = {"token": token, "shapes": {k: list(v) for k, v in self.old.items()},
                "chunks": saved}
        self.loc.write_bytes(JOURNAL_NAME, json.dumps(body).encode())

    def _undo(self) -> None:
        rollback(self.loc)


def rollback(loc: Location) -> bool:
    """Undo an append to ``loc`` that did not commit (its journal is there); True if one was.

    The arrays are cut back to the journal's shapes (chunks past them are
    deleted), and the saved chunks and group metadata written back.
    """
    try:
        raw = loc.read_bytes(JOURNAL_NAME)
    except FileNotFoundError:
        return False
    try:
        body = json.loads(raw)
        shapes = {str(k): tuple(int(s) for s in v) for k, v in body["shapes"].items()}
        saved = dict(body.get("chunks") or {})
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StoreError(f"the append journal {loc.url}/{JOURNAL_NAME} is damaged ({exc}); the "
                         "store cannot be rolled back. Re-ingest it.") from exc
    try:
        for name, shape in shapes.items():
            arr = zarr.open_array(zarr_store(loc.child(name)), mode="r+")
            if tuple(arr.shape) != shape:
                arr.resize(shape)
        for item in saved.values():
            loc.write_bytes(item["key"], loc.read_bytes(item["backup"]))
        if "" not in saved:
            consolidate(loc)
    except Exception as exc:
        raise StoreError(f"cannot roll back the interrupted append to {loc.url} "
                         f"({type(exc).__name__}: {exc}); retry, or re-ingest the store.") from exc
    for item in saved.values():
        with contextlib.suppress(FileNotFoundError, OSError):
            loc.fs.rm_file(loc.child(item["backup"]).path)
    _remove_journal(loc)
    return True


def _remove_journal(loc: Location) -> None:
    with contextlib.suppress(FileNotFoundError):
        loc.fs.rm_file(loc.child(JOURNAL_NAME).path)
    with contextlib.suppress(FileNotFoundError, OSError):
        for f in loc.fs.glob(loc.child(".distsketch-append-*.bak").path):
            loc.fs.rm_file(f)


def _check_kind(have: np.dtype, want: np.dtype, name: str, loc: Location) -> None:
    """Refuse values of another kind than the stored array holds (text, complex, float into int)."""
    ok = np.dtype(have).kind in "biuf" and np.can_cast(have, want, casting="same_kind")
    if not ok:
        raise InputError(f"cannot append {name} of dtype {np.dtype(have)} to {loc.url}: its {name} "
                         f"holds {np.dtype(want)}. Convert the values to {np.dtype(want)} first.")
