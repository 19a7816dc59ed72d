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

__all__ = ["MANIFEST_NAME", "read_manifest", "write_manifest"]

MANIFEST_NAME = "distsketch-manifest.json"


def write_manifest(directory: str | os.PathLike, info: dict) -> None:
    """Write the completion manifest (last step of an output)."""
    body = {"distsketch_version": __version__, "written_at": time.time()} | info
    tmp = Path(directory) / (MANIFEST_NAME + ".part")
    tmp.write_text(json.dumps(body, indent=2, default=_json_default))
    os.replace(tmp, Path(directory) / MANIFEST_NAME)


def read_manifest(directory: str | os.PathLike) -> dict | None:
    """The manifest of a committed output, or None if there is none."""
    p = Path(directory) / MANIFEST_NAME
    if not p.exists():
        return None
    return json.loads(p.read_text())


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
