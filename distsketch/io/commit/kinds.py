"""The storage kinds: what differs between them, in one subclass each.

=======================  =============================  ===============================
capability / operation   :class:`LocalLocation`         :class:`FsspecLocation`
=======================  =============================  ===============================
``supports_rename``      yes: outputs are committed by  no: outputs are committed by
                         an atomic folder swap          their manifest, written last
``supports_links``       yes: stores are read only if   no (an object store has none)
                         they hold no symbolic link
``atomic_output``        :func:`~distsketch.io.commit.atomic.  :func:`~distsketch.io.commit.publish.
                         atomic_dir`                    publish_prefix`
``checkpoint``           ``FolderSwap``: one folder     ``PointerObject``: the store
                         swap                           under a fresh name, then the
                                                        one object naming it
``run_lock``             ``fcntl`` lock file            lease object with heartbeat
``writer_lock``          ``flock`` on the folder        claim object beside it
=======================  =============================  ===============================

Both are registered with :func:`distsketch.io.storage.urls.register_kind` when
:mod:`distsketch.io` is imported.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import zarr

from distsketch.errors import StoreError
from distsketch.io.commit.atomic import atomic_dir, recover
from distsketch.io.commit.checkpoint import FolderSwap, PointerObject
from distsketch.io.commit.publish import check_committed, publish_prefix
from distsketch.io.storage.claims import claimed
from distsketch.io.storage.location import Location
from distsketch.io.storage.locks import folder_lock, lease_lock, store_flock
from distsketch.io.storage.safety import (
    check_local_output,
    check_url_output,
    refuse_links,
    url_written_by_distsketch,
    written_by_distsketch,
)
from distsketch.io.storage.urls import register_kind, resolve

__all__ = ["FsspecLocation", "LocalLocation"]


class LocalLocation(Location):
    """A path on the local file system (see the module docstring)."""

    is_local: ClassVar[bool] = True
    supports_rename: ClassVar[bool] = True
    supports_links: ClassVar[bool] = True
    noun: ClassVar[str] = "path"

    def canonical(self) -> Location:
        # symbolic links, '..' and './' resolved: an output is compared with what it names
        real = os.path.realpath(self.path)
        return dataclasses.replace(self, url=real, path=real)

    def user_path(self) -> Path:
        return Path(self.path)

    def handle(self) -> Path:
        return Path(self.path)

    @property
    def worker_options(self) -> dict | None:
        return None

    def write_bytes(self, name: str, data: bytes) -> None:
        # written beside, then renamed: a reader never sees half a file
        final = Path(self.path) / name
        part = final.with_name(final.name + ".part")
        # a leftover .part (or one planted as a hard link to a file elsewhere) is unlinked, not
        # written through: O_EXCL then creates a new file, never opening an existing one
        part.unlink(missing_ok=True)
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(part, final)

    def exists(self) -> bool:
        return Path(self.path).exists()

    def list_names(self) -> list[str]:
        try:
            return sorted(os.listdir(self.path))
        except FileNotFoundError:
            return []

    def remove(self, name: str) -> None:
        p = Path(self.path) / name
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                p.unlink(missing_ok=True)  # a link itself, never what it points to

    def move_in(self, local_file: str | os.PathLike, name: str) -> None:
        shutil.move(os.fspath(local_file), Path(self.path) / name)

    def move_tree_in(self, local: str | os.PathLike) -> None:
        if Path(local) == Path(self.path):
            return  # staged in place (see staging)
        for p in sorted(Path(local).iterdir()):
            self.move_in(p, p.name)

    @contextlib.contextmanager
    def staging(self) -> Iterator[Path]:
        """The folder itself: files are built in place."""
        yield Path(self.path)

    def mtime(self) -> Any:
        try:
            return os.stat(self.path).st_mtime_ns
        except OSError:
            return 0.0

    def zarr_store(self, *, read_only: bool = False) -> Any:
        # a LocalStore, not a string: zarr reads a string holding '::' as a chained URL
        return zarr.storage.LocalStore(self.path, read_only=read_only)

    def absent(self, check: bool = True) -> bool:
        return not self.exists()  # no request: always asked

    def refuse_links(self, what: str) -> None:
        """Refuse a store holding a symbolic link or a special file (read only from inside)."""
        refuse_links(self.path, what)

    def check_committed(self) -> None:
        """Nothing to check: a local output appears only by its committing rename."""

    def written_by_distsketch(self) -> bool:
        return written_by_distsketch(self.path)

    def check_output(self, *, overwrite: bool, inputs: Iterable[Any] = ()) -> Any:
        return check_local_output(self.path, overwrite=overwrite, inputs=list(inputs))

    @contextlib.contextmanager
    def atomic_output(self, *, overwrite: bool, inputs: Iterable[Any] = ()) -> Iterator[Location]:
        with atomic_dir(self.path, overwrite=overwrite, inputs=inputs) as tmp_dir:
            yield resolve(tmp_dir)

    def checkpoint(self, damaged: Any) -> FolderSwap:
        return FolderSwap(self, damaged)

    def run_lock(self, wait: bool | float, force: bool = False) -> Any:
        # an OS lock dies with its process: nothing to force
        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise StoreError(f"{self.path} exists and is not a folder; choose another path.")
        return folder_lock(self.path, wait)

    def writer_lock(self, what: str) -> contextlib.AbstractContextManager[Any]:
        return store_flock(self, what)

    def recover(self) -> None:
        # only a missing output: a reader deletes nothing that is there
        if not Path(self.path).exists():
            self.clean_leftovers()

    def clean_leftovers(self) -> None:
        """Finish or undo a swap killed between its renames; remove dead temporaries."""
        recover(self.path)


class FsspecLocation(Location):
    """A location on any other fsspec filesystem (object stores: no rename, no lock)."""

    def refuse_links(self, what: str) -> None:
        """Refuse a store holding a symbolic link (nothing to do: this storage has none)."""

    def check_committed(self) -> None:
        check_committed(self)

    def written_by_distsketch(self) -> bool:
        return url_written_by_distsketch(self)

    def check_output(self, *, overwrite: bool, inputs: Iterable[Any] = ()) -> Any:
        return check_url_output(self, overwrite=overwrite, inputs=list(inputs))

    def atomic_output(self, *, overwrite: bool, inputs: Iterable[Any] = ()
                      ) -> contextlib.AbstractContextManager[Location]:
        return publish_prefix(self, overwrite=overwrite, inputs=list(inputs))

    def checkpoint(self, damaged: Any) -> PointerObject:
        return PointerObject(self, damaged)

    def run_lock(self, wait: bool | float, force: bool = False) -> Any:
        return lease_lock(self, wait, force)

    def writer_lock(self, what: str) -> contextlib.AbstractContextManager[Any]:
        return claimed(self)


register_kind(LocalLocation, "file")
register_kind(FsspecLocation, "")
