"""One storage protocol: a :class:`Location` with capabilities, one subclass per storage kind.

:func:`distsketch.io.urls.resolve` (also ``Location.of``) turns a path or URL
into a :class:`LocalLocation` (the local file system) or an
:class:`FsspecLocation` (any other fsspec filesystem: ``s3://``, ``gs://``,
``memory://`` ...).  Every writer, lock, claim and workflow state asks the
location what it needs (open a Zarr store, commit an output, take a lock, list
a prefix ...) instead of asking which kind it is; what differs between kinds
lives here, once:

=======================  =============================  ===============================
capability / operation   LocalLocation                  FsspecLocation
=======================  =============================  ===============================
``supports_rename``      yes: outputs are committed by  no: outputs are committed by
                         an atomic folder swap          their manifest, written last
``supports_links``       yes: stores are read only if   no (an object store has none)
                         they hold no symbolic link
:meth:`atomic_output`    :func:`~distsketch.io.atomic.  :func:`~distsketch.io.publish.
                         atomic_dir`                    publish_prefix`
:meth:`run_lock`         ``fcntl`` lock file            lease object with heartbeat
:meth:`writer_lock`      ``flock`` on the folder        claim object beside it
=======================  =============================  ===============================

A new storage kind is one more subclass (see docs/architecture.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from distsketch.errors import StoreError

__all__ = ["FsspecLocation", "LocalLocation", "Location"]


@dataclasses.dataclass(frozen=True)
class Location:
    """A resolved storage location (use :meth:`of`; see the module docstring).

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

    @staticmethod
    def of(path: str | os.PathLike | Location, storage_options: Mapping | None = None,
           ) -> Location:
        """The location of ``path`` (see :func:`distsketch.io.urls.resolve`)."""
        from distsketch.io.urls import resolve

        return resolve(path, storage_options)

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
        """Refuse a store holding a symbolic link (nothing to do: this storage has none)."""

    def check_committed(self) -> None:
        """Refuse a store whose write began but was not committed (marker, no manifest)."""
        from distsketch.io.publish import check_committed

        check_committed(self)

    def written_by_distsketch(self) -> bool:
        """Whether this store or folder carries a distsketch manifest or marker."""
        from distsketch.io.safety import url_written_by_distsketch

        return url_written_by_distsketch(self)

    def check_output(self, *, overwrite: bool, inputs: Iterable[Any] = ()) -> Any:
        """:func:`distsketch.io.safety.check_output` for this location."""
        from distsketch.io.safety import check_url_output

        return check_url_output(self, overwrite=overwrite, inputs=list(inputs))

    # ------------------------------------------------------------------ commits and locks

    def atomic_output(self, *, overwrite: bool, inputs: Iterable[Any] = ()
                      ) -> contextlib.AbstractContextManager[Location]:
        """A temporary location that becomes this one when the block succeeds
        (:func:`distsketch.io.publish.atomic_output`)."""
        from distsketch.io.publish import publish_prefix

        return publish_prefix(self, overwrite=overwrite, inputs=list(inputs))

    def run_lock(self, wait: bool | float, force: bool = False) -> Any:
        """One run at a time in this folder: a context manager whose value has ``check()``
        (raises once the lock was taken over)."""
        from distsketch.io.locks import lease_lock

        return lease_lock(self, wait, force)

    def writer_lock(self, what: str) -> contextlib.AbstractContextManager[Any]:
        """One writer of this store at a time (``what``: the writer, for the message)."""
        from distsketch.io.claims import claimed

        return claimed(self)

    def recover(self) -> None:
        """Before reading: bring back an output whose commit was killed half-way (nothing
        to do where outputs are committed by their manifest)."""

    def clean_leftovers(self) -> None:
        """Under a lock on the parent: remove the temporary ``.<name>.tmp-*`` prefixes that
        killed writers of this output left (never read; :mod:`distsketch.io.publish`)."""
        parent = self.parent
        for name in parent.list_names():
            if name.startswith(f".{self.name}.tmp-"):
                parent.remove(name)


class LocalLocation(Location):
    """A path on the local file system (see the module docstring)."""

    is_local: ClassVar[bool] = True
    supports_rename: ClassVar[bool] = True
    supports_links: ClassVar[bool] = True
    noun: ClassVar[str] = "path"

    @property
    def protocol(self) -> str:
        return "file"

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
        part.write_bytes(data)
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
        import zarr

        return zarr.storage.LocalStore(self.path, read_only=read_only)

    def absent(self, check: bool = True) -> bool:
        return not self.exists()  # no request: always asked

    def refuse_links(self, what: str) -> None:
        """Refuse a store holding a symbolic link or a special file (read only from inside
        itself; :func:`distsketch.io.stores.refuse_links`)."""
        from distsketch.io.stores import refuse_links

        refuse_links(self.path, what)

    def check_committed(self) -> None:
        """Nothing to check: a local output appears only by its committing rename."""

    def written_by_distsketch(self) -> bool:
        from distsketch.io.safety import written_by_distsketch

        return written_by_distsketch(self.path)

    def check_output(self, *, overwrite: bool, inputs: Iterable[Any] = ()) -> Any:
        from distsketch.io.safety import check_local_output

        return check_local_output(self.path, overwrite=overwrite, inputs=list(inputs))

    @contextlib.contextmanager
    def atomic_output(self, *, overwrite: bool, inputs: Iterable[Any] = ()) -> Iterator[Location]:
        from distsketch.io.atomic import atomic_dir

        with atomic_dir(self.path, overwrite=overwrite, inputs=inputs) as tmp_dir:
            yield Location.of(tmp_dir)

    def run_lock(self, wait: bool | float, force: bool = False) -> Any:
        # an OS lock dies with its process: nothing to force
        from distsketch.io.locks import folder_lock

        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise StoreError(f"{self.path} exists and is not a folder; choose another path.")
        return folder_lock(self.path, wait)

    def writer_lock(self, what: str) -> contextlib.AbstractContextManager[Any]:
        from distsketch.io.locks import store_flock

        return store_flock(self, what)

    def recover(self) -> None:
        # only a missing output: a reader deletes nothing that is there
        if not Path(self.path).exists():
            self.clean_leftovers()

    def clean_leftovers(self) -> None:
        """Finish or undo a swap killed between its renames; remove dead temporaries
        (:func:`distsketch.io.atomic.recover`)."""
        from distsketch.io.atomic import recover

        recover(self.path)


class FsspecLocation(Location):
    """A location on any other fsspec filesystem (object stores: no rename, no lock)."""

    # everything is done through fsspec calls: the base class is this kind
