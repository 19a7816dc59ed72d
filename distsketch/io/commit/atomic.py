"""Atomic outputs: write to a temporary sibling, then rename into place.

If anything fails the temporary directory is removed and an existing output
is left untouched.  Commit protocol (``<token>``: 12 hex digits, both siblings')::

    1. everything written into .<name>.tmp-<token>/, then its marker .distsketch
    2. the output may still be written: re-checked now (another command may
       have committed it meanwhile; only distsketch's own outputs are replaced)
    3. <name>  -> .<name>.old-<token>      (only when replacing)
    4. .<name>.tmp-<token> -> <name>
    5. .<name>.old-<token> removed

The writer holds an ``flock`` on its temporary directory to the end, so an
unlocked leftover belongs to a dead process; :func:`recover` (before every
write to ``<name>``, and when a missing store is opened) repairs what it left.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from distsketch.errors import DistsketchError, StoreError
from distsketch.io.storage.safety import MARKER_NAME, check_output

__all__ = ["atomic_dir", "check_writable", "recover"]

_SPACE_ERRNOS = {errno.ENOSPC, errno.EDQUOT}


def _step(name: str, path: Path) -> None:
    """Instrumentation point of the commit protocol (fault-injection tests patch it)."""


def check_writable(path: str | os.PathLike, *, overwrite: bool,
                   inputs: Iterable[Any] = ()) -> Path:
    """Check that ``path`` may be written (see :func:`distsketch.io.storage.safety.check_output`)
    and that its parent exists (created if missing) and is writable."""
    p = check_output(path, overwrite=overwrite, inputs=inputs)
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


def _no_space(exc: BaseException) -> OSError | None:
    """The ENOSPC/EDQUOT error in ``exc``'s chain, if any."""
    seen = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in _SPACE_ERRNOS:
            return e
        e = e.__cause__ or e.__context__
    return None


def _space_error(final: Path, err: OSError) -> StoreError:
    return StoreError(f"no space left on device writing {final} ({err}); free space or choose "
                      "another output. Nothing was committed and the temporary files were "
                      "removed.")


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike, *, overwrite: bool = False,
               inputs: Iterable[Any] = ()) -> Iterator[Path]:
    """Yield a temporary directory that becomes ``path`` on success.

    Parameters
    ----------
    path : path-like
        Final location (local file system).
    overwrite : bool
        Replace an existing output, which must be one distsketch wrote
        (:func:`distsketch.io.storage.safety.check_replaceable`); otherwise an
        existing ``path`` is an error.
    inputs : iterable of path-like, optional
        Inputs of the computation; ``path`` may not be, contain or lie in one.

    Yields
    ------
    pathlib.Path
        The temporary directory to write into.

    Raises
    ------
    StoreError
        ``path`` exists (without ``overwrite``, or not written by
        distsketch), appeared while writing, or the disk is full.
    InputError
        ``path`` overlaps an input.

    Notes
    -----
    The swap of an existing output is two renames (old aside, new in); a reader
    sees either the complete old or the complete new output, never a mix, and
    a kill between them is repaired by the next writer (:func:`recover`).
    """
    inputs = list(inputs)
    final = check_writable(path, overwrite=overwrite, inputs=inputs)
    recover(final)
    try:
        tmp, token, fd = _locked_tmp(final)
    except OSError as exc:
        if exc.errno in _SPACE_ERRNOS:
            raise _space_error(final, exc) from exc
        raise StoreError(f"cannot write under {final.parent}: {exc}.") from exc
    try:
        try:
            yield tmp
            (tmp / MARKER_NAME).write_text(json.dumps({"written_by": "distsketch",
                                                       "token": token}))
            _step("written", tmp)
            _commit(final, tmp, token, overwrite, inputs)
        except BaseException as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            full = _no_space(exc) if isinstance(exc, Exception) else None
            if full is not None and not (isinstance(exc, StoreError)
                                         and "no space left" in str(exc)):
                raise _space_error(final, full) from exc
            raise
    finally:
        os.close(fd)


def _locked_tmp(final: Path, attempts: int = 5) -> tuple[Path, str, int]:
    """Create ``.<name>.tmp-<token>`` already locked, so that an unlocked ``.tmp-`` directory
    always belongs to a dead writer: it is made as ``.<name>.init-<token>`` and renamed once
    locked (recover() removes an empty unlocked ``.init-``; its writer retries)."""
    for attempt in range(attempts):
        token = uuid.uuid4().hex[:12]
        init = final.parent / f".{final.name}.init-{token}"
        tmp = final.parent / f".{final.name}.tmp-{token}"
        init.mkdir()
        fd = -1
        try:
            fd = os.open(init, os.O_RDONLY)
            fcntl.flock(fd, fcntl.LOCK_EX)  # tells recover() that this writer is alive
            os.rename(init, tmp)
            return tmp, token, fd
        except FileNotFoundError:
            # removed by a concurrent recover() before it was locked: try again
            if fd >= 0:
                os.close(fd)
            if attempt == attempts - 1:
                raise
        except BaseException:
            if fd >= 0:
                os.close(fd)
            with contextlib.suppress(OSError):
                init.rmdir()
            raise
    raise AssertionError("unreachable")  # pragma: no cover


def _commit(final: Path, tmp: Path, token: str, overwrite: bool, inputs: list) -> None:
    """Steps 2–5 of the protocol (module docstring)."""
    try:
        check_output(final, overwrite=overwrite, inputs=inputs)
    except DistsketchError as exc:
        raise type(exc)(f"{exc} (checked again when committing; nothing was written)") from None
    _step("checked", tmp)
    old = None
    try:
        if overwrite and os.path.lexists(final):
            old = final.parent / f".{final.name}.old-{token}"
            with _no_appender(final):
                os.replace(final, old)
            _step("old-aside", old)
        os.replace(tmp, final)
    except OSError as exc:
        if old is not None and not os.path.lexists(final):
            os.replace(old, final)
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR) and old is None:
            raise StoreError(
                f"output {final} was created by another command while this one was writing; "
                "it was left as it is and nothing was committed. Choose another output path "
                "or pass overwrite=True (CLI: --overwrite) to replace it.") from exc
        if exc.errno in _SPACE_ERRNOS:
            raise _space_error(final, exc) from exc
        raise StoreError(f"cannot commit output {final}: {exc}.") from exc
    _step("committed", final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def _no_appender(final: Path) -> Iterator[None]:
    """Hold the writer lock of the store ``final`` while it is moved aside: an append, which
    writes by path, would go on writing into the new store renamed into its place."""
    try:
        fd = os.open(final, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
                     | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        fd = -1  # not a folder: nothing appends to it
    try:
        if fd >= 0:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise StoreError(
                    f"another process is appending to {final} (`ingest --append`); it was not "
                    "replaced and nothing was committed. Retry when the append has finished."
                ) from None
        yield
    finally:
        if fd >= 0:
            os.close(fd)


def _is_live(tmp: Path) -> bool:
    """Whether a writer still holds the lock on the temporary directory ``tmp``."""
    try:
        fd = os.open(tmp, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also releases a lock taken just now
    return False


def recover(path: str | os.PathLike) -> None:
    """Repair what a killed writer of ``path`` left behind (see the module docstring).

    If ``path`` is missing after a swap was killed between its renames, the
    complete new directory is renamed in (or, if it is incomplete, the old one
    is renamed back).  Then the ``.<name>.tmp-<token>`` and
    ``.<name>.old-<token>`` siblings of dead writers are removed; siblings of
    live writers and anything not named exactly so are left alone.
    """
    final = Path(os.fspath(path)).expanduser().absolute()
    parent = final.parent
    try:
        names = os.listdir(parent)
    except OSError:
        return
    pattern = re.compile(rf"\.{re.escape(final.name)}\.(tmp|old|init)-([0-9a-f]{{12}})")
    found: dict[str, dict[str, Path]] = {"tmp": {}, "old": {}, "init": {}}
    for n in names:
        m = pattern.fullmatch(n)
        p = parent / n
        if m and p.is_dir() and not p.is_symlink():
            found[m.group(1)][m.group(2)] = p
    for p in found["init"].values():
        if not _is_live(p):
            with contextlib.suppress(OSError):
                p.rmdir()  # only ever empty: a writer writes after the rename to .tmp-
    if not found["tmp"] and not found["old"]:
        return
    live = {t for t, p in found["tmp"].items() if _is_live(p)}
    if not os.path.lexists(final):
        dead_olds = [(p.stat().st_mtime, t) for t, p in found["old"].items() if t not in live]
        for _, token in sorted(dead_olds, reverse=True)[:1]:
            new = found["tmp"].get(token)
            with contextlib.suppress(OSError):
                if new is not None and (new / MARKER_NAME).is_file():
                    os.replace(new, final)  # the new output was complete: finish the swap
                else:
                    os.replace(found["old"][token], final)  # undo the swap
    for kind in ("old", "tmp"):
        for token, p in found[kind].items():
            if token not in live and os.path.lexists(p):
                shutil.rmtree(p, ignore_errors=True)
