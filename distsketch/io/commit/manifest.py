"""Run manifests: ``distsketch-manifest.json``, written last into an output (an output
without one is uncommitted), and the one reader of small JSON objects.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from distsketch._version import __version__
from distsketch.errors import StoreError
from distsketch.io.commit.jsonable import json_default
from distsketch.io.storage.urls import Location, resolve

__all__ = ["MANIFEST_NAME", "provenance", "read_json_object", "read_manifest", "write_manifest"]

MANIFEST_NAME = "distsketch-manifest.json"
#: deepest nesting of lists and objects a manifest or state file may have
MAX_JSON_DEPTH = 64


def provenance(info: dict) -> dict:
    """The manifest entries as plain JSON, for a Zarr attribute (``provenance``).

    Tools that read only Zarr metadata (xarray) see where an output came from
    (source, parameters, versions) without the sidecar manifest.
    """
    body = {"distsketch_version": __version__} | info
    layout = body.get("layout")
    if isinstance(layout, dict):
        # the chunk digests (8 hex characters per chunk) stay in the manifest, where they are
        # checked: a copy in every reader's metadata would only make it larger
        body["layout"] = {k: ({f: v for f, v in rec.items() if f != "digest"}
                              if isinstance(rec, dict) else rec) for k, rec in layout.items()}
    return json.loads(json.dumps(body, default=json_default))


def write_manifest(directory: str | os.PathLike | Location, info: dict, *,
                   storage_options: Any = None) -> None:
    """Write the completion manifest (last step of an output)."""
    body = {"distsketch_version": __version__, "written_at": time.time()} | info
    text = json.dumps(body, indent=2, default=json_default)
    # replaced atomically: a rename locally, one PUT on an object store
    resolve(directory, storage_options).write_bytes(MANIFEST_NAME, text.encode())


def read_manifest(directory: str | os.PathLike | Location, *,
                  storage_options: Any = None) -> dict | None:
    """The manifest of a committed output, or None if there is none.

    Raises
    ------
    StoreError
        The manifest exists but is unreadable, not JSON or not a JSON object.
    """
    return read_json_object(resolve(directory, storage_options).child(MANIFEST_NAME).handle(),
                            _corrupt)


def read_json_object(p: Path | Location, damaged: Any) -> dict | None:
    """The JSON object in the local file or URL object ``p`` (None when it does not exist);
    ``damaged(path, why)`` builds the error for one that cannot be read, is not JSON or holds
    something other than an object."""
    if isinstance(p, Location):
        try:
            raw = p.fs.cat_file(p.path)
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise StoreError(f"cannot read {p.url} ({type(exc).__name__}: {exc}); check the "
                             "URL and its storage options.") from exc
        where: Any = p.url
    else:
        if not p.exists():
            return None
        try:
            raw = p.read_bytes()
        except OSError as exc:
            raise damaged(p, f"{type(exc).__name__}: {exc}") from exc
        where = p
    try:
        body = json.loads(raw)
    except ValueError as exc:
        # ValueError covers bad UTF-8 as well as bad JSON
        raise damaged(where, f"{type(exc).__name__}: {exc}") from exc
    except RecursionError:
        raise damaged(where, f"it is nested more than {MAX_JSON_DEPTH} levels deep") from None
    if _depth(body) > MAX_JSON_DEPTH:
        # nested below Python's recursion limit, but deeper than anything distsketch writes
        raise damaged(where, f"it is nested more than {MAX_JSON_DEPTH} levels deep")
    if not isinstance(body, dict):
        raise damaged(where, f"it holds a JSON {type(body).__name__}, not an object")
    return body


def _depth(body: Any) -> int:
    """Nesting depth of parsed JSON, without recursion."""
    deepest, todo = 0, [(body, 1)]
    while todo:
        node, level = todo.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, level)
            todo.extend((child, level + 1)
                        for child in (node.values() if isinstance(node, dict) else node))
    return deepest


def _corrupt(p: Path | str, why: str) -> StoreError:
    return StoreError(f"the manifest {p} is corrupt ({why}), so the output it marks cannot be "
                      "trusted. Re-create that output (a workflow run: rerun with --full; a store: "
                      "rerun the command that wrote it with --overwrite).")
