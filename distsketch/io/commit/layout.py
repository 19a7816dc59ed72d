"""What a store's arrays must look like: recorded when distsketch writes, checked on open.

Every store distsketch writes records each array's :func:`array_record` in its
manifest under ``"layout"``; :func:`check_array` refuses an opened array whose
metadata were edited after the write, or that rows added outside distsketch
changed, instead of reading them as data.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import zarr

from distsketch.errors import StoreError
from distsketch.io.commit.manifest import read_manifest
from distsketch.io.storage.urls import Location

__all__ = ["JOURNAL_NAME", "LAYOUT_KEY", "array_record", "check_array", "layout_differences",
           "recorded_layout"]

#: manifest key of the per-array records
LAYOUT_KEY = "layout"
#: journal of an append in progress, at the root of a store (:mod:`distsketch.io.arrays.appending`)
JOURNAL_NAME = ".distsketch-append.json"
#: codec settings that change how stored bytes decode (others, e.g. a level, do not)
_DECODING = ("endian", "order", "cname")


def _codecs(arr: zarr.Array) -> list[str]:
    """The array's codec chain as stable text: names and the settings that change decoding."""
    out = []
    chain: Any = arr.metadata.to_dict().get("codecs", ()) or ()
    for c in chain:
        if not isinstance(c, dict):
            continue
        conf = c.get("configuration") or {}
        extra = ",".join(f"{k}={conf[k]}" for k in _DECODING if k in conf)
        out.append(f"{c.get('name')}({extra})" if extra else str(c.get("name")))
    return out


def array_record(arr: zarr.Array) -> dict[str, Any]:
    """Shape, dtype, chunk (and shard) shape and codecs of ``arr``, as plain JSON."""
    rec: dict[str, Any] = {"shape": [int(s) for s in arr.shape], "dtype": str(arr.dtype),
                           "chunks": [int(c) for c in arr.chunks],
                           "codecs": _codecs(arr)}
    if arr.shards:
        rec["shards"] = [int(s) for s in arr.shards]
    return rec


def recorded_layout(manifest: dict, name: str) -> dict[str, Any] | None:
    """What ``manifest`` recorded for the array ``name`` ("" for a root array), if anything:
    some of ``shape`` (or only ``rows``, for early manifests), ``dtype``, ``chunks``,
    ``shards`` and ``codecs``, as :func:`array_record` gives them."""
    layout = manifest.get(LAYOUT_KEY)
    if isinstance(layout, dict):
        rec = layout.get(name)
        return rec if isinstance(rec, dict) else None
    # manifests written before the layout record: what they held
    kind = manifest.get("kind")
    if kind == "ingest" and isinstance(manifest.get("rows"), int):
        if name == "X" and isinstance(manifest.get("n_features"), int):
            return {"shape": [manifest["rows"], manifest["n_features"]],
                    "dtype": manifest.get("dtype")}
        if name in (manifest.get("arrays") or ()):
            return {"rows": manifest["rows"]}
    if kind in ("array", "predictions") and isinstance(manifest.get("shape"), list):
        if (manifest.get("array") or "") == name:
            return {"shape": manifest["shape"], "dtype": manifest.get("dtype")}
    return None


def layout_differences(expected: dict, found: dict) -> list[str]:
    """The entries of ``found`` (an :func:`array_record`) that differ from ``expected``
    (a :func:`recorded_layout`), each as ``"key: recorded A, found B"``."""
    out = []
    if "rows" in expected and expected["rows"] != found["shape"][0]:
        out.append(f"rows: recorded {expected['rows']}, found {found['shape'][0]}")
    for key in ("shape", "dtype", "chunks", "shards", "codecs"):
        if key in expected and expected[key] is not None and expected[key] != found.get(key):
            want, got = expected[key], found.get(key)
            if key in ("shape", "chunks", "shards") and isinstance(want, list):
                want = tuple(want)
                got = tuple(got) if isinstance(got, list) else got
            out.append(f"{key}: recorded {want}, found {got}")
    return out


def _journal_note(root: Location) -> str:
    try:
        interrupted = root.isfile(JOURNAL_NAME)
    except Exception:
        interrupted = False
    if not interrupted:
        return ""
    return (" An append to this store is in progress or was interrupted: wait for it, or append "
            "again (distsketch.io.append or `distsketch ingest SRC STORE --append`), which first "
            "rolls an interrupted one back.")


def check_array(root: Location, arr: zarr.Array, where: str) -> None:
    """Refuse ``arr`` (opened from the store at ``root``, a group holding it or the array
    itself) when its metadata disagree with the store's manifest or with the group's
    consolidated metadata (a StoreError naming the array as ``where``).
    """
    name = str(getattr(arr, "path", "") or "")
    found = array_record(arr)
    manifest, owner = read_manifest(root), root
    if manifest is None and not name and "/" in root.path.rstrip("/"):
        # a store's array opened by its own folder (store.zarr/X): the group's manifest
        owner = root.parent
        try:
            manifest, name = read_manifest(owner), root.name
        except StoreError:
            manifest = None  # not this array's record
    expected = recorded_layout(manifest, name) if manifest else None
    if expected is not None:
        diff = layout_differences(expected, found)
        if diff:
            raise StoreError(
                f"Zarr array {where} does not match what distsketch recorded when it wrote "
                f"{owner.url} ({'; '.join(diff)}): its metadata were edited, or rows were added "
                "outside distsketch, so the values read would not be the data written. Re-ingest "
                "the source (`distsketch ingest SRC STORE --overwrite`); add rows only with "
                "`distsketch ingest SRC STORE --append` (distsketch.io.append)."
                + _journal_note(owner))
    if name and "/" not in name:
        _check_consolidated(root, name, found, where)


def _check_consolidated(root: Location, name: str, found: dict, where: str) -> None:
    """Refuse ``name`` when the group's consolidated metadata describe it otherwise."""
    try:
        body = json.loads(root.read_bytes("zarr.json"))
    except Exception:
        return  # unreadable here: opening the group reported what matters
    meta = body.get("consolidated_metadata") if isinstance(body, dict) else None
    members = meta.get("metadata") if isinstance(meta, dict) else None
    view = members.get(name) if isinstance(members, dict) else None
    if not isinstance(view, dict) or view.get("node_type") != "array":
        return
    dt = view.get("data_type")
    try:
        other_dtype = isinstance(dt, str) and np.dtype(dt) != np.dtype(found["dtype"])
    except TypeError:
        other_dtype = False  # a Zarr-only type name: nothing to compare here
    if other_dtype:
        raise StoreError(
            f"Zarr array {where} has dtype {found['dtype']} in its own metadata but {dt} in the "
            f"group's consolidated metadata ({root.url}/zarr.json): the metadata were edited. "
            "Re-ingest the store (or re-create it with the tool that wrote it).")
    shape = view.get("shape")
    if isinstance(shape, list) and [int(s) for s in shape] != found["shape"]:
        n_view, n_real = (shape[0] if shape else None), found["shape"][0]
        grown = isinstance(n_view, int) and n_real > n_view
        raise StoreError(
            f"Zarr array {where} has shape {tuple(found['shape'])} in its own metadata but "
            f"{tuple(shape)} in the group's consolidated metadata ({root.url}/zarr.json): the "
            "array was changed without re-consolidating the group, and readers that use the "
            "consolidated view (xarray, zarr.open_group) disagree with it"
            + (f"; rows {n_view}..{n_real} may hold fill values written through the stale view"
               if grown else "")
            + ". Add rows with `distsketch ingest SRC STORE --append` (distsketch.io.append); "
            "if the new rows really were written, run zarr.consolidate_metadata on the store; "
            "otherwise re-ingest it.")
