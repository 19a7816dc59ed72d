"""Where a run keeps its lock, checkpoints and result: a local folder or an object store.

Both layouts hold ``.lock``, ``state/`` and ``result/`` under ``outputs.dir``.

* **Local folder** — an ``fcntl`` lock, the checkpoint committed by an atomic
  folder swap (:func:`distsketch.io.atomic.atomic_dir`), the result likewise.
* **Object store** (``s3://``, ``gs://``, ``memory://`` ... with the spec's
  ``storage_options``) — no rename and no OS lock, so:

  - *lock*: one object ``<dir>/.lock`` (owner, token, heartbeat), written
    only when absent or stale, read back to detect a lost race, refreshed
    every :data:`HEARTBEAT_SECONDS` while the run holds it and deleted at the
    end.  It is best effort: the rule is **one writer per outputs.dir**
    (docs/workflows.md);
  - *checkpoint*: the summary goes to a fresh ``state/summary-<rows>-<id>.zarr``
    and is committed by rewriting the one object ``state/state.json`` (an
    object PUT is atomic) that names it; older summaries are deleted after;
  - *result*: built under a temporary prefix and published by
    :func:`distsketch.io.publish.atomic_output` (the manifest is written
    last; a result without it reads as uncommitted).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from distsketch.errors import StoreError, WorkflowError
from distsketch.workflow.state import LocalState, RemoteState, StateStore, store_error, upload_tree

__all__ = ["HEARTBEAT_SECONDS", "LOCK_STALE_SECONDS", "LocalResult", "LocalStorage", "ObjectLock",
           "RemoteResult", "RemoteStorage", "open_storage"]

#: a lock object whose heartbeat is older than this is stale (its run is gone)
LOCK_STALE_SECONDS = 900.0
#: how often a run refreshes the heartbeat of its lock object
HEARTBEAT_SECONDS = 60.0


def open_storage(out_dir: str, storage_options: dict | None) -> LocalStorage | RemoteStorage:
    """The storage of ``outputs.dir``: local for a path or ``file://``, else remote."""
    from distsketch.io.urls import is_url, resolve

    if is_url(out_dir):
        loc = resolve(out_dir, storage_options)
        if not loc.is_local:
            return RemoteStorage(loc, storage_options)
        out_dir = loc.path
    return LocalStorage(Path(out_dir))


# --------------------------------------------------------------------------- local


class LocalResult:
    """The uncommitted local result folder (``atomic_dir``'s temporary folder)."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.staging = tmp  # files for the result are written in place
        self.hook_arg: Any = tmp

    def target(self, name: str, small: bool = False) -> tuple[Any, dict | None]:
        """Where output ``name`` is written, and the storage options to write it with
        (``small``: written by the driver, e.g. the model)."""
        return self.tmp / name, None

    def add(self, local_file: Path, name: str) -> None:
        os.replace(local_file, self.tmp / name)

    def upload_staged(self) -> None:
        """Nothing to do: the staging folder is the result."""

    def files(self) -> list[str]:
        return sorted(p.name for p in self.tmp.iterdir())

    def write_manifest(self, info: dict) -> None:
        from distsketch.io import write_manifest

        write_manifest(self.tmp, info)


class LocalStorage:
    """``outputs.dir`` on the local file system (fcntl lock, atomic folder swaps)."""

    remote = False

    def __init__(self, out_dir: Path):
        self.out_dir = out_dir
        self.state: StateStore = LocalState(out_dir / "state")
        self.result_dir: Path | str = out_dir / "result"
        self.scratch = out_dir  # where the performance report is written first

    def check_foreign(self, inputs: list) -> None:
        """Refuse an outputs.dir whose state/ or result/ distsketch did not write, or one
        that overlaps the input: the run replaces both folders."""
        from distsketch.io.safety import check_not_input, check_replaceable

        check_not_input(self.out_dir, inputs)
        for p in (self.out_dir / "state", self.out_dir / "result"):
            try:
                check_replaceable(p, inputs=inputs)
            except StoreError as exc:
                raise StoreError(f"outputs.dir {self.out_dir} holds {p.name}/, which distsketch "
                                 f"did not write: {exc} A run replaces {p.name}/; nothing was "
                                 "changed.") from None

    @contextlib.contextmanager
    def locked(self, wait: bool | float, inputs: list, force_unlock: bool = False) -> Iterator[None]:
        """Check, create and lock the folder; repair an interrupted swap; yield."""
        from distsketch.io.atomic import recover
        from distsketch.io.locks import folder_lock

        if self.out_dir.exists() and not self.out_dir.is_dir():
            raise StoreError(f"outputs.dir {self.out_dir} exists and is not a folder; choose "
                             "another path.")
        self.check_foreign(inputs)  # before anything is created in the folder
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise store_error(exc, f"the output folder {self.out_dir}") from exc
        # an OS lock dies with its process: nothing to force
        with folder_lock(self.out_dir, wait):
            for p in (self.out_dir / "state", self.out_dir / "result"):
                recover(p)
            self.check_foreign(inputs)  # again, now that a killed swap is repaired
            for stale in self.out_dir.glob(".dask-performance-*.html"):
                stale.unlink(missing_ok=True)
            yield

    def check_held(self) -> None:
        """The fcntl lock cannot be lost while the process lives."""

    def read_result_manifest(self) -> dict | None:
        from distsketch.io import read_manifest

        return read_manifest(self.result_dir) if Path(self.result_dir).exists() else None

    @contextlib.contextmanager
    def result_writer(self, inputs: list) -> Iterator[LocalResult]:
        """atomic_dir for the result, with OS errors turned into StoreError."""
        from distsketch.io.atomic import atomic_dir

        try:
            with atomic_dir(self.result_dir, overwrite=True, inputs=inputs) as tmp:
                yield LocalResult(tmp)
        except OSError as exc:
            raise store_error(exc, f"the result {self.result_dir}") from exc


# --------------------------------------------------------------------------- object store


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
        from distsketch.io.claims import read_lease_object

        # unreadable: treated as stale
        return read_lease_object(self.loc, {"owner": "?", "heartbeat": 0.0})

    def _write(self) -> None:
        body = {"owner": self.owner, "token": self.token, "heartbeat": time.time(),
                "written_by": "distsketch"}
        self.loc.fs.pipe_file(self.loc.path, json.dumps(body).encode())

    def _alive(self, held: dict) -> bool:
        """Whether ``held`` is a live lock of another run."""
        age = time.time() - float(held.get("heartbeat", 0) or 0)
        if age >= self.stale_after:
            return False
        host, _, pid = str(held.get("owner", "")).rpartition(":")
        if host == socket.gethostname() and pid.isdigit():
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                return False  # its process is gone (killed): nothing will refresh it
            except PermissionError:
                return True
        return True

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


class RemoteResult:
    """The uncommitted result under a temporary prefix, plus a local staging folder
    for the files the report writes."""

    def __init__(self, tmp: Any, storage_options: dict | None, staging: Path):
        self.tmp = tmp
        self.storage_options = storage_options
        self.staging = staging
        self.hook_arg: Any = tmp

    def target(self, name: str, small: bool = False) -> tuple[Any, dict | None]:
        # a small output is written locally and uploaded with the report (fewer requests
        # than a publication of its own); features are written by the workers, in place
        if small:
            return self.staging / name, None
        return self.tmp.child(name).url, self.storage_options

    def add(self, local_file: Path, name: str) -> None:
        self.tmp.fs.put_file(str(local_file), self.tmp.child(name).path)
        local_file.unlink(missing_ok=True)

    def upload_staged(self) -> None:
        for p in sorted(self.staging.iterdir()):
            if p.is_file():
                self.add(p, p.name)
            elif p.is_dir():
                upload_tree(self.tmp.fs, p, self.tmp.child(p.name))

    def files(self) -> list[str]:
        fs = self.tmp.fs
        fs.invalidate_cache(self.tmp.path)
        return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(self.tmp.path, detail=False))

    def write_manifest(self, info: dict) -> None:
        from distsketch.io import write_manifest

        write_manifest(self.tmp, info)


class RemoteStorage:
    """``outputs.dir`` on an object store (lock object, pointer-committed checkpoints,
    manifest-last result)."""

    remote = True

    def __init__(self, loc: Any, storage_options: dict | None):
        self.loc = loc
        self.storage_options = storage_options
        self.out_dir = loc.url
        self.state: StateStore = RemoteState(loc.child("state"), storage_options)
        self.result_dir: Path | str = loc.child("result").url
        self._scratch = tempfile.TemporaryDirectory(prefix="distsketch-run-")
        self.scratch = Path(self._scratch.name)
        self.lock: ObjectLock | None = None

    def check_foreign(self, inputs: list) -> None:
        """Refuse a result or state prefix distsketch did not write, or one overlapping an input."""
        from distsketch.io.safety import check_output

        check_output(self.loc.child("result"), overwrite=True, inputs=inputs,
                     storage_options=self.storage_options)
        self.state.check_foreign(inputs)

    @contextlib.contextmanager
    def locked(self, wait: bool | float, inputs: list, force_unlock: bool = False) -> Iterator[None]:
        self.check_foreign(inputs)  # before the lock object is written
        self.lock = ObjectLock(self.loc)
        try:
            self.lock.acquire(wait, force=force_unlock)
        except WorkflowError:
            raise
        except Exception as exc:
            raise StoreError(f"cannot write the lock object {self.lock.loc.url} "
                             f"({type(exc).__name__}: {exc}); check that the bucket exists and "
                             "the storage options allow writing there.") from exc
        try:
            self.state.clean()  # summaries and temporary prefixes a killed run left behind
            self._clean_result_tmp()
            yield
        finally:
            self.lock.release()
            self._scratch.cleanup()

    def _clean_result_tmp(self) -> None:
        fs = self.loc.fs
        fs.invalidate_cache(self.loc.path)
        with contextlib.suppress(FileNotFoundError):
            for p in fs.ls(self.loc.path, detail=False):
                if p.rstrip("/").rsplit("/", 1)[-1].startswith(".result.tmp-"):
                    fs.rm(p, recursive=True)

    def check_held(self) -> None:
        if self.lock is not None:
            self.lock.check()

    def read_result_manifest(self) -> dict | None:
        """The committed result's manifest; None also for a result whose publication was
        interrupted (no manifest): the run publishes it again."""
        from distsketch.io import read_manifest

        return read_manifest(self.loc.child("result"))

    @contextlib.contextmanager
    def result_writer(self, inputs: list) -> Iterator[RemoteResult]:
        from distsketch.io.publish import atomic_output

        staging = self.scratch / "result"
        staging.mkdir(exist_ok=True)
        with atomic_output(self.loc.child("result"), overwrite=True, inputs=inputs,
                           storage_options=self.storage_options) as tmp:
            yield RemoteResult(tmp, self.storage_options, staging)
            self.check_held()  # a run that lost its lock does not publish
