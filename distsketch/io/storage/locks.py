"""Output-folder locks and writer locks.

One run at a time per folder (:meth:`distsketch.io.storage.location.Location.run_lock`):
:func:`folder_lock` (an ``fcntl`` lock file) on the local file system,
:func:`lease_lock` (a lease object with a heartbeat, :class:`ObjectLock`)
elsewhere.  One writer at a time per local store: :func:`store_flock`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import stat
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from distsketch.errors import StoreError, WorkflowError
from distsketch.io.storage.claims import owner_gone, read_lease_object

__all__ = ["HEARTBEAT_SECONDS", "LOCK_NAME", "LOCK_STALE_SECONDS", "ObjectLock", "folder_lock",
           "lease_lock", "store_flock"]

#: name of the lock file inside a locked folder; it holds the holder's pid
LOCK_NAME = ".lock"
#: a lock object whose heartbeat is older than this is stale (its run is gone)
LOCK_STALE_SECONDS = 900.0
#: how often a run refreshes the heartbeat of its lock object
HEARTBEAT_SECONDS = 60.0


class _OSLockHeld:
    """What :func:`folder_lock` yields: an OS lock cannot be lost while the process lives."""

    def check(self) -> None:
        """Nothing to check."""

    confirm = check


@contextlib.contextmanager
def store_flock(loc: Any, what: str) -> Iterator[_OSLockHeld]:
    """One writer per local store: an exclusive ``flock`` on the store's folder itself
    (no lock file is added to the store); ``what`` names the writer in the message."""
    try:
        fd = os.open(loc.path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as exc:
        raise StoreError(f"no store at {loc.url} ({exc.strerror}); ingest the first rows with "
                         "`distsketch ingest`.") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreError(f"another process is {what} {loc.url}; retry when it has "
                             "finished.") from None
        yield _OSLockHeld()
    finally:
        os.close(fd)  # releases the lock


@contextlib.contextmanager
def folder_lock(folder: str | os.PathLike, wait: bool | float = False) -> Iterator[_OSLockHeld]:
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
        yield _OSLockHeld()
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
    """Open the lock file without following a link or truncating anything: a symlink or a
    FIFO planted at ``.lock`` never makes a run write elsewhere."""
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


class ObjectLock:
    """A best-effort lock object ``<dir>/.lock`` on an object store.

    Parameters
    ----------
    loc : Location
        ``outputs.dir``.
    stale_after : float
        Seconds without a heartbeat after which a lock is taken over.

    Notes
    -----
    Taken when absent, stale, or held by a process of this host that no
    longer runs; read back after writing, so of two runs that wrote at once
    the one whose token is not there refuses.  Object stores offer no
    compare-and-swap, so two runs starting within one round trip can still
    both win: keep one writer per outputs.dir.
    """

    def __init__(self, loc: Any, stale_after: float = LOCK_STALE_SECONDS,
                 heartbeat: float = HEARTBEAT_SECONDS):
        self.loc = loc.child(".lock")
        self.stale_after = float(stale_after)
        self.heartbeat = float(heartbeat)
        self.token = uuid.uuid4().hex
        self.owner = f"{socket.gethostname()}:{os.getpid()}"
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _read(self) -> dict | None:
        # a body that is not a JSON object: treated as stale; an object that cannot be read
        # at all (access denied): a StoreError naming it
        return read_lease_object(self.loc, {"owner": "?", "heartbeat": 0.0}, "lock object")

    def _write(self) -> None:
        body = {"owner": self.owner, "token": self.token, "heartbeat": time.time(),
                "written_by": "distsketch"}
        self.loc.fs.pipe_file(self.loc.path, json.dumps(body).encode())

    def _alive(self, held: dict) -> bool:
        """Whether ``held`` is a live lock of another run."""
        age = time.time() - float(held.get("heartbeat", 0) or 0)
        # a process of this host that is gone (killed) will not refresh it
        return age < self.stale_after and not owner_gone(str(held.get("owner", "")))

    def acquire(self, wait: bool | float = False, force: bool = False) -> None:
        """Take the lock (see the class notes).

        Raises
        ------
        WorkflowError
            Held by a live run and waiting is not allowed or timed out; the
            message names the owner, the heartbeat's age and the fixes.
        """
        if force:
            with contextlib.suppress(FileNotFoundError):
                self.loc.fs.rm_file(self.loc.path)
        deadline = None if wait is True else time.monotonic() + float(wait or 0)
        while True:
            held = self._read()
            if held is None or not self._alive(held):
                self._write()
                mine = self._read()
                if mine is not None and mine.get("token") == self.token:
                    break
                held = mine or held  # another run wrote in between: it holds the lock
            if deadline is not None and time.monotonic() >= deadline:
                held = held or {}
                age = time.time() - float(held.get("heartbeat", 0) or 0)
                raise WorkflowError(
                    f"another distsketch run ({held.get('owner', '?')}) holds the lock object "
                    f"{self.loc.url} (heartbeat {age:.0f} s ago); one run at a time may write an "
                    "outputs.dir. Wait for it, rerun with --wait to queue behind it, or, if that "
                    f"run is gone, rerun with --force-unlock (a lock is also taken over once its "
                    f"heartbeat is {self.stale_after:.0f} s old).")
            time.sleep(min(2.0, self.heartbeat))  # polling a lock held by another run
        self._thread = threading.Thread(target=self._beat, name="distsketch-lock", daemon=True)
        self._thread.start()

    def _beat_once(self) -> bool:
        """Refresh the heartbeat; False (and :attr:`lost`) when the lock is not ours any more."""
        held = self._read()
        if held is None or held.get("token") != self.token:
            self.lost = True
            return False
        self._write()
        return True

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat):
            try:
                if not self._beat_once():
                    return
            except Exception:  # a failed refresh is retried; the lock goes stale if it persists
                continue

    def check(self) -> None:
        """Raise if another run took the lock over (it was forced or went stale)."""
        if self.lost:
            raise WorkflowError(f"the lock object {self.loc.url} was taken over by another run "
                                "(--force-unlock, or this run's heartbeat stopped); this run "
                                "stops without committing. Rerun when the other run is done.")

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with contextlib.suppress(Exception):
            held = self._read()
            if held is not None and held.get("token") == self.token:
                self.loc.fs.rm_file(self.loc.path)


@contextlib.contextmanager
def lease_lock(loc: Any, wait: bool | float, force: bool = False) -> Iterator[ObjectLock]:
    """Hold the :class:`ObjectLock` of the folder ``loc`` (a Location) for the block.

    Raises
    ------
    WorkflowError
        Held by a live run (see :meth:`ObjectLock.acquire`).
    StoreError
        The lock object cannot be written.
    """
    lock = ObjectLock(loc)
    try:
        lock.acquire(wait, force=force)
    except (WorkflowError, StoreError):  # a StoreError names the lock object already
        raise
    except Exception as exc:
        raise StoreError(f"cannot write the lock object {lock.loc.url} "
                         f"({type(exc).__name__}: {exc}); check that the bucket exists and "
                         "the storage options allow writing there.") from exc
    try:
        yield lock
    finally:
        lock.release()
