"""Atomic outputs: write to a temporary sibling, then rename into place.

A directory output (a Zarr store, a model group) is built under
``<parent>/.<name>.tmp-<id>`` and renamed to ``<name>`` only after everything,
including its manifest, is written.  If anything fails the temporary directory
is removed and an existing output at ``<name>`` is left untouched.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

from distsketch.errors import StoreError

__all__ = ["atomic_dir", "check_writable"]


def check_writable(path: str | os.PathLike, *, overwrite: bool) -> Path:
    """Check that ``path`` may be written (parent exists and is writable)."""
    p = Path(path).expanduser().absolute()
    if p.exists() and not overwrite:
        raise StoreError(
            f"output {p} already exists; pass overwrite=True (CLI: --overwrite) to replace it."
        )
    parent = p.parent
    if not parent.exists():
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the folder {parent} for output {p}: {exc}.") from exc
    if not os.access(parent, os.W_OK):
        raise StoreError(
            f"output folder {parent} is not writable; choose another output path or fix "
            "its permissions."
        )
    return p


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike, *, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary directory that becomes ``path`` on success.

    Parameters
    ----------
    path : path-like
        Final location (local file system).
    overwrite : bool
        Replace an existing output; otherwise an existing ``path`` is an error.

    Yields
    ------
    pathlib.Path
        The temporary directory to write into.

    Notes
    -----
    The swap of an existing output is two renames (old aside, new in); a reader
    sees either the complete old or the complete new output, never a mix.
    """
    final = check_writable(path, overwrite=overwrite)
    tmp = final.parent / f".{final.name}.tmp-{uuid.uuid4().hex[:12]}"
    try:
        tmp.mkdir()
    except OSError as exc:
        raise StoreError(f"cannot write under {final.parent}: {exc}.") from exc
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    try:
        if final.exists():
            old = final.parent / f".{final.name}.old-{uuid.uuid4().hex[:12]}"
            os.replace(final, old)
        os.replace(tmp, final)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and not final.exists():
            os.replace(old, final)
        raise StoreError(f"cannot commit output {final}: {exc}.") from exc
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
