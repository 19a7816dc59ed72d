"""Digests of what distsketch wrote: each chunk's checksum at its position, each array's metadata.

A chunk's CRC-32C (:mod:`distsketch.io.storage.codecs`) proves its bytes are
some chunk's, not which one's.  The digests bind both: the 4 trailing bytes
of every chunk in chunk-grid order (8 hex characters per chunk) and a SHA-256
of each ``zarr.json`` in canonical JSON (informational attributes left out).
Inputs and outputs record them in their manifest's layout record of each array
(``layout[name]["digest"]``), models under ``digests``.  :class:`DigestStore`
checks an opened input as its bytes arrive; a model is checked on load.  A
store whose manifest records none (written before them) is read as before.
What is covered, and what is not (forgery), is in docs/security.md.

Over 500 lines because writing, recording and checking chunk digests is one contract,
kept in one module.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import re
from typing import Any

import numpy as np
import zarr
from zarr.codecs import Crc32cCodec
from zarr.storage import WrapperStore

from distsketch.errors import StoreError
from distsketch.io.commit.manifest import read_manifest
from distsketch.io.storage.urls import Location, resolve

__all__ = ["DIGEST_KEY", "MODEL_DIGESTS_KEY", "ArrayDigest", "DigestStore", "array_digest",
           "array_digests", "checked_array", "digest_of", "input_digest", "metadata_digest",
           "model_digests", "own_group", "verify_model_digests"]

#: key of an array's digest in its manifest layout record
DIGEST_KEY = "digest"
#: key of a model's digests in its manifest
MODEL_DIGESTS_KEY = "digests"
#: version of the digest records; another one is refused
DIGEST_VERSION = 1

_CRC_HEX = 8  # hex characters per chunk: the 4-byte CRC-32C
_SHA = re.compile(r"[0-9a-f]{64}")
_HEX = re.compile(r"(?:[0-9a-f]{8})*")
# attributes that copy the manifest or describe the writing installation: not read as data
_INFO_ATTRS = ("provenance",)
_MODEL_INFO_ATTRS = ("provenance", "versions", "info")
# requests in flight when the trailing bytes of many chunks are read (object stores)
_CONCURRENCY = 64


def metadata_digest(raw: bytes | str, *, model: bool = False) -> str:
    """SHA-256 (hex) of a ``zarr.json`` in canonical JSON; StoreError if not a JSON object.

    ``model=True`` leaves out the informational attributes of a model group
    too (``versions``, ``info``), which a load warns about but does not use.
    """
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise StoreError(f"not JSON ({type(exc).__name__}: {exc})") from None
    if not isinstance(body, dict):
        raise StoreError(f"holds a JSON {type(body).__name__}, not an object")
    body.pop("consolidated_metadata", None)  # a copy of the members' own metadata
    attrs = body.get("attributes")
    if isinstance(attrs, dict):
        left_out = _MODEL_INFO_ATTRS if model else _INFO_ATTRS
        body["attributes"] = {k: v for k, v in attrs.items() if k not in left_out}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _chunk_keys(arr: zarr.Array) -> list[str]:
    """Store keys of every chunk of ``arr``, in C order over its chunk grid."""
    prefix = f"{arr.path}/" if getattr(arr, "path", "") else ""
    return [prefix + arr.metadata.encode_chunk_key(idx) for idx in np.ndindex(*_grid(arr))]


def _grid(arr: zarr.Array) -> tuple[int, ...]:
    return tuple(-(-int(s) // max(1, int(c))) for s, c in zip(arr.shape, arr.chunks))


def _binds_chunks(arr: zarr.Array) -> bool:
    """Whether ``arr``'s chunks end with a CRC-32C: unsharded, its codec chain ends with it."""
    if arr.shards or int(getattr(arr.metadata, "zarr_format", 3)) != 3:
        return False
    chain: Any = tuple(getattr(arr.metadata, "codecs", ()) or ())
    return bool(chain) and isinstance(chain[-1], Crc32cCodec)


def _tails(store: Any, keys: list[str]) -> list[bytes | None]:
    """The last 4 bytes of each object ``keys`` of ``store`` (None where it is absent)."""
    from zarr.abc.store import SuffixByteRequest
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    proto = default_buffer_prototype()

    async def all_tails() -> list[bytes | None]:
        limit = asyncio.Semaphore(_CONCURRENCY)

        async def one(key: str) -> bytes | None:
            async with limit:
                buf = await store.get(key, proto, SuffixByteRequest(4))
            return None if buf is None else buf.to_bytes()

        return list(await asyncio.gather(*(one(k) for k in keys)))

    return sync(all_tails()) if keys else []


def _read_crcs(arr: zarr.Array, first: int = 0) -> str:
    """The CRCs (hex) of the chunks of ``arr`` from flat index ``first`` on, read from the store."""
    keys = _chunk_keys(arr)[first:]
    out = []
    for key, tail in zip(keys, _tails(arr.store, keys)):
        if tail is None or len(tail) != 4:
            raise StoreError(f"chunk {key} of the Zarr array being recorded is missing or shorter "
                             "than its checksum; nothing was committed. Retry the write.")
        out.append(tail.hex())
    return "".join(out)


def array_digest(arr: zarr.Array, raw_meta: bytes, previous: Any = None, *,
                 model: bool = False) -> dict[str, Any]:
    """``{"v": 1, "meta": sha256 hex, "crc32c": hex or None}`` of ``arr`` as written.

    ``crc32c`` is None for an array whose chunks do not end with a CRC-32C
    (none that distsketch writes) and ``""`` for an array without elements.
    ``previous`` is the layout record of the array before an append: the CRCs
    of the full chunks below its old last row are kept, so only the rewritten
    last chunk and the new ones are read, and a chunk moved before the append
    stays detected.
    """
    crcs: str | None = None
    if _binds_chunks(arr):
        kept = _kept(arr, previous)
        crcs = "" if arr.size == 0 else kept + _read_crcs(arr, len(kept) // _CRC_HEX)
    return {"v": DIGEST_VERSION, "meta": metadata_digest(raw_meta, model=model), "crc32c": crcs}


def _kept(arr: zarr.Array, previous: Any) -> str:
    """CRCs of ``previous`` still valid for ``arr`` after an append: its full row chunks."""
    if not isinstance(previous, dict) or arr.ndim < 1:
        return ""
    old = previous.get(DIGEST_KEY)
    shape = previous.get("shape")
    rows = shape[0] if isinstance(shape, list) and shape else previous.get("rows")
    chunks = previous.get("chunks")
    if (not isinstance(old, dict) or not isinstance(old.get("crc32c"), str)
            or not isinstance(rows, int) or chunks != [int(c) for c in arr.chunks]
            or any(g != 1 for g in _grid(arr)[1:])):
        return ""
    full = min(rows, int(arr.shape[0])) // int(arr.chunks[0])
    kept = old["crc32c"][:full * _CRC_HEX]
    return kept if len(kept) == full * _CRC_HEX and _HEX.fullmatch(kept) else ""


def array_digests(root: Location, names: list[str | None],
                  previous: dict | None = None) -> dict[str, dict[str, Any]]:
    """The digests of the arrays ``names`` of the store at ``root`` (None: the root array).

    ``previous`` is the manifest's layout before an append (see :func:`array_digest`).
    """
    out = {}
    for name in names:
        where = root if name is None else root.child(name)
        arr = zarr.open_array(where.zarr_store(read_only=True), mode="r")
        key = "" if name is None else name
        out[key] = array_digest(arr, where.read_bytes("zarr.json"),
                                (previous or {}).get(key))
    return out


def _nodes(group: zarr.Group) -> dict[str, str]:
    """Every group ("") and array below ``group``, by path: ``{"": "group", "state/w_": "array"}``."""
    import warnings

    out = {"": "group"}
    todo = [group]
    with warnings.catch_warnings():
        # the distsketch manifest beside the arrays is not a Zarr node
        warnings.filterwarnings("ignore", message=".*not recognized.*")
        while todo:
            g = todo.pop()
            for _, node in g.members():
                out[node.path] = "array" if isinstance(node, zarr.Array) else "group"
                if isinstance(node, zarr.Group):
                    todo.append(own_group(node))
    return out


def own_group(group: zarr.Group) -> zarr.Group:
    """``group`` opened again from its own ``zarr.json``, its consolidated metadata dropped.

    Zarr would open the members from that copy, which no digest covers (it
    repeats the members' metadata): every group is read from its own document.
    """
    return zarr.open_group(store=group.store, path=group.path, mode="r", use_consolidated=False)


def model_digests(root: Location) -> dict[str, Any]:
    """The digests of a model store being written: every group's attributes, every array.

    Recorded in the model's manifest under :data:`MODEL_DIGESTS_KEY`;
    :func:`verify_model_digests` checks them on load.
    """
    group = zarr.open_group(store=root.zarr_store(read_only=True), mode="r",
                            use_consolidated=False)
    groups, arrays = {}, {}
    for path, kind in sorted(_nodes(group).items()):
        raw = _meta_bytes(root, path)
        if kind == "group":
            groups[path] = metadata_digest(raw, model=True)
        else:
            node: Any = group[path]
            arrays[path] = array_digest(node, raw, model=True)
    return {"v": DIGEST_VERSION, "groups": groups, "arrays": arrays}


def _meta_bytes(root: Location, path: str) -> bytes:
    return (root.child(path) if path else root).read_bytes("zarr.json")


def _model_changed(where: Any, what: str) -> StoreError:
    return StoreError(
        f"model {where}: {what}. The model store changed or was damaged after it was saved "
        "(an edit, a file copied in from elsewhere, a bad disk); nothing of it was used. Re-save "
        "the model from its estimator or re-fit it (a workflow checkpoint: rerun with --full), "
        "or restore the store from a copy.")


def _valid_entry(entry: Any) -> bool:
    crc = entry.get("crc32c") if isinstance(entry, dict) else None
    return (isinstance(entry, dict) and entry.get("v") == DIGEST_VERSION
            and isinstance(entry.get("meta"), str) and _SHA.fullmatch(entry["meta"]) is not None
            and "crc32c" in entry and (crc is None or (isinstance(crc, str)
                                                       and _HEX.fullmatch(crc) is not None)))


def verify_model_digests(loc: Location, manifest: dict, where: Any) -> None:
    """Refuse a model store whose groups or arrays differ from the digests its manifest records.

    A manifest without :data:`MODEL_DIGESTS_KEY` (a model saved before
    digests) is accepted as before.  Otherwise every group and array of the
    store must have its entry, and each must match: the attributes of each
    group, the metadata of each array, the CRC-32C of each chunk at its
    position.  The StoreError names what changed (``where``: the model) and the fix.
    """
    decl = manifest.get(MODEL_DIGESTS_KEY)
    if decl is None:
        return  # saved before digests: read as before (see the module docstring)
    groups = decl.get("groups") if isinstance(decl, dict) else None
    arrays = decl.get("arrays") if isinstance(decl, dict) else None
    if (not isinstance(decl, dict) or decl.get("v") != DIGEST_VERSION
            or not isinstance(groups, dict) or not isinstance(arrays, dict)
            or not all(isinstance(v, str) and _SHA.fullmatch(v) for v in groups.values())
            or not all(_valid_entry(v) for v in arrays.values())):
        raise _model_changed(where, f"the digests in its manifest are not the version "
                                    f"{DIGEST_VERSION} records distsketch writes (the entry "
                                    f"{MODEL_DIGESTS_KEY!r} was edited)")
    group = zarr.open_group(store=loc.zarr_store(read_only=True), mode="r",
                            use_consolidated=False)
    nodes = _nodes(group)
    recorded = {**{p: "group" for p in groups}, **{p: "array" for p in arrays}}
    unrecorded = sorted(p or "(root)" for p, kind in nodes.items() if recorded.get(p) != kind)
    if unrecorded:
        raise _model_changed(where, f"it holds {', '.join(unrecorded[:5])}, for which its "
                                    "manifest records no digest (an entry was removed, or the "
                                    "node was added or replaced)")
    gone = sorted(p for p in recorded if p not in nodes)
    if gone:
        raise _model_changed(where, f"its manifest records {', '.join(gone[:5])}, which the "
                                    "store no longer holds")
    for path, want in sorted(groups.items()):
        if metadata_digest(_meta_bytes(loc, path), model=True) != want:
            raise _model_changed(where, f"the attributes of group {path or '(root)'} (class "
                                        "names, parameters, learned values, format) are not "
                                        "those recorded when it was saved")
    for path, entry in sorted(arrays.items()):
        node: Any = group[path]
        _verify_model_array(loc, node, path, entry, where)


def _verify_model_array(loc: Location, arr: zarr.Array, path: str, entry: dict,
                        where: Any) -> None:
    if metadata_digest(_meta_bytes(loc, path), model=True) != entry["meta"]:
        raise _model_changed(where, f"the metadata of array {path} (its zarr.json: shape, data "
                                    "type, byte order, codecs, fill value) are not those "
                                    "recorded when it was saved")
    want = entry["crc32c"]
    if want is None:
        if _binds_chunks(arr):
            raise _model_changed(where, f"array {path} has no chunk digests in the manifest")
        return
    if arr.size == 0:
        return
    keys = _chunk_keys(arr)
    if len(want) != len(keys) * _CRC_HEX:
        raise _model_changed(where, f"the manifest records {len(want) // _CRC_HEX} chunk "
                                    f"digests for array {path}, which has {len(keys)} chunks")
    for i, (idx, tail) in enumerate(zip(np.ndindex(*_grid(arr)), _tails(arr.store, keys))):
        expected = want[i * _CRC_HEX:(i + 1) * _CRC_HEX]
        if tail is None or tail.hex() != expected:
            found = "missing" if tail is None else tail.hex()
            raise _model_changed(
                where, f"chunk {tuple(int(j) for j in idx)} (grid index) of array {path} has "
                       f"CRC-32C {found}, not the {expected} recorded for that position: the "
                       "chunk was replaced (by another model's, or another chunk's), or is "
                       "corrupt")


@dataclasses.dataclass(frozen=True)
class ArrayDigest:
    """What a reader checks an input array against, from its store's manifest.

    Small and picklable: it travels with the dask graph to the workers.

    Attributes
    ----------
    where : str
        How messages name the array (``store.zarr::X``).
    meta : str
        SHA-256 of its canonical ``zarr.json`` (:func:`metadata_digest`).
    crcs : str or None
        CRC-32C of every chunk, 8 hex characters each, in grid order.
    owner : str
        URL or path of the store whose manifest records it.
    name : str
        The array's name in that manifest's layout ("" for a root array).
    storage_options : dict or None
        fsspec options to read that manifest again (after an append).
    """

    where: str
    meta: str
    crcs: str | None
    owner: str
    name: str
    storage_options: dict | None = None

    def current(self) -> ArrayDigest | None:
        """The digest the store's manifest records now (it changes when rows are appended)."""
        try:
            manifest = read_manifest(resolve(self.owner, self.storage_options))
        except StoreError:
            return None
        entry: Any = _layout_record(manifest or {}, self.name).get(DIGEST_KEY)
        if not _valid_entry(entry):
            return None
        return dataclasses.replace(self, meta=entry["meta"], crcs=entry["crc32c"])


def _layout_record(manifest: dict, name: str) -> dict:
    """The layout record of the array ``name`` in ``manifest`` ({} where there is none)."""
    layout = manifest.get("layout")
    rec = layout.get(name) if isinstance(layout, dict) else None
    return rec if isinstance(rec, dict) else {}


def _store_changed(where: str, what: str) -> StoreError:
    return StoreError(
        f"{what} of Zarr array {where}. The store changed or was damaged after distsketch wrote "
        "it (an edit, a chunk moved or copied from elsewhere, a bad disk). Restore it from a "
        "copy, or re-create it: re-ingest the source (`distsketch ingest SRC STORE "
        "--overwrite`), or rerun the command that wrote this output.")


def input_digest(loc: Location, arr: zarr.Array, where: str) -> ArrayDigest | None:
    """The digest an input array opened from ``loc`` must match; None if none is recorded.

    The manifest is the store's own, or for an array opened by its own folder
    (``store.zarr/X``) its group's.  A store written before digests records
    none (None: read as before); one that records digests for its arrays but
    not a complete one for this array is a StoreError.
    """
    name = str(getattr(arr, "path", "") or "")
    owner, manifest = loc, read_manifest(loc)
    if not name and "/" in loc.path.rstrip("/"):
        # an array opened by its own folder: a store's member when the group's manifest
        # records it (then a manifest planted in the folder does not replace that record)
        try:
            outer = read_manifest(loc.parent)
        except StoreError:
            outer = None
        if manifest is None or DIGEST_KEY in _layout_record(outer or {}, loc.name):
            owner, manifest, name = loc.parent, outer, loc.name
    layout = (manifest or {}).get("layout")
    if not isinstance(layout, dict):
        return None
    if not any(isinstance(r, dict) and DIGEST_KEY in r for r in layout.values()):
        return None  # written before digests
    # every array of a store that declares digests has one: an array without an entry was
    # added, or its entry (with its name in "arrays") removed, after distsketch wrote it
    entry: Any = _layout_record(manifest or {}, name).get(DIGEST_KEY)
    label = name or "the root array"
    if not _valid_entry(entry):
        raise _store_changed(where, f"the manifest of {owner.url} records digests for the arrays "
                                    f"of the store but {'an incomplete one' if entry else 'none'} "
                                    f"for {label} (an entry was removed or edited, or the array "
                                    "was added after distsketch wrote the store)")
    crcs = entry["crc32c"]
    count = 0 if arr.size == 0 else int(np.prod(_grid(arr)))
    if crcs is None and _binds_chunks(arr):
        raise _store_changed(where, f"the manifest of {owner.url} records no chunk digests "
                                    f"(crc32c: null) for {label}, whose chunks each end with a "
                                    "CRC-32C (the entry was edited)")
    if crcs is not None and len(crcs) != count * _CRC_HEX:
        raise _store_changed(where, f"the manifest of {owner.url} records {len(crcs) / _CRC_HEX:g} "
                                    f"chunk digests for {label}, which has {count} chunks (the "
                                    "entry or the array's shape was edited)")
    return ArrayDigest(where, entry["meta"], crcs, owner.url, name, owner.worker_options)


class DigestStore(WrapperStore):
    """A Zarr store that checks one array's metadata and chunks against its digest as read.

    Every ``zarr.json`` of the array that Zarr parses must have the recorded
    metadata digest, every chunk it fetches must end with the CRC-32C
    recorded for its grid position.  A mismatch is first compared with what
    the store's manifest records now (an append since the digest was taken
    rewrites the metadata and the last chunk); if that differs too it is a
    :class:`~distsketch.errors.StoreError` naming the array, the chunk (grid
    index and rows) and the fix.  Made by :func:`checked_array`: ``grid`` gives
    the flat index of a chunk key, ``chunk_rows`` and ``rows`` the rows in
    messages, ``encoding`` is ``("default" | "v2", separator)``.
    """

    def __init__(self, store: Any, path: str, digest: ArrayDigest, grid: tuple[int, ...],
                 chunk_rows: int, rows: int, encoding: tuple[str, str], metadata: bool = True):
        self._store = store
        self.metadata = metadata
        self.prefix = f"{path}/" if path else ""
        self.digest = digest
        self.grid = tuple(int(g) for g in grid)
        self.chunk_rows = int(chunk_rows)
        self.rows = int(rows)
        self.encoding = encoding

    def _with_store(self, store: Any) -> DigestStore:
        return type(self)(store, self.prefix.rstrip("/"), self.digest, self.grid,
                          self.chunk_rows, self.rows, self.encoding, self.metadata)

    def __str__(self) -> str:
        return str(self._store)

    def __repr__(self) -> str:
        return f"DigestStore({self._store!r}, {self.digest.where!r})"

    async def get(self, key: str, prototype: Any, byte_range: Any = None) -> Any:
        buf = await self._store.get(key, prototype, byte_range)
        if byte_range is not None:
            return buf
        if key == self.prefix + "zarr.json":
            if self.metadata and buf is not None:
                self._check_meta(buf.to_bytes())
        elif key.startswith(self.prefix) and self.digest.crcs is not None:
            idx = self._index(key[len(self.prefix):])
            if idx is not None and buf is None:
                # Zarr reads an absent chunk as the fill value; every recorded one was written
                self._missing(idx)
            if idx is not None:
                self._check_chunk(idx, bytes(buf.as_numpy_array()[-4:]))
        return buf

    async def _get_many(self, requests: Any) -> Any:
        for key, prototype, byte_range in requests:
            yield key, await self.get(key, prototype, byte_range)

    def _index(self, key: str) -> tuple[int, ...] | None:
        """The grid index of chunk key ``key`` (None: not a chunk key of this array)."""
        kind, sep = self.encoding
        if kind == "default":
            if not key.startswith("c"):
                return None
            key = key[1:].lstrip(sep) if key != "c" else ""
        parts = key.split(sep) if key else []
        if len(parts) != len(self.grid) or not all(p.isdigit() for p in parts):
            return None
        idx = tuple(int(p) for p in parts)
        return idx if all(i < g for i, g in zip(idx, self.grid)) else None

    def _check_meta(self, raw: bytes) -> None:
        try:
            found = metadata_digest(raw)
        except StoreError:
            return  # not JSON: Zarr's own parse reports it
        if found == self.digest.meta:
            return
        now = self.digest.current()
        if now is not None and now.meta == found:
            self.digest = now  # appended to since: the manifest records the new metadata
            return
        raise _store_changed(self.digest.where, "the metadata (zarr.json: shape, data type, byte "
                                                "order, codecs, fill value, attributes such as "
                                                "'classes' or 'feature_names') are not those "
                                                "recorded in the store's manifest")

    def _rows(self, idx: tuple[int, ...]) -> str:
        if not self.grid:
            return ""
        start = idx[0] * self.chunk_rows
        return f" (rows {start}..{min(self.rows, start + self.chunk_rows)})"

    def _missing(self, idx: tuple[int, ...]) -> None:
        raise StoreError(
            f"cannot read chunk {idx}{self._rows(idx)} of Zarr array {self.digest.where}: it is "
            "missing, though the store's manifest records its CRC-32C (Zarr would read the fill "
            "value there instead of the data). The store lost the chunk after distsketch wrote "
            "it (a deletion, an incomplete copy or sync); restore it from a copy, or re-create "
            "it: re-ingest the source (`distsketch ingest SRC STORE --overwrite`), or rerun the "
            "command that wrote this output.")

    def _check_chunk(self, idx: tuple[int, ...], tail: bytes) -> None:
        flat = int(np.ravel_multi_index(idx, self.grid)) if self.grid else 0
        crcs = self.digest.crcs or ""
        want = crcs[flat * _CRC_HEX:(flat + 1) * _CRC_HEX]
        if tail.hex() == want:
            return
        now = self.digest.current()
        have = (now.crcs or "")[flat * _CRC_HEX:(flat + 1) * _CRC_HEX] if now else ""
        if now is not None and have == tail.hex():
            self.digest = now  # the last chunk, rewritten by an append since
            return
        raise StoreError(
            f"cannot read chunk {idx}{self._rows(idx)} of Zarr array {self.digest.where}: its CRC-32C "
            f"{tail.hex()} is not the {want or '(none)'} that the store's manifest records for "
            "that position: the chunk was moved, copied over from another chunk or store, or is "
            "corrupt. The store changed or was damaged after distsketch wrote it; restore it "
            "from a copy, or re-create it: re-ingest the source (`distsketch ingest SRC STORE "
            "--overwrite`), or rerun the command that wrote this output.")


def checked_array(arr: zarr.Array, digest: ArrayDigest, *, metadata: bool = True) -> zarr.Array:
    """``arr`` opened again through a :class:`DigestStore` that checks it against ``digest``.

    Its ``zarr.json`` is read again through the check (a StoreError if it
    differs), so the metadata Zarr uses are the ones compared (unless
    ``metadata=False``: chunks only).
    """
    store = arr.store
    while isinstance(store, DigestStore):
        store = store._store
    meta: Any = arr.metadata
    enc: Any = meta.chunk_key_encoding.to_dict()
    encoding = (str(enc.get("name", "default")),
                str((enc.get("configuration") or {}).get("separator", "/")))
    path = str(getattr(arr, "path", "") or "")
    wrapped = DigestStore(store, path, digest, _grid(arr), int(arr.chunks[0]) if arr.ndim else 1,
                          int(arr.shape[0]) if arr.ndim else 1, encoding, metadata)
    return zarr.open_array(store=wrapped, path=path, mode="r", zarr_format=3)


def digest_of(arr: Any) -> ArrayDigest | None:
    """The digest an array opened by :func:`checked_array` is checked against (else None)."""
    store = getattr(arr, "store", None)
    return store.digest if isinstance(store, DigestStore) else None
