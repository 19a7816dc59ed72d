"""The one rule for what distsketch may replace: only what it wrote itself.

Every writer reaches :func:`check_output` through
:func:`distsketch.io.commit.atomic.atomic_dir` (or its object-store
counterpart), before writing and again at commit time.  An existing output is
replaced only with ``overwrite`` and only if it carries a distsketch manifest,
the marker ``.distsketch`` or is a workflow checkpoint; never a file, a link,
the home or working directory (or a parent of it), nor an input, a folder
holding one or a path inside one (:func:`check_replaceable`; docs/storage.md).
Writing *into* an input is refused even without ``overwrite``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from distsketch.errors import InputError, StoreError
from distsketch.io.storage.urls import Location, resolve

__all__ = ["MARKER_NAME", "check_local_output", "check_not_input", "check_output", "check_replaceable",
           "check_url_output", "refuse_links", "split_array_path",
           "url_written_by_distsketch", "written_by_distsketch"]

#: marker file that atomic_dir writes into every directory it builds
MARKER_NAME = ".distsketch"
_MANIFEST = "distsketch-manifest.json"  # io.commit.manifest.MANIFEST_NAME (no import: no cycle)
_LOCK = ".lock"  # io.storage.locks.LOCK_NAME


def split_array_path(text: str) -> tuple[str, str | None]:
    """Split ``"store.zarr::name"`` into ``("store.zarr", "name")``.

    The rule: a path that exists as written is a path (``/data/a::b`` is a
    directory).  Otherwise the text is split at its *last* ``::`` when the
    right side is a non-empty array name without ``/`` (``\\``) and the left
    side is not empty; anything else is a plain path.  So
    ``/data/a::b/x.zarr`` is a path, ``/data/a::b/x.zarr::X`` is the array
    ``X`` of ``/data/a::b/x.zarr``.

    Examples
    --------
    >>> split_array_path("/nonexistent/a::b/x.zarr::y")
    ('/nonexistent/a::b/x.zarr', 'y')
    >>> split_array_path("/nonexistent/a::b/x.zarr")
    ('/nonexistent/a::b/x.zarr', None)
    """
    s = os.fspath(text)
    if "::" not in s:
        return s, None
    if "://" not in s and os.path.lexists(s):
        return s, None
    left, _, right = s.rpartition("::")
    if left and right and "/" not in right and "\\" not in right:
        return left, right
    return s, None


def _resolve(path: str | os.PathLike) -> Path:
    """Absolute, symlink-free form of ``path`` (for comparisons only)."""
    return Path(os.path.realpath(Path(os.fspath(path)).expanduser()))


def _input_locations(inputs: Iterable[Any], storage_options: Any) -> list[Location]:
    """The inputs (``store.zarr::name`` accepted) as locations in their canonical form
    (:meth:`~distsketch.io.storage.location.Location.canonical`); a URL that cannot be resolved
    cannot overlap and is left out."""
    out = []
    for item in inputs:
        if item is None or not isinstance(item, (str, os.PathLike, Location)):
            continue
        text = item if isinstance(item, Location) else split_array_path(os.fspath(item))[0]
        try:
            src = resolve(text, storage_options)
        except Exception:
            continue
        out.append(src.canonical())
    return out


def written_by_distsketch(path: str | os.PathLike) -> bool:
    """Whether the directory ``path`` carries a distsketch manifest or marker."""
    p = Path(path)
    if (p / _MANIFEST).is_file() or (p / MARKER_NAME).is_file():
        return True
    # a workflow checkpoint of a version that wrote no marker: state.json in a run folder
    return (p / "state.json").is_file() and (p.parent / _LOCK).is_file()


def _check_not_input(loc: Location, inputs: Iterable[Any], storage_options: Any = None) -> None:
    """Refuse an output that is, contains or lies inside one of ``inputs`` (same storage,
    compared in canonical form: symbolic links resolved on the local file system)."""
    out = loc.canonical()
    for src in _input_locations(inputs, storage_options):
        if out.within(src) or src.within(out):
            where = ("is the input" if out.path.rstrip("/") == src.path.rstrip("/") else
                     "is inside the input" if out.within(src) else "contains the input")
            raise InputError(
                f"output {loc.user_path()} {where} {src.user_path()}; distsketch never writes "
                f"into or replaces its input. Choose another output {loc.noun}.")


def check_not_input(path: str | os.PathLike | Location, inputs: Iterable[Any]) -> Any:
    """Refuse (InputError) an output folder that is, contains or lies inside an input.

    Returns the absolute path (a :class:`~pathlib.Path`), or the URL.
    """
    loc = resolve(path)
    _check_not_input(loc, inputs, loc.storage_options)
    return loc.user_path()


def check_replaceable(path: str | os.PathLike | Location, *, inputs: Iterable[Any] = ()) -> Any:
    """Refuse unless the existing ``path`` may be replaced by a new distsketch output.

    Parameters
    ----------
    path : path-like, URL or Location
        An output about to be replaced (``overwrite=True``); a URL is
        resolved with the configured storage options (pass a resolved
        :class:`~distsketch.io.storage.urls.Location` for others).
    inputs : iterable of path-like, optional
        The inputs of the command (``store.zarr::name`` accepted); the output
        may not be, contain or lie inside any of them.

    Returns
    -------
    pathlib.Path
        The absolute (not symlink-resolved) path.

    Raises
    ------
    InputError
        ``path`` is, contains or lies inside an input.
    StoreError
        ``path`` is a file, a symbolic link, the home or working directory (or
        a parent of it), or a directory without a distsketch manifest or marker.
    """
    return resolve(path).check_output(overwrite=True, inputs=inputs)


def _check_local_replaceable(final: Path) -> Path:
    """The rules of :func:`check_replaceable` for an existing local ``final``."""
    resolved = _resolve(final)
    if final.is_symlink():
        raise StoreError(
            f"output {final} is a symbolic link; distsketch does not replace links or what they "
            "point to. Remove the link yourself or choose another output path.")
    cwd = _resolve(os.getcwd())
    if cwd == resolved or resolved in cwd.parents:
        raise StoreError(
            f"output {final} is the working directory or one of its parents; distsketch never "
            "replaces it. Choose a new output path such as ./out.zarr.")
    if resolved == _resolve(Path.home()):
        raise StoreError(f"output {final} is the home directory; distsketch never replaces it. "
                         "Choose a new output path.")
    if not final.is_dir():
        raise StoreError(
            f"output {final} is an existing file that distsketch did not write; it is never "
            "replaced. Remove it yourself or choose another output path.")
    if not written_by_distsketch(final):
        raise _not_ours(final, "path")
    return final


def _exists(where: Any, ours: bool, noun: str) -> StoreError:
    """An existing output without ``overwrite``: how to replace it, or why it never is."""
    hint = ("pass overwrite=True (CLI: --overwrite) to replace it" if ours else
            "it was not written by distsketch (it has no distsketch manifest), so it will not "
            f"be replaced, even with overwrite (CLI: --overwrite); choose another output {noun}")
    return StoreError(f"output {where} already exists; {hint}.")


def _not_ours(where: Any, noun: str) -> StoreError:
    return StoreError(
        f"output {where} exists and has no distsketch manifest, so distsketch did not write "
        "it and will not replace it (even with overwrite). Remove it yourself or choose "
        f"another output {noun}.")


def check_output(path: str | os.PathLike | Location, *, overwrite: bool,
                 inputs: Iterable[Any] = (), storage_options: Any = None) -> Any:
    """Check that ``path`` may be written as a new output, before any work is done.

    An existing ``path`` needs ``overwrite`` and must pass
    :func:`check_replaceable` (for a URL: hold a distsketch manifest or
    marker); a path inside (or containing) an input is refused in any case.

    Parameters
    ----------
    path : path-like, URL or Location
    overwrite : bool
    inputs : iterable of path-like or URL, optional
    storage_options : mapping, optional
        For a URL ``path`` (and URL inputs): fsspec options.

    Returns
    -------
    pathlib.Path or Location
        The absolute path; the resolved :class:`~distsketch.io.storage.urls.Location`
        for a URL.
    """
    return resolve(path, storage_options).check_output(overwrite=overwrite, inputs=inputs)


def check_local_output(path: str, *, overwrite: bool, inputs: list) -> Path:
    """:func:`check_output` on the local file system (``path`` absolute)."""
    final = Path(path)
    _check_not_input(resolve(path), inputs)
    if os.path.lexists(final):
        if not overwrite:
            raise _exists(final, final.is_dir() and written_by_distsketch(final), "path")
        _check_local_replaceable(final)
    return final


def url_written_by_distsketch(loc: Location) -> bool:
    """Whether the prefix ``loc`` carries a distsketch manifest or marker."""
    fs = loc.fs
    fs.invalidate_cache(loc.path)
    try:
        return bool(fs.isfile(loc.child(_MANIFEST).path) or fs.isfile(loc.child(MARKER_NAME).path))
    except (FileNotFoundError, OSError):
        return False


def check_url_output(loc: Location, *, overwrite: bool, inputs: list) -> Location:
    """:func:`check_output` for an object-store (or other fsspec) location."""
    _check_not_input(loc, inputs, loc.storage_options)
    if not loc.exists():
        return loc
    ours = url_written_by_distsketch(loc)
    if loc.fs.isfile(loc.path):
        raise StoreError(f"output {loc.url} is an existing object that distsketch did not write; "
                         "it is never replaced. Remove it yourself or choose another output URL.")
    if not overwrite:
        raise _exists(loc.url, ours, "URL")
    if not ours:
        raise _not_ours(loc.url, "URL")
    return loc


def refuse_links(root: str | os.PathLike, what: str) -> None:
    """Refuse a local store that holds a symbolic link or a special file under ``root``.

    A link inside a store (a chunk, an array folder, the metadata) would make
    distsketch read data from outside it: another model's arrays, another
    run's checkpoint, any file the user can read.  ``root`` itself may be a
    link (the user named it); nothing below it may be.

    Parameters
    ----------
    root : path-like
        The store's root folder (a local path).
    what : str
        What the store is, for the message (``"model"``, ``"Zarr store"``).

    Raises
    ------
    StoreError
        Naming the first link (and its target) or special file found.

    Notes
    -----
    One ``os.scandir`` per folder of the store; the file types come from the
    directory listing itself, so no chunk is opened or stat-ed: 0.2-0.4 s for
    2*10^5 chunks (cached listings), once per open on the client (graph
    readers on the workers do not repeat it).
    """
    top = os.fspath(root)
    if not os.path.isdir(top):
        return  # a missing store or a single file: the caller's open reports it
    pending = [top]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as entries:
                found = list(entries)
        except OSError as exc:
            raise StoreError(f"cannot list {folder} in {what} {top}: {exc}; check the path and "
                             "its permissions.") from exc
        for entry in found:
            if entry.is_symlink():
                try:
                    target = os.readlink(entry.path)
                except OSError:
                    target = "?"
                raise StoreError(
                    f"{what} {top} contains a symbolic link: {entry.path} -> {target}. distsketch "
                    "reads a store only from inside itself and never follows a link in it. "
                    "Replace the link by a copy of the data it points to (e.g. `cp -rL`), or "
                    "re-create the store.")
            if entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)
            elif not entry.is_file(follow_symlinks=False):
                raise StoreError(
                    f"{what} {top} contains {entry.path}, which is not a regular file or folder "
                    "(a FIFO, socket or device); a store holds only files. Remove it, or "
                    "re-create the store.")
