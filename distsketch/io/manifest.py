"""Run manifests: ``distsketch-manifest.json``, written last into an output.

A directory output without a manifest is uncommitted (object stores have no
atomic rename, so the manifest is what marks completion).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from distsketch._version import __version__
from distsketch.errors import StoreError

__all__ = ["MANIFEST_NAME", "has_manifest", "read_json_object", "read_manifest", "write_manifest"]

MANIFEST_NAME = "distsketch-manifest.json"


def write_manifest(directory: str | os.PathLike, info: dict) -> None:
    """Write the completion manifest (last step of an output)."""
    body = {"distsketch_version": __version__, "written_at": time.time()} | info
    tmp = Path(directory) / (MANIFEST_NAME + ".part")
    tmp.write_text(json.dumps(body, indent=2, default=_json_default))
    os.replace(tmp, Path(directory) / MANIFEST_NAME)


def has_manifest(directory: str | os.PathLike) -> bool:
    """Whether ``directory`` holds a manifest file (readable or not): distsketch wrote it."""
    return (Path(directory) / MANIFEST_NAME).is_file()


def read_manifest(directory: str | os.PathLike) -> dict | None:
    """The manifest of a committed output, or None if there is none.

    Raises
    ------
    StoreError
        The manifest exists but is unreadable, not JSON or not a JSON object.
    """
    return read_json_object(Path(directory) / MANIFEST_NAME, _corrupt)


def read_json_object(p: Path, damaged: Any) -> dict | None:
    """The JSON object in file ``p`` (None when it does not exist).

    Parameters
    ----------
    p : Path
    damaged : callable ``(path, why) -> DistsketchError``
        Builds the error raised when the file cannot be read, is not JSON or
        holds something other than an object.
    """
    if not p.exists():
        return None
    try:
        body = json.loads(p.read_text())
    except (OSError, ValueError) as exc:
        # ValueError covers bad UTF-8 as well as bad JSON
        raise damaged(p, f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(body, dict):
        raise damaged(p, f"it holds a JSON {type(body).__name__}, not an object")
    return body


def _corrupt(p: Path, why: str) -> StoreError:
    return StoreError(f"the manifest {p} is corrupt ({why}), so the output it marks cannot be "
                      "trusted. Re-create that output (a workflow run: rerun with --full; a store: "
                      "rerun the command that wrote it with --overwrite).")


def _json_default(o: Any) -> Any:
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    return repr(o)
