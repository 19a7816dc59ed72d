"""Checkpoint state: ``state/state.json`` plus the method's summary, written atomically.

``state.json`` records what the summary depends on (spec key, input width and
dtype, scaler) and how far the run got (``rows_done``, ``in_progress``, a
fingerprint of the consumed rows).

One :class:`StateStore` serves every storage kind; its
:class:`~distsketch.io.storage.location.Location` decides how a checkpoint is
committed: where a folder can be renamed atomically (``supports_rename``),
``state/`` is replaced by one folder swap (summary in ``state/summary/``);
elsewhere (object stores) each summary is written under a fresh name and
committed by rewriting the one object ``state.json``, which names it (a
single-object PUT is atomic).
"""

from __future__ import annotations

import contextlib
import errno
import json
import uuid
from pathlib import Path
from typing import Any

from distsketch.errors import StoreError, WorkflowError
from distsketch.io.arrays.fingerprints import fingerprint
from distsketch.io.commit.manifest import read_json_object
from distsketch.io.storage.location import Location
from distsketch.workflow.methods import MethodAdapter

__all__ = ["STATE_VERSION", "StateStore", "check_state", "prefix_fingerprint", "store_error"]

STATE_VERSION = 1


def store_error(exc: OSError, what: str) -> StoreError:
    """An OS error while writing ``what``, as a StoreError that says what to do."""
    hint = "the disk is full; free space" if exc.errno == errno.ENOSPC else "check the path and permissions"
    return StoreError(f"cannot write {what}: {exc}. {hint} and rerun; the previous result is intact.")


def _damaged(where: Any, why: str) -> StoreError:
    return StoreError(f"the workflow state {where} is damaged ({why}); rerun with --full to rebuild "
                      "it from the input (the input and the last result are not touched).")


def check_state(state: dict, input_path: str, key: str, X: Any, seed: int,
                store: StateStore) -> None:
    """Refuse a checkpoint that does not belong to this spec and input.

    A checkpoint of an older format or of a method this version no longer
    has (the former built-in ``rnca``: its spec, method name ``rnca``, is
    refused when loaded, so no spec keys its state) is one of another spec.

    Raises
    ------
    WorkflowError
        Written in an older format, by another spec, or the consumed rows of
        the input changed (rows may only be appended).  The fix is ``--full``.
    """
    state_dir = store.where
    if state.get("version") != STATE_VERSION or state.get("spec_key") != key:
        raise WorkflowError(
            f"the stored state in {state_dir} was written by a different spec (input, method, params, "
            "seed, preprocessing or segment_rows changed); rerun with --full to refit from scratch."
        )
    _check_fields(state, f"{state_dir}/state.json")
    n, d = int(X.shape[0]), int(X.shape[1])
    done = int(state["rows_done"])
    if d != state["n_features"] or str(X.dtype) != state["dtype"] or n < done:
        raise WorkflowError(
            f"input {input_path} changed in place: it now has shape ({n}, {d}) and dtype {X.dtype}, "
            f"but {done} rows of width {state['n_features']} ({state['dtype']}) were already consumed. "
            "Rows may only be appended; rerun with --full to refit on the current data."
        )
    if prefix_fingerprint(X, done, seed) != state["prefix_fingerprint"]:
        raise WorkflowError(
            f"input {input_path} changed in place: the already consumed rows 0..{done} no longer "
            "match their fingerprint. Rows may only be appended; rerun with --full to refit on the "
            "current data."
        )


_FIELDS = {"rows_done": int, "n_features": int, "dtype": str, "prefix_fingerprint": str}


def _check_fields(state: dict, where: Any) -> None:
    for key, kind in _FIELDS.items():
        value = state.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise _damaged(where, f"{key} is {value!r}, expected {kind.__name__}")
    if state["rows_done"] < 0:
        raise _damaged(where, f"rows_done is {state['rows_done']}")


def prefix_fingerprint(X: Any, stop: int, seed: int) -> str:
    """Hash of the consumed rows [0, stop) (see :func:`distsketch.io.fingerprint`)."""
    return fingerprint(X, n_rows=stop, seed=seed)["sample_hash"]


_SUMMARY_PREFIX = "summary-"


class StateStore:
    """``state/`` of a run, committed the way its location allows (module docstring).

    Parameters
    ----------
    loc : Location
        The ``state`` folder or prefix.

    Notes
    -----
    The commit strategy is chosen once, from ``loc.supports_rename``:
    :class:`_FolderSwap` or :class:`_PointerObject`, which answer the same
    methods.  Without rename, a checkpoint writes one model store (the
    summary) under a fresh name and one small object; the summary it
    replaces is deleted afterwards.  A run killed in between leaves an
    unreferenced summary, removed by the next run (:meth:`clean`).
    """

    def __init__(self, loc: Location):
        self.loc = loc
        self.where: Any = loc.user_path()
        self._commit: _FolderSwap | _PointerObject = (
            _FolderSwap(self) if loc.supports_rename else _PointerObject(self))

    def _refuse_links(self) -> None:
        """Refuse a checkpoint folder holding a link (to another run's state, say)."""
        try:
            self.loc.refuse_links("workflow checkpoint")
        except StoreError as exc:
            raise _damaged(self.where, str(exc).rstrip(".")) from exc

    def read(self) -> dict | None:
        """The committed ``state.json`` content, or None without a checkpoint.

        Raises
        ------
        StoreError
            The file is unreadable, not JSON, or not a JSON object; the folder
            holds a symbolic link (the checkpoint would be read from elsewhere).
        """
        self._refuse_links()
        self.loc.fs.invalidate_cache(self.loc.path)
        return read_json_object(self.loc.child("state.json").handle(), _damaged)

    def load(self, method: MethodAdapter) -> None:
        """Load the committed summary into ``method``, refusing a damaged one with the fix.

        The summary is a model store read by :func:`distsketch.io.model.store.load`:
        only registered classes, numeric arrays with every chunk present, nothing
        unpickled; no symbolic link in the checkpoint is followed.
        """
        self._refuse_links()
        summary = self._commit.summary()
        try:
            self._commit.load(summary, method)
        except StoreError as exc:
            raise _damaged(summary.user_path(), str(exc).rstrip(".")) from exc

    def save(self, method: MethodAdapter, meta: dict) -> None:
        """Commit ``meta`` and the method's summary as the new checkpoint."""
        self._commit.save(method, meta)

    def reload(self, method: MethodAdapter) -> None:
        """Load the checkpoint just saved (the in-memory state becomes what a resume loads)."""
        self._commit.reload(method)

    def check_foreign(self, inputs: list) -> None:
        """Refuse a state location distsketch did not write (a run replaces it)."""
        self._commit.check_foreign(inputs)

    def clean(self) -> None:
        """Remove what a killed run left beside the committed checkpoint (under the lock)."""
        self._commit.clean()


class _FolderSwap:
    """Commit by one folder swap: ``state/`` holds ``state.json`` and ``summary/``."""

    def __init__(self, store: StateStore):
        self.store = store
        self.loc = store.loc

    def summary(self) -> Location:
        return self.loc.child("summary")

    def load(self, summary: Location, method: MethodAdapter) -> None:
        method.load(summary.handle())

    def save(self, method: MethodAdapter, meta: dict) -> None:
        try:
            with self.loc.atomic_output(overwrite=True) as tmp:
                folder = tmp.child("summary").handle()
                folder.mkdir()
                method.save(folder)
                tmp.write_bytes("state.json", json.dumps(meta, indent=2).encode())
        except OSError as exc:
            raise store_error(exc, f"the checkpoint {self.store.where}") from exc

    def reload(self, method: MethodAdapter) -> None:
        method.load(self.summary().handle())

    def check_foreign(self, inputs: list) -> None:
        from distsketch.io.storage.safety import check_replaceable

        check_replaceable(self.loc, inputs=inputs)

    def clean(self) -> None:
        """Nothing: the location repairs an interrupted swap itself (``clean_leftovers``)."""


class _PointerObject:
    """Commit by rewriting the one object ``state.json``, which names the summary
    (``summary-<rows>-<random>.zarr``, written under that fresh name first)."""

    def __init__(self, store: StateStore):
        self.store = store
        self.loc = store.loc

    def summary(self) -> Location:
        """The store ``state.json`` names."""
        name = (self.store.read() or {}).get("summary")
        if not isinstance(name, str) or not name.startswith(_SUMMARY_PREFIX) or "/" in name:
            raise _damaged(self.loc.child("state.json").user_path(), f"summary is {name!r}")
        return self.loc.child(name)

    def load(self, summary: Location, method: MethodAdapter) -> None:
        from distsketch.io.model.store import load

        method.state = load(summary)

    def save(self, method: MethodAdapter, meta: dict) -> None:
        """Write the summary locally, upload it under a fresh name, commit ``state.json``.

        The in-memory state is then reloaded from the local copy, whose bytes
        are those uploaded (what a resumed run loads), so :meth:`reload` has
        nothing left to do.
        """
        import tempfile

        from distsketch.io.model.store import load, save_model

        old = None
        with contextlib.suppress(StoreError):
            old = (self.store.read() or {}).get("summary")
        name = f"{_SUMMARY_PREFIX}{int(meta['rows_done']):012d}-{uuid.uuid4().hex[:8]}.zarr"
        with tempfile.TemporaryDirectory(prefix="distsketch-checkpoint-") as scratch:
            local = Path(scratch) / name
            save_model(method.state, local)
            try:
                # a fresh name, unreferenced until state.json names it: no publication step
                self.loc.upload_tree(local, name)
                body = json.dumps(meta | {"summary": name}, indent=2).encode()
                self.loc.write_bytes("state.json", body)  # the commit
            except OSError as exc:
                raise store_error(exc, f"the checkpoint {self.store.where}") from exc
            method.state = load(local)
        if isinstance(old, str) and old.startswith(_SUMMARY_PREFIX) and old != name:
            self.loc.remove(old)

    def reload(self, method: MethodAdapter) -> None:
        """Nothing: :meth:`save` already reloaded the bytes it uploaded."""

    def check_foreign(self, inputs: list) -> None:
        foreign = [n for n in self.loc.list_names() if n != "state.json" and not n.startswith(
            (_SUMMARY_PREFIX, f".{_SUMMARY_PREFIX}"))]
        if foreign:
            raise StoreError(f"{self.store.where} holds {foreign[:5]}, which are not part of a "
                             "distsketch checkpoint; choose another outputs.dir.")

    def clean(self) -> None:
        """Remove the summaries a killed run left beside the committed one."""
        try:
            keep = self.summary().name
        except StoreError:
            keep = None
        for name in self.loc.list_names():
            if name.startswith((_SUMMARY_PREFIX, f".{_SUMMARY_PREFIX}")) and name != keep:
                self.loc.remove(name)
