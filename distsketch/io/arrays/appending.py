"""Rows appended to an ingested store: :func:`append`, all arrays together, atomically.

Readers refuse arrays whose shape differs from the manifest's record
(:mod:`distsketch.io.commit.layout`), so rows added by hand are never read as
data; this module is the way to add rows.  The protocol (lock, journal and
backups, grow, check, manifest last, remove the journal) and what a failure or
a kill leaves are in docs/storage.md, "Growing a store"; the checks of a journal
before :func:`rollback` acts on it, in docs/security.md.  The journal comes
before its backups, and no chunk is changed until every backup is written (each
atomically), so a process killed meanwhile leaves nothing that no journal names.

Over 500 lines because the append, its journal and the journal's validation before any
rollback are one atomic operation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import stat
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from distsketch.errors import DistsketchError, InputError, StoreError
from distsketch.io.arrays.class_codes import (
    MAX_CLASS_NAME,
    MAX_CLASSES,
    class_name_clash,
    class_name_problem,
    class_names,
    nfc,
)
from distsketch.io.arrays.stores import consolidate, open_zarr, zarr_store
from distsketch.io.arrays.writes import layout_of
from distsketch.io.commit.layout import (
    JOURNAL_NAME,
    LAYOUT_KEY,
    array_record,
    layout_differences,
    recorded_layout,
)
from distsketch.io.commit.manifest import MANIFEST_NAME, provenance, read_manifest, write_manifest
from distsketch.io.storage.urls import Location, resolve
from distsketch.ops.namespace import densify
from distsketch.validation.finite import cast_checked, check_exact_integers, check_finite_stored

__all__ = ["JOURNAL_NAME", "StoreAppender", "append", "match_columns"]

def append(store: str | os.PathLike, X: Any, y: Any = None, *, allow_nan: bool = False,
           source: str | None = None, storage_options: dict | None = None) -> Path | str:
    """Append in-memory rows ``X`` (and labels ``y``) to an ingested store, atomically.

    The array case of :func:`distsketch.io.append`, which documents the
    parameters, the errors and what readers see; the protocol is this module's.
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
        self.folder = _identity(loc)  # the folder locked (checked before every write)
        # a y of class codes: the stored names, grown by names first seen in an append
        names = class_names(arrays["y"], f"{loc.url}::y") if "y" in arrays else None
        self.classes: list[str] | None = None if names is None else names.tolist()
        self.n_classes0 = 0 if self.classes is None else len(self.classes)
        # the stored names by their NFC form: a new name that only differs from one of
        # them in its Unicode normalisation would be a second class that looks the same
        self._nfc = {} if self.classes is None else {nfc(n): n for n in self.classes}

    @classmethod
    @contextlib.contextmanager
    def open(cls, store: str | os.PathLike | Location, *,
             storage_options: dict | None = None) -> Iterator[StoreAppender]:
        """Lock ``store``, check it and journal it; roll back unless :meth:`commit` ran."""
        loc = resolve(store, storage_options)
        folder = _identity(loc)
        # one writer per store: an OS lock on its folder, or a claim object beside it
        with loc.writer_lock("appending to") as claim:
            # the folder locked is the one at the path: `ingest --overwrite` moves a store
            # aside only under this lock, so from here on the path names the locked store
            if _identity(loc) != folder:
                raise StoreError(
                    f"{loc.url} was replaced (by `ingest --overwrite` or another writer) while "
                    "this append was taking its lock; nothing was appended. Append again: the "
                    "rows then go to the store that is there now.")
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
        manifest = read_manifest(loc) or {}
        arrays = {}
        for name in _array_names(loc, manifest):
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
        xa = self.arrays["X"]
        order = self._column_order(X)
        if isinstance(X, np.ma.MaskedArray) and np.ma.getmaskarray(X).any():
            raise InputError(f"cannot append a masked array to {self.loc.url}: its masked values "
                             "would be stored as the numbers under the mask. Fill them "
                             "(X.filled(np.nan) with allow_nan=True) or drop those rows.")
        X = np.asarray(densify(X))
        if order is not None and X.ndim == 2:
            X = X[:, order]
        if X.ndim != 2 or X.shape[1] != xa.shape[1]:
            raise InputError(f"cannot append rows of shape {X.shape} to {self.loc.url}: its X has "
                             f"{xa.shape[1]} columns; append rows of shape (k, {xa.shape[1]}).")
        _check_kind(X.dtype, xa.dtype, "X", self.loc)
        first = self.n0 + self.rows
        # ingest's rule: an integer the stored dtype would round is refused, never rounded
        check_exact_integers(X, xa.dtype, where=where, row_start=first, line_of=line_of)
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
            # integer labels beyond 2**53 would collapse into one float64 label
            check_exact_integers(Y, ya.dtype, where=f"labels {where}", row_start=first,
                                 column=lambda _: "the label")
            Y = cast_checked(Y, ya.dtype, where=f"labels {where}", row_start=first)
            if not allow_nan:
                check_finite_stored(Y.reshape(Y.shape[0], -1), first, f"labels {where}",
                                    action="appending")
        elif y is not None:
            raise InputError(f"{self.loc.url} has no labels y; append its rows without labels.")
        k = int(X.shape[0])
        if not k:
            return
        self._same_store()
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
        if labels.dtype.kind == "S" and labels.ndim == 1:
            labels = _decoded(labels, self.loc, first)  # as ingest reads a .npy of bytes
        if labels.dtype.kind not in "UO" or labels.ndim != 1:
            raise InputError(
                f"{self.loc.url} stores its labels as class names ({_shown(self.classes[:5])}"
                f"{', ...' if len(self.classes) > 5 else ''}); pass the labels of the new rows "
                "as names (strings), not numbers (a file's label column: class_labels=True, "
                "CLI: --class-labels).")
        codes = {name: i for i, name in enumerate(self.classes)}
        out = np.empty(labels.shape[0], dtype=np.int32)
        for i, label in enumerate(labels.tolist()):
            if not isinstance(label, str):
                raise InputError(f"label of appended row {first + i} is {str(label)[:40]!r}; class "
                                 f"names are non-empty strings of at most {MAX_CLASS_NAME} "
                                 "characters.")
            label = label.strip()  # ingest stores every label stripped of blanks
            code = codes.get(label)
            # the rule of ingest, and no second spelling of a stored name
            problem = None if code is not None else \
                class_name_problem(label) or class_name_clash(label, self._nfc)
            if problem is not None:
                raise InputError(f"labels appended to {self.loc.url}: row {first + i}: {problem}")
            if code is None:
                if len(self.classes) >= MAX_CLASSES:
                    raise InputError(f"appended row {first + i} brings more than {MAX_CLASSES} "
                                     "class names; is the label column an identifier?")
                code = codes[label] = len(self.classes)
                self.classes.append(label)
                self._nfc[nfc(label)] = label
            out[i] = code
        return out

    def _column_order(self, X: Any) -> list[int] | None:
        """The columns of a DataFrame ``X`` in the store's feature order (:func:`match_columns`)."""
        columns = getattr(X, "columns", None)
        if columns is None or isinstance(X, np.ndarray):
            return None
        given = list(columns)
        if not all(isinstance(c, str) for c in given):
            return None  # a table without names (0, 1, ...): matched by position, as an array
        return match_columns(given, None, self.manifest, self.arrays["X"],
                             f"the table appended to {self.loc.url}", self.loc.url)

    def _same_store(self) -> None:
        """Refuse to go on if the store at the path is not the folder this append locked."""
        if _identity(self.loc) != self.folder:
            raise StoreError(
                f"{self.loc.url} was replaced while rows were appended to it; this append "
                "stopped and wrote nothing more. Append the rows again.")

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
        self._same_store()
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
        token = uuid.uuid4().hex[:_TOKEN_LEN]
        # binds the journal to this store as it is now: the manifest changes only at commit
        digest = hashlib.sha256(self.loc.read_bytes(MANIFEST_NAME)).hexdigest()
        saved: dict[str, dict[str, str]] = {}
        for name, arr in self.arrays.items():
            key = _saved_chunk(name, arr, self.old[name][0])
            # None: the last chunk is full (an append only adds chunks); absent: nothing to save
            if key is not None and self.loc.isfile(key):
                saved[name] = {"key": key, "backup": _backup_name(token, name)}
        # the group's metadata (attributes, consolidated view) come back byte for byte
        saved[""] = {"key": "zarr.json", "backup": _backup_name(token, "")}
        body = {"format": JOURNAL_FORMAT, "version": JOURNAL_VERSION, "token": token,
                "manifest_sha256": digest, "appends": _n_appends(self.manifest),
                "shapes": {k: list(v) for k, v in self.old.items()}, "chunks": saved,
                "classes": None if self.classes is None else self.n_classes0}
        # the journal first, naming the backups (see the module docstring)
        try:
            self.loc.write_bytes(JOURNAL_NAME, json.dumps(body).encode())
            for item in saved.values():
                try:
                    data = self.loc.read_bytes(item["key"])
                except FileNotFoundError:
                    continue
                self.loc.write_bytes(item["backup"], data)  # atomic: complete, or not there
        except BaseException as exc:
            with contextlib.suppress(Exception):
                _remove_journal(self.loc)  # its backups, then itself: the store is as it was
            if isinstance(exc, Exception) and not isinstance(exc, DistsketchError):
                raise StoreError(f"cannot write the append journal of {self.loc.url} "
                                 f"({type(exc).__name__}: {exc}); nothing was appended and the "
                                 "store is as it was. Retry; if it persists the disk may be "
                                 "full.") from exc
            raise

    def _undo(self) -> None:
        rollback(self.loc)


#: what an append journal says it is; only this format is acted on
JOURNAL_FORMAT = "distsketch-append-journal"
#: 2: written before its backups, records the number of class names; 1 (backups first, no
#: class count) is still rolled back
JOURNAL_VERSION = 2
_VERSIONS = (1, 2)
#: a journal is a few hundred bytes: anything larger is not one (and is not read whole)
_JOURNAL_MAX_BYTES = 64 * 1024
_TOKEN_LEN = 12
#: the suffix of LocalLocation.write_bytes's temporary
_PART = ".part"
_TOKEN = re.compile(rf"[0-9a-f]{{{_TOKEN_LEN}}}")
_DIGEST = re.compile(r"[0-9a-f]{64}")
#: the arrays an append grows (see _array_names); "" is the group's zarr.json
_ARRAYS = ("X", "y")


@dataclasses.dataclass(frozen=True)
class _Journal:
    """An append journal whose form was checked: every name is one distsketch writes."""

    token: str
    digest: str
    appends: int
    shapes: dict[str, tuple[int, ...]]
    chunks: dict[str, tuple[str, str]]  # array ("" for the group) -> (key, backup)
    classes: int | None  # class names of y before the append (None: no names, or version 1)

    @property
    def backups(self) -> list[str]:
        return [backup for _, backup in self.chunks.values()]


def _backup_name(token: str, name: str) -> str:
    return f".distsketch-append-{token}-{name or 'root'}.bak"


def _saved_chunk(name: str, arr: zarr.Array, rows: int) -> str | None:
    """The key of ``arr``'s last, partly filled chunk (or shard) at ``rows`` rows: the one
    existing chunk an append rewrites (None when the last chunk is full)."""
    unit = (arr.shards or arr.chunks)[0]
    if rows % unit == 0:
        return None
    return f"{name}/" + arr.metadata.encode_chunk_key((rows // unit,) + (0,) * (arr.ndim - 1))


def _n_appends(manifest: dict) -> int:
    appends = manifest.get("appends")
    return len(appends) if isinstance(appends, list) else 0


def _array_names(loc: Location, manifest: dict) -> list[str]:
    """The arrays an append to ``loc`` grows, as its manifest records them."""
    kind = manifest.get("kind")
    if kind == "ingest":
        return [n for n in _ARRAYS if n in (manifest.get("arrays") or ["X"])]
    if kind == "array" and manifest.get("array") == "X":
        return ["X"]  # write_array's group of one array
    raise StoreError(
        f"{loc.url} is not a store written by `distsketch ingest` (its manifest "
        f"{'is missing' if not manifest else 'says ' + repr(kind)}); rows can be "
        "appended only to an ingested store (or write_array's X). Ingest the data first.")


def _refused(loc: Location, reason: str) -> StoreError:
    return StoreError(
        f"the append journal {loc.child(JOURNAL_NAME).url} was not written by an append to this "
        f"store ({reason}); it was not acted on and nothing was changed. If no append to "
        f"{loc.url} is running, check that file and remove it by hand (with the "
        "`.distsketch-append-*.bak` files beside it), then append again; if readers still "
        "refuse the store, re-ingest it (`distsketch ingest SRC STORE --overwrite`).")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_count(value: Any) -> bool:
    return type(value) is int and value >= 0  # not a bool, a float or a string


def _journal_present(loc: Location) -> bool:
    if loc.supports_links:
        return os.path.lexists(loc.child(JOURNAL_NAME).path)  # a link is there, and refused
    return loc.isfile(JOURNAL_NAME)


def _regular_file(loc: Location, name: str, what: str) -> bool:
    """Whether ``name`` in ``loc`` exists; refuse it if it is a link or not a regular file."""
    if not loc.supports_links:
        return loc.isfile(name)  # object stores hold objects only: no links
    path = loc.child(name).path
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(mode):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        raise _refused(loc, f"{what} {path} is a symbolic link (-> {target}); distsketch never "
                            "follows a link in a store")
    if not stat.S_ISREG(mode):
        raise _refused(loc, f"{what} {path} is not a regular file")
    return True


def _read_journal(loc: Location) -> _Journal:
    """The journal of ``loc``, its form checked (names, token, format); StoreError if not."""
    _regular_file(loc, JOURNAL_NAME, "the journal")
    with loc.fs.open(loc.child(JOURNAL_NAME).path, "rb") as f:
        raw = f.read(_JOURNAL_MAX_BYTES + 1)
    if len(raw) > _JOURNAL_MAX_BYTES:
        raise _refused(loc, f"it is larger than {_JOURNAL_MAX_BYTES} bytes")
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise _refused(loc, f"it is not JSON: {_short(str(exc))}") from None
    if not isinstance(body, dict):
        raise _refused(loc, f"it holds a JSON {type(body).__name__}, not an object")
    version = body.get("version")
    if body.get("format") != JOURNAL_FORMAT or type(version) is not int \
            or version not in _VERSIONS:
        raise _refused(loc, f"its format is {_short(body.get('format'))}, version "
                            f"{_short(version)}; distsketch writes "
                            f"{JOURNAL_FORMAT!r}, version {JOURNAL_VERSION}")
    classes = body.get("classes")
    if version == 1 and "classes" in body:
        raise _refused(loc, "it is of version 1, which records no classes, but has them")
    if not (classes is None or _is_count(classes)):
        raise _refused(loc, f"its classes {_short(classes)} is not a count of class names")
    token, digest, appends = body.get("token"), body.get("manifest_sha256"), body.get("appends")
    if not isinstance(token, str) or not _TOKEN.fullmatch(token):
        raise _refused(loc, f"its token {_short(token)} is not {_TOKEN_LEN} hex digits")
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise _refused(loc, f"its manifest_sha256 {_short(digest)} is not a SHA-256 digest")
    if not isinstance(appends, int) or not _is_count(appends):
        raise _refused(loc, f"its appends {_short(appends)} is not a count")
    raw_shapes, raw_chunks = body.get("shapes"), body.get("chunks")
    if not isinstance(raw_shapes, dict) or not isinstance(raw_chunks, dict):
        raise _refused(loc, "its shapes and chunks are not both JSON objects")
    shapes: dict[str, tuple[int, ...]] = {}
    for name, shape in raw_shapes.items():
        if name not in _ARRAYS:
            raise _refused(loc, f"shapes names {_short(name)}, which is not an array an append "
                                f"grows ({', '.join(_ARRAYS)})")
        if not isinstance(shape, list) or not shape or not all(_is_count(s) for s in shape):
            raise _refused(loc, f"shapes[{name!r}] is {_short(shape)}, not a shape")
        shapes[name] = tuple(shape)
    chunks: dict[str, tuple[str, str]] = {}
    for name, item in raw_chunks.items():
        if name not in (*shapes, ""):
            raise _refused(loc, f"chunks names {_short(name)}, which is not an array of its shapes "
                                "(or \"\" for the group's zarr.json)")
        if not isinstance(item, dict) or set(item) != {"key", "backup"}:
            raise _refused(loc, f"chunks[{name!r}] is {_short(item)}, not {{key, backup}}")
        key, backup = item["key"], item["backup"]
        if backup != _backup_name(token, name):
            raise _refused(loc, f"chunks[{name!r}] names the backup {_short(backup)}; an append "
                                f"with token {token} names it {_backup_name(token, name)!r}")
        if name == "" and key != "zarr.json":
            raise _refused(loc, f"chunks[\"\"] names {_short(key)}; it saves the group's zarr.json")
        if not isinstance(key, str):
            raise _refused(loc, f"chunks[{name!r}] names the key {_short(key)}")
        chunks[name] = (key, backup)
    if "" not in chunks:
        raise _refused(loc, "it saves no copy of the group's zarr.json")
    return _Journal(token, digest, appends, shapes, chunks, classes)


def _check_arrays(loc: Location, journal: _Journal, manifest: dict,
                  arrays: dict[str, zarr.Array]) -> None:
    """Refuse ``journal`` unless its shapes and chunks are what an append to ``loc`` at
    the manifest's rows journals (old shapes as recorded, the last partly filled chunk)."""
    recorded = manifest.get("n_classes")
    if journal.classes is not None and _is_count(recorded) and recorded != journal.classes:
        raise _refused(loc, f"it records {journal.classes} class names before the append; the "
                            f"store's manifest records {recorded}")
    if set(journal.shapes) != set(arrays):
        raise _refused(loc, f"it records the arrays {sorted(journal.shapes)}; the store's manifest "
                            f"records {sorted(arrays)}")
    for name, arr in arrays.items():
        old, now = journal.shapes[name], tuple(int(s) for s in arr.shape)
        rec = recorded_layout(manifest, name)
        if rec is None:
            raise _refused(loc, f"the store's manifest records no layout of {name}")
        diff = layout_differences({k: v for k, v in rec.items() if k not in ("shape", "rows")},
                                  array_record(arr))
        if diff:
            raise _refused(loc, f"{name}'s metadata differ from the manifest ({'; '.join(diff)})")
        want = rec.get("shape")
        if isinstance(want, list):
            agrees = old == tuple(want)
        else:
            agrees = old[0] == rec.get("rows") and old[1:] == now[1:]
        if not agrees:
            recorded = tuple(want) if isinstance(want, list) else f"{rec.get('rows')} rows"
            raise _refused(loc, f"it records {name} with shape {old}; the manifest records "
                                f"{recorded}")
        if len(old) != len(now) or old[1:] != now[1:] or old[0] > now[0]:
            raise _refused(loc, f"it records {name} with shape {old}; {name} has shape {now} "
                                "(an append only adds rows)")
        if name in journal.chunks:
            key = journal.chunks[name][0]
            expected = _saved_chunk(name, arr, old[0])
            if key != expected:
                raise _refused(
                    loc, f"chunks[{name!r}] names {_short(key)}; an append to {name} at {old[0]} "
                         + (f"rows saves only {expected!r}" if expected else
                            "rows saves no chunk of it (its last chunk is full)"))


def _committed(loc: Location, journal: _Journal) -> bool:
    """Whether the manifest now records the append that wrote ``journal``: one append more
    than when it was written, starting at its old rows (killed after the commit)."""
    try:
        manifest = read_manifest(loc) or {}
    except StoreError:
        return False
    appends = manifest.get("appends")
    rows = journal.shapes.get("X", (None,))[0]
    return (isinstance(appends, list) and len(appends) == journal.appends + 1
            and isinstance(appends[-1], dict) and _is_count(appends[-1].get("first_row"))
            and appends[-1]["first_row"] == rows)


def rollback(loc: Location) -> bool:
    """Undo an append to ``loc`` that did not commit (its journal is there); True if one was.

    The journal is checked in full first (a StoreError, nothing changed, when
    an append to this store did not write it); then the arrays are cut back to
    its shapes and the saved chunks and group metadata written back.  A journal
    whose append did commit (killed before it removed the journal) is removed;
    False.
    """
    _remove_stale_part(loc)
    if not _journal_present(loc):
        return False
    journal = _read_journal(loc)
    for backup in journal.backups:
        _regular_file(loc, backup, "the backup")
    loc.refuse_links("Zarr store")  # nothing in the store is read through a link
    try:
        digest = hashlib.sha256(loc.read_bytes(MANIFEST_NAME)).hexdigest()
    except FileNotFoundError:
        raise _refused(loc, f"the store has no manifest {MANIFEST_NAME}") from None
    if digest != journal.digest:
        if _committed(loc, journal):
            _remove_journal(loc, journal)  # only its own backups and itself
            return False
        raise _refused(loc, f"it records the manifest digest {journal.digest[:12]}..., the "
                            f"store's {MANIFEST_NAME} has {digest[:12]}...")
    manifest = read_manifest(loc) or {}
    arrays = {}
    for name in _array_names(loc, manifest):
        try:
            arrays[name] = zarr.open_array(zarr_store(loc.child(name)), mode="r+")
        except Exception as exc:
            raise StoreError(f"cannot roll back the interrupted append to {loc.url}: its array "
                             f"{name} does not open ({type(exc).__name__}: {exc}); nothing was "
                             "changed. Re-ingest the store.") from exc
    _check_arrays(loc, journal, manifest, arrays)
    try:
        for name, shape in journal.shapes.items():
            if tuple(arrays[name].shape) != shape:
                _cut(loc, name, arrays[name], shape)
        for key, backup in journal.chunks.values():
            try:
                data = loc.read_bytes(backup)
            except FileNotFoundError:
                # never written (the append died before it changed anything), or restored
                # by a rollback killed while it removed the backups
                continue
            loc.write_bytes(key, data)
        if journal.classes is not None and "y" in arrays:
            names = arrays["y"].attrs.get("classes")
            if isinstance(names, list) and len(names) > journal.classes:
                # names first seen in the append were written to y's attributes at commit
                arrays["y"].attrs["classes"] = names[:journal.classes]
    except Exception as exc:
        raise StoreError(f"cannot roll back the interrupted append to {loc.url} "
                         f"({type(exc).__name__}: {exc}); retry, or re-ingest the store.") from exc
    _remove_journal(loc, journal)
    return True


def _remove_journal(loc: Location, journal: _Journal | None = None) -> None:
    """Delete the backups ``journal`` names (exactly those), then the journal itself: a
    process killed in between leaves no backup that no journal names."""
    if journal is None:
        with contextlib.suppress(StoreError, OSError):
            journal = _read_journal(loc)  # this append's own, just committed
    for backup in journal.backups if journal is not None else ():
        # and its temporary (LocalLocation.write_bytes writes NAME.part, then renames it)
        for name in (backup, backup + _PART) if loc.supports_links else (backup,):
            with contextlib.suppress(FileNotFoundError, OSError):
                loc.fs.rm_file(loc.child(name).path)
    with contextlib.suppress(FileNotFoundError):
        loc.fs.rm_file(loc.child(JOURNAL_NAME).path)


def _remove_stale_part(loc: Location) -> None:
    """Remove the journal's temporary left by an append killed while writing its journal
    (nothing else was written then); a link there is left for the link check to refuse."""
    if not loc.supports_links:
        return  # an object is written in one put: no temporary
    path = loc.child(JOURNAL_NAME + _PART).path
    with contextlib.suppress(OSError):
        if stat.S_ISREG(os.lstat(path).st_mode):
            os.unlink(path)


def _cut(loc: Location, name: str, arr: zarr.Array, shape: tuple[int, ...]) -> None:
    """Resize ``arr`` down to ``shape``, deleting the chunk files past it that exist.

    Zarr's own resize enumerates every chunk position of the current shape: a
    shape edited to 10**15 rows would take hours and all memory.  The files are
    listed instead, and only this array's chunk keys past the new rows deleted.
    """
    from zarr.core.sync import sync

    unit = (arr.shards or arr.chunks)[0]
    keep = -(-shape[0] // unit)
    base = loc.child(name).path.rstrip("/")
    loc.fs.invalidate_cache(base)
    for path in loc.fs.find(base):
        path = str(path)
        if not path.startswith(base + "/"):
            continue
        coords = _chunk_coords(arr, path[len(base) + 1:])
        if coords is not None and coords[0] >= keep:
            loc.fs.rm_file(path)
    sync(arr.async_array.resize(shape, delete_outside_chunks=False))


def _chunk_coords(arr: zarr.Array, key: str) -> tuple[int, ...] | None:
    """The grid position whose key in ``arr`` is exactly ``key``; None for any other name."""
    for sep in ("/", "."):
        parts = key.split(sep)
        if parts and parts[0] == "c":
            parts = parts[1:]
        if len(parts) != arr.ndim or not all(p.isascii() and p.isdigit() for p in parts):
            continue
        coords = tuple(int(p) for p in parts)
        if arr.metadata.encode_chunk_key(coords) == key:
            return coords
    return None


def _identity(loc: Location) -> tuple[int, int] | None:
    """The local folder at ``loc`` (device, inode), to tell it from one renamed into its
    place; None on an object store (its claim object guards it) or when there is none."""
    if not loc.supports_rename:
        return None
    try:
        st = os.stat(loc.path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _decoded(labels: np.ndarray, loc: Location, first: int) -> np.ndarray:
    """Byte-string labels as text, as ingest reads a ``.npy`` of bytes (ASCII)."""
    try:
        return labels.astype(str)
    except UnicodeDecodeError as exc:
        raise InputError(f"labels appended to {loc.url}: a label of rows {first}.. is not ASCII "
                         f"text ({exc.reason}); pass the names as str (Unicode), not bytes."
                         ) from None


def _shown(names: list[str]) -> str:
    return ", ".join(map(repr, names[:20])) + (" ..." if len(names) > 20 else "")


def _names(value: Any, width: int | None = None) -> list[str] | None:
    """``value`` as a list of column names (of ``width`` names), or None when it is not one."""
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        return None
    return value if width is None or len(value) == width else None


def match_columns(given: list[str], label_given: str | None, manifest: dict, xa: Any,
                  what: str, url: str) -> list[int] | None:
    """Columns named ``given`` in the store's feature order, or None to keep them as they are.

    Rows appended with names of their own (a file's header, a DataFrame's
    columns) are matched to the store's feature names by name: the same
    distinct names in another order are reordered, other names are refused
    (matching by position would put values under the wrong feature).  A store
    without names is matched by position.
    """
    width = int(xa.shape[1])
    attrs = getattr(xa, "attrs", {})
    stored = _names(manifest.get("feature_names"), width) or \
        _names(attrs.get("feature_names") if hasattr(attrs, "get") else None, width)
    if stored is None:
        return None
    label_stored = manifest.get("label_column")
    if isinstance(label_stored, str) and isinstance(label_given, str) and \
            label_stored != label_given:
        raise InputError(
            f"{what}: its label column is {label_given!r}, but {url} records the label column "
            f"{label_stored!r}; append a file whose labels are in a column named "
            f"{label_stored!r} (label_column={label_stored!r}, CLI: --label-column "
            f"{label_stored}), or rename the column.")
    if given == stored:
        return None
    if len(set(given)) == len(given) == len(set(stored)) and set(given) == set(stored):
        return [given.index(n) for n in stored]
    hint = ""
    if isinstance(label_stored, str) and label_stored in given and label_given is None:
        hint = (f" The store's label column is {label_stored!r}: pass label_column="
                f"{label_stored!r} (CLI: --label-column {label_stored}), or pass its values "
                "as the labels.")
    elif len(set(given)) != len(given) and sorted(given) == sorted(stored):
        hint = " Names that repeat cannot be matched by name: rename the duplicate columns."
    raise InputError(
        f"{what}: its columns are named {_shown(given)}, but {url} records the features "
        f"{_shown(stored)}; matching them by position would store values under the wrong "
        "feature. Append the store's feature columns (in any order: they are "
        f"matched by name), or select and rename the columns to match.{hint}")


def _check_kind(have: np.dtype, want: np.dtype, name: str, loc: Location) -> None:
    """Refuse values of another kind than the stored array holds (text, complex, float into int)."""
    ok = np.dtype(have).kind in "biuf" and np.can_cast(have, want, casting="same_kind")
    if not ok:
        raise InputError(f"cannot append {name} of dtype {np.dtype(have)} to {loc.url}: its {name} "
                         f"holds {np.dtype(want)}. Convert the values to {np.dtype(want)} first.")
