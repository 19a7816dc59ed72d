"""Checkpoints: one small JSON object and the one store it describes, replaced together.

A checkpoint is ``state.json`` plus a store (a Zarr group a caller writes); a
reader sees both of one save or both of the previous one.  The location's kind
chooses how (:meth:`~distsketch.io.storage.location.Location.checkpoint`): a
folder swap (:class:`FolderSwap`) or a store under a fresh name, then the one
object naming it (:class:`PointerObject`); a caller never asks which.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from distsketch.errors import DistsketchError, StoreError
from distsketch.io.commit.manifest import read_json_object
from distsketch.io.storage.location import Location

__all__ = ["STATE_NAME", "Checkpoint", "FolderSwap", "PointerObject"]

#: the JSON object of a checkpoint
STATE_NAME = "state.json"
_STORE_PREFIX = "summary-"


class Checkpoint:
    """The checkpoint in ``loc`` (a folder or prefix); see the module docstring.

    Parameters
    ----------
    loc : Location
        Where the checkpoint lives.
    damaged : callable
        ``(where, why) -> exception`` for a checkpoint that cannot be read, so
        the caller's message can say how to rebuild it.
    """

    def __init__(self, loc: Location, damaged: Callable[[Any, str], Exception]):
        self.loc = loc
        self.damaged = damaged

    def _refuse_links(self) -> None:
        try:
            self.loc.refuse_links("checkpoint")
        except StoreError as exc:
            raise self.damaged(self.loc.user_path(), str(exc).rstrip(".")) from exc

    def read(self) -> dict | None:
        """The committed ``state.json`` object, or None without a checkpoint.

        Raises
        ------
        DistsketchError
            From ``damaged``: the object is unreadable or not a JSON object, or
            the folder holds a symbolic link (it would be read from elsewhere).
        """
        self._refuse_links()
        self.loc.fs.invalidate_cache(self.loc.path)
        return read_json_object(self.loc.child(STATE_NAME).handle(), self.damaged)

    def store(self) -> Location:
        """The committed store."""
        raise NotImplementedError

    def load(self, read: Callable[[Any], None]) -> None:
        """Call ``read`` on the committed store; its StoreError is reported as ``damaged``."""
        self._refuse_links()
        store = self.store()
        try:
            read(store.handle())
        except StoreError as exc:
            raise self.damaged(store.user_path(), str(exc).rstrip(".")) from exc

    def save(self, meta: dict, write: Callable[[Path], None], read: Callable[[Any], None]
             ) -> None:
        """Commit ``meta`` and the store ``write(local_path)`` makes, then ``read`` the bytes
        committed (a local path or a location), so the caller holds what a reload gives.

        Raises
        ------
        OSError
            Writing failed; the previous checkpoint is intact.
        """
        raise NotImplementedError

    def check_foreign(self, inputs: list) -> None:
        """Refuse a location holding something a checkpoint did not write (a save replaces
        it)."""
        raise NotImplementedError

    def clean(self) -> None:
        """Remove what a killed save left beside the committed checkpoint (under a lock)."""


class FolderSwap(Checkpoint):
    """``state.json`` and ``summary/model.zarr`` in one folder, replaced by one swap."""

    def store(self) -> Location:
        return self.loc.child("summary").child("model.zarr")

    def save(self, meta: dict, write: Callable[[Path], None], read: Callable[[Any], None]
             ) -> None:
        with self.loc.atomic_output(overwrite=True) as tmp:
            folder = tmp.child("summary").handle()
            folder.mkdir()
            write(folder / "model.zarr")
            tmp.write_bytes(STATE_NAME, json.dumps(meta, indent=2).encode())
        read(self.store().handle())

    def check_foreign(self, inputs: list) -> None:
        self.loc.check_output(overwrite=True, inputs=inputs)

    # clean: nothing; the location repairs an interrupted swap itself (clean_leftovers)


class PointerObject(Checkpoint):
    """``state.json`` names the store (``summary-<rows>-<random>.zarr``), uploaded under that
    fresh name first; rewriting ``state.json`` is the commit."""

    def store(self) -> Location:
        name = (self.read() or {}).get("summary")
        if not isinstance(name, str) or not name.startswith(_STORE_PREFIX) or "/" in name:
            raise self.damaged(self.loc.child(STATE_NAME).user_path(), f"summary is {name!r}")
        return self.loc.child(name)

    def save(self, meta: dict, write: Callable[[Path], None], read: Callable[[Any], None]
             ) -> None:
        old = None
        with contextlib.suppress(StoreError):
            old = (self.read() or {}).get("summary")
        name = f"{_STORE_PREFIX}{int(meta.get('rows_done', 0)):012d}-{uuid.uuid4().hex[:8]}.zarr"
        with tempfile.TemporaryDirectory(prefix="distsketch-checkpoint-") as scratch:
            local = Path(scratch) / name
            write(local)
            # a fresh name, unreferenced until state.json names it: no publication step
            self.loc.upload_tree(local, name)
            self.loc.write_bytes(STATE_NAME, json.dumps(meta | {"summary": name}, indent=2).encode())
            # the local copy holds the bytes uploaded: read without a round trip
            read(local)
        if isinstance(old, str) and old.startswith(_STORE_PREFIX) and old != name:
            self.loc.remove(old)

    def check_foreign(self, inputs: list) -> None:
        foreign = [n for n in self.loc.list_names() if n != STATE_NAME and not n.startswith(
            (_STORE_PREFIX, f".{_STORE_PREFIX}"))]
        if foreign:
            raise StoreError(f"{self.loc.user_path()} holds {foreign[:5]}, which are not part "
                             "of a distsketch checkpoint; choose another location.")

    def clean(self) -> None:
        try:
            keep = self.store().name
        except DistsketchError:  # no checkpoint, or a damaged one: nothing of it to keep
            keep = None
        for name in self.loc.list_names():
            if name.startswith((_STORE_PREFIX, f".{_STORE_PREFIX}")) and name != keep:
                self.loc.remove(name)
