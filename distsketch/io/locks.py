"""Output-folder locks and recovery of interrupted atomic swaps.

:func:`distsketch.io.atomic.atomic_dir` builds an output under
``.<name>.tmp-<id>`` and swaps it in with two renames (old output aside as
``.<name>.old-<id>``, new one in).  A process killed between the renames, or
while writing, leaves these siblings behind; :func:`recover_swap` and
:func:`remove_tmp` put the folder back into a committed state.  Both must run
under :func:`folder_lock`, so that no other process is mid-swap.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from distsketch.errors import WorkflowError

__all__ = ["LOCK_NAME", "folder_lock", "recover_swap", "remove_tmp"]

#: name of the lock file inside a locked folder; it holds the holder's pid
LOCK_NAME = ".lock"


@contextlib.contextmanager
def folder_lock(folder: str | os.PathLike, wait: bool | float = False) -> Iterator[None]:
    """Hold an exclusive OS lock on ``folder/.lock`` (released when the process dies).

    The lock is released on leaving the block, also on an exception; the
    ``.lock`` file stays (empty) for the next run.

    Parameters
    ----------
    folder : path-like
        The folder to lock (created if missing).
    wait : bool or float, default False
        If another process holds the lock: False refuses at once, True waits
        until it is released, a number waits at most that many seconds.

    Raises
    ------
    WorkflowError
        The lock is held by another process and waiting is not allowed or
        timed out; the message names the holder's pid.

    Notes
    -----
    ``fcntl.flock`` locks are advisory and local: they serialise processes on
    one machine (or on file systems that forward flock, such as NFSv4).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    fd = _open_lock(folder / LOCK_NAME)
    held = False
    try:
        deadline = None if wait is True else time.monotonic() + float(wait or 0)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if wait is True:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                    break
                if deadline is None or time.monotonic() >= deadline:
                    holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
                    raise WorkflowError(
                        f"another distsketch run (pid {holder}) is using the output folder {folder}; "
                        "wait for it to finish, or rerun with --wait to queue behind it."
                    ) from None
                time.sleep(0.2)  # polling a lock held by another process
        held = True
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        if held:
            # on every exit, errors included: the file is kept (removing it would race with a
            # waiter) but names no holder, and LOCK_UN frees it even where a forked child
            # shares the descriptor
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _open_lock(path: Path) -> int:
    """Open the lock file without following a link and without truncating anything.

    It is created with ``O_CREAT | O_EXCL | O_NOFOLLOW``; an existing one (left by
    an earlier run) is opened with ``O_NOFOLLOW`` and must be a regular file, so a
    symlink or a FIFO planted at ``.lock`` never makes a run write elsewhere.
    """
    flags = os.O_RDWR | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        pass
    except OSError as exc:
        raise _lock_error(path, exc) from exc
    try:
        # O_NONBLOCK: opening a FIFO planted at .lock must not hang
        fd = os.open(path, flags | os.O_NONBLOCK)
    except OSError as exc:
        raise _lock_error(path, exc) from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _lock_error(path, None)
    return fd


def _lock_error(path: Path, exc: OSError | None) -> WorkflowError:
    if exc is None or exc.errno in (errno.ELOOP, errno.EMLINK):
        what = "is a symbolic link" if exc is not None or path.is_symlink() else \
            "is not a regular file"
        return WorkflowError(
            f"the lock file {path} {what}; distsketch refuses to use it (a run would write "
            "into whatever it points to). Remove it if you did not create it, then rerun.")
    return WorkflowError(f"cannot open the lock file {path}: {exc}. Check the folder's "
                         "permissions.")


def recover_swap(path: str | os.PathLike) -> None:
    """Undo an interrupted two-rename swap of ``atomic_dir`` at ``path``.

    If ``path`` exists, leftover ``.old-*`` copies are removed.  If it does not
    (killed between the two renames), the newest ``.old-*`` copy is renamed
    back, so the previous committed output is visible again.
    """
    path = Path(path)
    if path.exists():
        for old in path.parent.glob(f".{path.name}.old-*"):
            shutil.rmtree(old, ignore_errors=True)
        return
    olds = sorted(path.parent.glob(f".{path.name}.old-*"), key=lambda p: p.stat().st_mtime)
    if olds:
        os.replace(olds[-1], path)
        for old in olds[:-1]:
            shutil.rmtree(old, ignore_errors=True)


def remove_tmp(path: str | os.PathLike) -> None:
    """Remove uncommitted ``.<name>.tmp-*`` siblings of ``path`` left by a killed writer."""
    path = Path(path)
    for tmp in path.parent.glob(f".{path.name}.tmp-*"):
        shutil.rmtree(tmp, ignore_errors=True)
