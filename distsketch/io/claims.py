"""One writer per object-store destination: a claim object beside it.

Object stores have no rename and no lock, so two processes writing the same
URL at once would both publish, and the second would silently replace the
first.  :class:`WriterClaim` detects that: a writer puts a claim object
``.<name>.writer`` beside the destination (its token, host, pid and start
time) before it writes anything, and checks that the claim is still its own
right before it publishes.  The claim is created with a conditional put
(``If-None-Match: *`` on S3: only one of two racing writers can create it)
where the filesystem supports one, and is read back in any case, so of two
writers one gets a :class:`~distsketch.errors.StoreError` and the other's
output is never replaced behind its back.

A claim left by a killed writer is taken over when that writer ran on this
host and its process is gone; otherwise the message names the claim, its
owner and how old it is, and says to delete it once that writer is known to
be gone.
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
from distsketch.io.urls import Location

__all__ = ["WriterClaim", "claimed", "read_lease_object"]


def _pid_gone(owner: str) -> bool:
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


def read_lease_object(loc: Location, unreadable: dict) -> dict | None:
    """The JSON object of a claim or lock object on a store, fresh from the store.

    Returns None where there is none, and ``unreadable`` (a copy) where its
    body is not a JSON object (a writer killed mid-put, or not ours).
    """
    fs = loc.fs
    try:
        fs.invalidate_cache(loc.path)
        body = json.loads(fs.cat_file(loc.path))
    except FileNotFoundError:
        return None
    except ValueError:
        return dict(unreadable)
    return body if isinstance(body, dict) else dict(unreadable)


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
        age = time.time() - float(held.get("started", 0) or 0)
        return StoreError(
            f"another writer ({held.get('owner', '?')}, started {age:.0f} s ago) is writing "
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
            if _pid_gone(str(held.get("owner", ""))):
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
