"""One writer per object-store destination: a claim object beside it.

Object stores have no rename and no lock: without a claim, two writers of one
URL would both publish and the second would silently replace the first.  A
:class:`WriterClaim` is the object ``.<name>.writer`` (token, host, pid, start
time), put before anything is written (conditionally where the store can),
read back, and confirmed right before publishing (docs/storage.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
import uuid
from collections.abc import Iterator

from distsketch.errors import StoreError
from distsketch.io.storage.urls import Location

__all__ = ["WriterClaim", "claimed", "owner_gone", "read_lease_object"]


def owner_gone(owner: str) -> bool:
    """Whether ``owner`` (``host:pid``) is a process of this host that no longer runs."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def read_lease_object(loc: Location, unreadable: dict, what: str = "claim object") -> dict | None:
    """The JSON object of a claim or lock object on a store, fresh from the store.

    Returns None where there is none, and ``unreadable`` (a copy, with the
    reason under ``"unreadable"``) where its body is not a JSON object (a
    writer killed mid-put, or not ours).

    Raises
    ------
    StoreError
        The object could not be read for another reason than its absence
        (access denied, a broken connection): the message names ``what``,
        its URL and the error, rather than letting the caller report a
        missing bucket or an unwritable destination.
    """
    fs = loc.fs
    try:
        fs.invalidate_cache(loc.path)
        raw = fs.cat_file(loc.path)
    except FileNotFoundError:
        return None
    except Exception as exc:
        raise StoreError(
            f"the {what} {loc.url} is unreadable ({type(exc).__name__}: {exc}): it may exist, "
            "but this process cannot read it, so it cannot tell whether another writer holds "
            "what it guards. Check that the storage options (credentials; CLI: "
            "--storage-option KEY=VALUE) allow reading that object (s3:GetObject), or delete "
            "it once no other writer is running.") from exc
    try:
        body = json.loads(raw)
    except ValueError as exc:
        return {**unreadable, "unreadable": f"its body is not JSON: {exc}"}
    if not isinstance(body, dict):
        return {**unreadable, "unreadable": f"its body is a JSON {type(body).__name__}, not an "
                                            "object"}
    return body


class WriterClaim:
    """The claim of one writer on the destination ``loc`` (an object-store Location).

    Use :meth:`take` before writing, :meth:`confirm` right before publishing
    and :meth:`release` at the end (also after a failure).
    """

    def __init__(self, loc: Location):
        self.dest = loc
        self.loc = loc.sibling(f".{loc.name}.writer")
        self.token = uuid.uuid4().hex
        self.owner = f"{socket.gethostname()}:{os.getpid()}"
        self.held = False

    def _read(self) -> dict | None:
        # unreadable: someone else's
        return read_lease_object(self.loc, {"owner": "?", "token": "?"})

    def _create(self) -> bool:
        """Put the claim unless one exists; False when another writer's is there."""
        body = json.dumps({"written_by": "distsketch", "token": self.token, "owner": self.owner,
                           "started": time.time(), "destination": self.dest.url}).encode()
        fs = self.loc.fs
        try:
            fs.pipe_file(self.loc.path, body, mode="create")
            return True
        except FileExistsError:
            return False
        except TypeError:
            pass  # no conditional put here: write, then read back below
        except OSError as exc:
            if "precondition" in str(exc).lower() or "412" in str(exc):
                return False
            raise
        if self._read() is not None:
            return False
        fs.pipe_file(self.loc.path, body)
        return True

    def _refusal(self, held: dict, when: str) -> StoreError:
        if held.get("unreadable"):
            # not a claim this version can read: say so, instead of an owner "?"
            return StoreError(
                f"the claim object {self.loc.url} of {self.dest.url} is unreadable "
                f"({held['unreadable']}), so another writer may hold the destination: {when}. "
                "A distsketch writer puts a JSON object there; if no other writer is running "
                f"(one killed mid-put, or a file not written by distsketch), delete "
                f"{self.loc.url} and rerun.")
        try:
            started = f"started {time.time() - float(held['started']):.0f} s ago"
        except (KeyError, TypeError, ValueError):
            started = "start time unknown"
        return StoreError(
            f"another writer ({held.get('owner', '?')}, {started}) is writing "
            f"{self.dest.url}: {when}. Two writers of one object-store destination would "
            "replace each other's output. Rerun when it has finished; if that writer is gone "
            f"(killed on another machine), delete its claim {self.loc.url} and rerun.")

    def take(self) -> None:
        """Claim the destination before anything is written.

        Raises
        ------
        StoreError
            Another writer holds the claim (or won a race for it).
        """
        for _ in range(2):
            if self._create():
                break
            held = self._read()
            if held is None:
                continue  # released in between: try once more
            if owner_gone(str(held.get("owner", ""))):
                with contextlib.suppress(FileNotFoundError):
                    self.loc.fs.rm_file(self.loc.path)  # its writer was killed: taken over
                continue
            raise self._refusal(held, "nothing was written by this one")
        mine = self._read()
        if mine is None or mine.get("token") != self.token:
            raise self._refusal(mine or {}, "it claimed the destination at the same time; "
                                            "nothing was written by this one")
        self.held = True

    def confirm(self) -> None:
        """Raise unless the claim is still this writer's (called right before publishing)."""
        held = self._read()
        if held is None or held.get("token") != self.token:
            self.held = False
            raise self._refusal(held or {}, "it took the destination over while this one was "
                                            "writing; nothing was published by this one")

    def release(self) -> None:
        """Delete the claim if it is still this writer's."""
        if not self.held:
            return
        with contextlib.suppress(Exception):
            held = self._read()
            if held is not None and held.get("token") == self.token:
                self.loc.fs.rm_file(self.loc.path)
        self.held = False


@contextlib.contextmanager
def claimed(loc: Location) -> Iterator[WriterClaim]:
    """Hold the :class:`WriterClaim` of ``loc`` for the block (taken, then released)."""
    claim = WriterClaim(loc)
    claim.take()
    try:
        yield claim
    finally:
        claim.release()
