"""Committed outputs on any storage: :func:`atomic_output`.

A local output is built by :func:`distsketch.io.commit.atomic.atomic_dir` (temporary
sibling, marker, rename).  Object stores have no atomic rename, so an output
at a URL is committed by its manifest, written last (:func:`publish_prefix`;
the five steps, what a failure leaves and the writer claim
(:mod:`distsketch.io.storage.claims`) are in docs/storage.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

from distsketch.errors import DistsketchError, StoreError
from distsketch.io.commit.manifest import MANIFEST_NAME, write_manifest
from distsketch.io.storage.claims import WriterClaim
from distsketch.io.storage.safety import MARKER_NAME
from distsketch.io.storage.urls import Location, resolve

__all__ = ["atomic_output", "check_committed", "publish_prefix"]


def _step(name: str, loc: Location) -> None:
    """Instrumentation point of the object-store protocol (fault-injection tests patch it)."""


def _unwritable(loc: Location, exc: BaseException) -> StoreError:
    return StoreError(
        f"cannot write to {loc.url} ({type(exc).__name__}: {exc}). Check that the bucket or "
        "container exists and that the storage options (credentials, endpoint; CLI: "
        "--storage-option KEY=VALUE) allow writing there; nothing was written, locally or "
        "remotely.")


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike | Location, *, overwrite: bool = False,
                  inputs: Iterable[Any] = (), storage_options: Any = None) -> Iterator[Location]:
    """Yield a temporary location that becomes ``path`` when the block succeeds.

    Parameters
    ----------
    path : path-like, URL or Location
        Final location: a local directory or a prefix on an object store.
    overwrite : bool
        Replace an existing output, which must be one distsketch wrote.
    inputs : iterable of path-like or URL, optional
        Inputs of the computation; ``path`` may not be, contain or lie in one.
    storage_options : mapping, optional
        fsspec options for a URL (merged over ``distsketch.storage-options``).

    Yields
    ------
    Location
        The temporary location to write into (a local directory or a prefix).
        Write the manifest into it (:func:`~distsketch.io.commit.manifest.write_manifest`);
        a URL output without one gets a minimal manifest at publication.

    Raises
    ------
    StoreError
        ``path`` exists (without ``overwrite``, or not written by distsketch),
        cannot be written (unknown protocol, missing filesystem package, no
        bucket or permission), or the commit failed.
    InputError
        ``path`` overlaps an input.
    """
    # the location commits: a folder swap where it can rename, else publish_prefix
    with resolve(path, storage_options).atomic_output(overwrite=overwrite,
                                                      inputs=inputs) as tmp:
        yield tmp


@contextlib.contextmanager
def publish_prefix(loc: Location, *, overwrite: bool = False, inputs: Iterable[Any] = (),
                   ) -> Iterator[Location]:
    """:func:`atomic_output` where nothing can be renamed (claim, temporary prefix, copy,
    manifest last)."""
    inputs = list(inputs)
    loc.check_output(overwrite=overwrite, inputs=inputs)
    token = uuid.uuid4().hex[:12]
    tmp = loc.sibling(f".{loc.name}.tmp-{token}")
    marker = json.dumps({"written_by": "distsketch", "token": token}).encode()
    claim = WriterClaim(loc)
    try:
        # the probe is removed again: Zarr refuses to create a group in a non-empty prefix
        tmp.fs.pipe_file(tmp.child(MARKER_NAME).path, marker)
        tmp.fs.rm_file(tmp.child(MARKER_NAME).path)
        claim.take()
    except DistsketchError:
        raise
    except Exception as exc:
        raise _unwritable(loc, exc) from exc
    try:
        yield tmp
        _publish(loc, tmp, marker, overwrite, inputs, claim)
    except BaseException:
        with contextlib.suppress(Exception):
            tmp.fs.rm(tmp.path, recursive=True)
        raise
    finally:
        claim.release()


def _publish(loc: Location, tmp: Location, marker: bytes, overwrite: bool, inputs: list,
             claim: WriterClaim) -> None:
    """Steps 3–5 of the protocol (docs/storage.md)."""
    fs = tmp.fs
    try:
        loc.check_output(overwrite=overwrite, inputs=inputs)
    except DistsketchError as exc:
        raise type(exc)(f"{exc} (checked again when committing; nothing was written)") from None
    claim.confirm()  # no other writer took the destination meanwhile
    try:
        fs.invalidate_cache(tmp.path)
        fs.pipe_file(tmp.child(MARKER_NAME).path, marker)
        if not fs.isfile(tmp.child(MANIFEST_NAME).path):
            write_manifest(tmp, {"kind": "output"})
        files = sorted(fs.find(tmp.path))
    except Exception as exc:
        raise _unwritable(loc, exc) from exc
    _step("written", tmp)
    root = tmp.path.rstrip("/")
    rel = [f[len(root) + 1:] for f in files if f.startswith(root + "/")]
    rel.sort(key=lambda r: (r != MARKER_NAME, r == MANIFEST_NAME, r))  # marker first, manifest last
    try:
        fs.invalidate_cache(loc.path)
        if fs.exists(loc.path):
            # the old output becomes uncommitted before any of it is removed
            with contextlib.suppress(FileNotFoundError):
                fs.rm_file(loc.child(MANIFEST_NAME).path)
            _step("old-uncommitted", loc)
            fs.rm(loc.path, recursive=True)
        body = [r for r in rel if r != MANIFEST_NAME]
        if body:
            fs.copy([f"{root}/{r}" for r in body], [loc.child(r).path for r in body])
        _step("copied", loc)
        fs.copy(tmp.child(MANIFEST_NAME).path, loc.child(MANIFEST_NAME).path)
    except Exception as exc:
        raise StoreError(
            f"cannot commit output {loc.url} ({type(exc).__name__}: {exc}); it is left "
            "uncommitted (no manifest) and will be refused by readers. Rerun the command that "
            "writes it (with overwrite=True / --overwrite).") from exc
    fs.invalidate_cache(loc.path)
    _step("committed", loc)
    with contextlib.suppress(Exception):
        fs.rm(tmp.path, recursive=True)


def check_committed(loc: Location) -> None:
    """Refuse a store that distsketch began to write but did not commit (on storage
    without rename; use :meth:`~distsketch.io.storage.location.Location.check_committed`).

    A prefix with the distsketch marker but no manifest is an interrupted
    write; a store without either was not written by distsketch and is read as it is.

    Raises
    ------
    StoreError
        The store is uncommitted.
    """
    fs = loc.fs
    fs.invalidate_cache(loc.path)
    try:
        marked = fs.isfile(loc.child(MARKER_NAME).path)
        committed = fs.isfile(loc.child(MANIFEST_NAME).path)
    except Exception:
        return  # unreadable: opening it reports the real error
    if marked and not committed:
        raise StoreError(
            f"{loc.url} has no manifest: an interrupted write (distsketch began it and did not "
            "commit it, so its data may be incomplete). Rerun the command that writes it, with "
            "overwrite=True (CLI: --overwrite).")
