"""One storage protocol: a :class:`Location` with capabilities, one subclass per storage kind.

:func:`distsketch.io.storage.urls.resolve` turns a path or URL into a
location; every writer, lock, claim and workflow state asks it what it needs
instead of asking which kind it is.  This base class does what fsspec calls do
alike everywhere and declares the rest; the subclasses, and what differs
between them, are in :mod:`distsketch.io.commit.kinds` (above the modules
they call, which only name this base class: ``io`` has no import circle).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar

from distsketch.errors import StoreError

__all__ = ["Location"]


@dataclasses.dataclass(frozen=True)
class Location:
    """A resolved storage location (made by :func:`~distsketch.io.storage.urls.resolve`; see the
    module docstring).

    Attributes
    ----------
    url : str
        The absolute local path, or the canonical URL (``s3://bucket/key``).
    path : str
        The location as ``fs`` names it (``bucket/key`` for S3).
    fs : fsspec.AbstractFileSystem
        Its (synchronous) filesystem.
    storage_options : dict
        The merged options the filesystem was made with (empty for local paths).
    """

    url: str
    path: str
    fs: Any = dataclasses.field(repr=False, compare=False)
    storage_options: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)

    #: on the local file system (paths are passed on as :class:`pathlib.Path`)
    is_local: ClassVar[bool] = False
    #: a folder can be renamed atomically (outputs are committed by a swap)
    supports_rename: ClassVar[bool] = False
    #: the storage can hold symbolic links (stores are checked for them before reading)
    supports_links: ClassVar[bool] = False
    #: what a message calls it
    noun: ClassVar[str] = "URL"

    # ------------------------------------------------------------------ naming

    @property
    def protocol(self) -> str:
        return self.url.split("://", 1)[0] if "://" in self.url else "file"

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    def child(self, name: str) -> Location:
        """The location ``name`` inside this one."""
        sep = "" if self.url.endswith("/") else "/"
        psep = "" if self.path.endswith("/") else "/"
        return dataclasses.replace(self, url=f"{self.url}{sep}{name}",
                                   path=f"{self.path}{psep}{name}")

    def sibling(self, name: str) -> Location:
        """The location ``name`` beside this one (in the same parent)."""
        url_parent = self.url.rstrip("/").rsplit("/", 1)[0]
        path_parent = self.path.rstrip("/").rsplit("/", 1)[0]
        return dataclasses.replace(self, url=f"{url_parent}/{name}", path=f"{path_parent}/{name}")

    @property
    def parent(self) -> Location:
        """The location this one is in."""
        return dataclasses.replace(self, url=self.url.rstrip("/").rsplit("/", 1)[0],
                                   path=self.path.rstrip("/").rsplit("/", 1)[0])

    def within(self, other: Location) -> bool:
        """Whether this location is ``other`` or lies inside it (same storage)."""
        if self.protocol != other.protocol:
            return False
        a, b = self.path.rstrip("/"), other.path.rstrip("/")
        return a == b or a.startswith(b + "/")

    def canonical(self) -> Location:
        """This location in the form two locations are compared in (see :meth:`within`)."""
        return self

    def user_path(self) -> Any:
        """What a writer returns and a message names: a :class:`~pathlib.Path` locally,
        else the URL."""
        return self.url

    def handle(self) -> Any:
        """What code outside ``io`` is given: a :class:`~pathlib.Path` locally, else the
        location itself."""
        return self

    @property
    def worker_options(self) -> dict | None:
        """The storage options a graph ships to its workers (None where none are needed)."""
        return self.storage_options

    def __str__(self) -> str:
        return self.url

    # ------------------------------------------------------------------ objects

    def write_bytes(self, name: str, data: bytes) -> None:
        """Write the object (file) ``name`` inside this location, replacing it atomically."""
        self.fs.pipe_file(self.child(name).path, data)  # one PUT: atomic on object stores

    def read_bytes(self, name: str) -> bytes:
        """The content of the object (file) ``name`` inside this location.

        Raises
        ------
        FileNotFoundError
            There is no such object.
        """
        return self.fs.cat_file(self.child(name).path)

    def isfile(self, name: str) -> bool:
        """Whether the object (file) ``name`` exists inside this location (no cached listing)."""
        self.fs.invalidate_cache(self.path)
        try:
            return bool(self.fs.isfile(self.child(name).path))
        except (FileNotFoundError, OSError):
            return False

    def exists(self) -> bool:
        """Whether anything is at this location (fresh from the store).

        Raises
        ------
        StoreError
            The store cannot be asked (no bucket, no permission ...).
        """
        try:
            self.fs.invalidate_cache(self.path)
            return bool(self.fs.exists(self.path))
        except FileNotFoundError:
            return False
        except Exception as exc:
            raise StoreError(f"cannot read {self.url} ({type(exc).__name__}: {exc}); check that "
                             "the bucket exists and that the storage options (credentials, "
                             "endpoint; CLI: --storage-option KEY=VALUE) allow reading it.") from exc

    def list_names(self) -> list[str]:
        """The names directly inside this location, sorted (empty when there is nothing)."""
        self.fs.invalidate_cache(self.path)
        try:
            entries = self.fs.ls(self.path, detail=False)
        except FileNotFoundError:
            return []
        return sorted(e.rstrip("/").rsplit("/", 1)[-1] for e in entries)

    def remove(self, name: str) -> None:
        """Delete ``name`` inside this location and everything under it (quietly, best effort)."""
        with contextlib.suppress(Exception):
            self.fs.rm(self.child(name).path, recursive=True)

    def move_in(self, local_file: str | os.PathLike, name: str) -> None:
        """Move the local file ``local_file`` to ``name`` inside this location."""
        self.fs.put_file(os.fspath(local_file), self.child(name).path)
        Path(local_file).unlink(missing_ok=True)

    def upload_tree(self, local: str | os.PathLike, name: str | None = None) -> None:
        """Copy every file under the local folder ``local`` into ``name`` (or this location)."""
        dest = self if name is None else self.child(name)
        root = Path(local)
        for f in sorted(p for p in root.rglob("*") if p.is_file()):
            self.fs.put_file(str(f), dest.child(f.relative_to(root).as_posix()).path)

    def move_tree_in(self, local: str | os.PathLike) -> None:
        """Move what the local folder ``local`` holds into this location."""
        for p in sorted(Path(local).iterdir()):
            if p.is_file():
                self.move_in(p, p.name)
            elif p.is_dir():
                self.upload_tree(p, p.name)

    @contextlib.contextmanager
    def staging(self) -> Iterator[Path]:
        """A local folder for files built before they are moved in with :meth:`move_tree_in`."""
        with tempfile.TemporaryDirectory(prefix="distsketch-stage-") as scratch:
            yield Path(scratch)

    def mtime(self) -> Any:
        """When the store last changed (part of a graph's key), best effort."""
        try:
            info = self.fs.info(self.child("zarr.json").path)
        except Exception:
            return 0.0
        return str(info.get("LastModified") or info.get("mtime") or info.get("created") or
                   info.get("ETag") or "")

    # ------------------------------------------------------------------ Zarr and safety

    def zarr_store(self, *, read_only: bool = False) -> Any:
        """The ``store=`` argument of zarr for this location (Zarr's ``FsspecStore``)."""
        import zarr

        try:
            return zarr.storage.FsspecStore.from_url(self.url, storage_options=self.storage_options,
                                                     read_only=read_only)
        except Exception as exc:
            raise StoreError(f"cannot open {self.url} ({type(exc).__name__}: {exc}); check the "
                             "URL and its storage options.") from exc

    def absent(self, check: bool = True) -> bool:
        """Whether nothing is at this location; asked only with ``check`` where asking is a
        request (a graph's reader skips it: the store was checked when the graph was built)."""
        return check and not self.exists()

    def refuse_links(self, what: str) -> None:
        """Refuse a store holding a symbolic link or a special file under this location
        (read only from inside itself)."""
        raise NotImplementedError

    def check_committed(self) -> None:
        """Refuse a store whose write began but was not committed."""
        raise NotImplementedError

    def written_by_distsketch(self) -> bool:
        """Whether this store or folder carries a distsketch manifest or marker."""
        raise NotImplementedError

    def check_output(self, *, overwrite: bool, inputs: Iterable[Any] = ()) -> Any:
        """:func:`distsketch.io.storage.safety.check_output` for this location."""
        raise NotImplementedError

    # ------------------------------------------------------------------ commits and locks

    def atomic_output(self, *, overwrite: bool, inputs: Iterable[Any] = ()
                      ) -> contextlib.AbstractContextManager[Location]:
        """A temporary location that becomes this one when the block succeeds
        (:func:`distsketch.io.commit.publish.atomic_output`)."""
        raise NotImplementedError

    def checkpoint(self, damaged: Any) -> Any:
        """The :class:`~distsketch.io.commit.checkpoint.Checkpoint` in this folder, committed
        the way this kind can (``damaged``: ``(where, why) -> exception`` for one that cannot
        be read)."""
        raise NotImplementedError

    def run_lock(self, wait: bool | float, force: bool = False
                 ) -> contextlib.AbstractContextManager[Any]:
        """One run at a time in this folder: a context manager whose value has ``check()``
        (raises once the lock was taken over)."""
        raise NotImplementedError

    def writer_lock(self, what: str) -> contextlib.AbstractContextManager[Any]:
        """One writer of this store at a time (``what``: the writer, for the message); its
        value has ``confirm()`` (raises once another writer took the store over)."""
        raise NotImplementedError

    def recover(self) -> None:
        """Before reading: bring back an output whose commit was killed half-way (nothing
        to do where outputs are committed by their manifest)."""

    def clean_leftovers(self) -> None:
        """Under a lock on the parent: remove the temporary ``.<name>.tmp-*`` prefixes that
        killed writers of this output left (never read; :mod:`distsketch.io.commit.publish`)."""
        parent = self.parent
        for name in parent.list_names():
            if name.startswith(f".{self.name}.tmp-"):
                parent.remove(name)


