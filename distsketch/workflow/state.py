"""Checkpoint state: ``state/state.json`` plus the method's summary, written atomically.

``state.json`` records what the summary depends on (spec key, input width and
dtype, scaler) and how far the run got (``rows_done``, ``in_progress``, a
fingerprint of the consumed rows).

:class:`LocalState` commits ``state/`` by an atomic folder swap (summary in
``state/summary/``); :class:`RemoteState`, for object stores, writes each
summary under a fresh name and commits it by rewriting the one object
``state.json``, which names it (a single-object PUT is atomic).
"""

from __future__ import annotations

import contextlib
import errno
import json
import uuid
from pathlib import Path
from typing import Any

from distsketch.errors import StoreError, WorkflowError
from distsketch.io.fingerprints import fingerprint
from distsketch.io.manifest import read_json_object
from distsketch.workflow.methods import MethodAdapter

__all__ = ["STATE_VERSION", "LocalState", "RemoteState", "StateStore", "check_state",
           "load_checkpoint", "prefix_fingerprint", "read_state", "save_state", "store_error"]

STATE_VERSION = 1
#: the summary file of the former built-in RNCA method, which is no longer read
_OLD_RNCA_SUMMARY = "covariance.npz"


def store_error(exc: OSError, what: str) -> StoreError:
    """An OS error while writing ``what``, as a StoreError that says what to do."""
    hint = "the disk is full; free space" if exc.errno == errno.ENOSPC else "check the path and permissions"
    return StoreError(f"cannot write {what}: {exc}. {hint} and rerun; the previous result is intact.")


def _damaged(where: Any, why: str) -> StoreError:
    return StoreError(f"the workflow state {where} is damaged ({why}); rerun with --full to rebuild "
                      "it from the input (the input and the last result are not touched).")


def read_state(state_dir: Path) -> dict | None:
    """The committed ``state.json``, or None when there is no checkpoint.

    Raises
    ------
    StoreError
        The file is unreadable, not JSON, or not a JSON object; the folder
        holds a symbolic link (the checkpoint would be read from elsewhere).
    """
    _refuse_links(state_dir)
    return read_json_object(state_dir / "state.json", _damaged)


def _refuse_links(state_dir: Path) -> None:
    """Refuse a checkpoint folder holding a link (to another run's state, say)."""
    from distsketch.io.stores import refuse_links

    try:
        refuse_links(state_dir, "workflow checkpoint")
    except StoreError as exc:
        raise _damaged(state_dir, str(exc).rstrip(".")) from exc


def load_checkpoint(method: MethodAdapter, state_dir: Path) -> None:
    """Load the checkpointed summary into ``method``, refusing a damaged one with the fix.

    The summary is a model store read by :func:`distsketch.io.model.load`:
    only registered classes, numeric arrays with every chunk present, nothing
    unpickled; no symbolic link in ``state_dir`` is followed.
    """
    _refuse_links(state_dir)
    try:
        method.load(state_dir / "summary")
    except StoreError as exc:
        raise _damaged(state_dir / "summary", str(exc).rstrip(".")) from exc


def save_state(state_dir: Path, method: MethodAdapter, meta: dict) -> None:
    """Commit ``meta`` and the method's summary as the new checkpoint (one atomic swap)."""
    from distsketch.io.atomic import atomic_dir

    try:
        with atomic_dir(state_dir, overwrite=True) as tmp:
            summary = tmp / "summary"
            summary.mkdir()
            method.save(summary)
            (tmp / "state.json").write_text(json.dumps(meta, indent=2))
    except OSError as exc:
        raise store_error(exc, f"the checkpoint {state_dir}") from exc


def check_state(state: dict, input_path: str, key: str, X: Any, seed: int,
                state_dir: Path | StateStore) -> None:
    """Refuse a checkpoint that does not belong to this spec and input.

    Raises
    ------
    WorkflowError
        Written in an older format, by another spec, or the consumed rows of
        the input changed (rows may only be appended).  The fix is ``--full``.
    """
    store = state_dir if isinstance(state_dir, StateStore) else LocalState(Path(state_dir))
    state_dir = store.where
    if store.has_old_rnca():
        raise WorkflowError(
            f"the stored state in {state_dir} was written by the former built-in 'rnca' method "
            f"({_OLD_RNCA_SUMMARY}), which this version no longer reads; rerun with --full to refit "
            "with StreamingKernelPCA (method: rnca).")
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


class StateStore:
    """Where a run's checkpoint lives; see :class:`LocalState` and :class:`RemoteState`."""

    where: Any

    def read(self) -> dict | None:
        """The committed ``state.json`` content, or None without a checkpoint."""
        raise NotImplementedError

    def load(self, method: MethodAdapter) -> None:
        """Load the committed summary into ``method`` (StoreError when damaged)."""
        raise NotImplementedError

    def save(self, method: MethodAdapter, meta: dict) -> None:
        """Commit ``meta`` and the method's summary as the new checkpoint."""
        raise NotImplementedError

    def reload(self, method: MethodAdapter) -> None:
        """Load the checkpoint just saved (the in-memory state becomes what a resume loads)."""
        self.load(method)

    def has_old_rnca(self) -> bool:
        return False

    def check_foreign(self, inputs: list) -> None:
        """Refuse a state location distsketch did not write."""

    def clean(self) -> None:
        """Remove what a killed run left beside the committed checkpoint (under the lock)."""


class LocalState(StateStore):
    """``state/`` in a local folder: committed by one atomic folder swap."""

    def __init__(self, state_dir: Path):
        self.state_dir = Path(state_dir)
        self.where = self.state_dir

    def read(self) -> dict | None:
        return read_state(self.state_dir)

    def load(self, method: MethodAdapter) -> None:
        load_checkpoint(method, self.state_dir)

    def save(self, method: MethodAdapter, meta: dict) -> None:
        save_state(self.state_dir, method, meta)

    def reload(self, method: MethodAdapter) -> None:
        method.load(self.state_dir / "summary")

    def has_old_rnca(self) -> bool:
        return (self.state_dir / "summary" / _OLD_RNCA_SUMMARY).exists()


_SUMMARY_PREFIX = "summary-"


def upload_tree(fs: Any, local: Path, dest: Any) -> None:
    """Copy every file under the local folder ``local`` to the prefix ``dest`` (a Location)."""
    for f in sorted(p for p in local.rglob("*") if p.is_file()):
        fs.put_file(str(f), dest.child(f.relative_to(local).as_posix()).path)


class RemoteState(StateStore):
    """``state/`` on an object store: ``state.json`` names the committed summary.

    Parameters
    ----------
    loc : Location
        The ``state`` prefix.
    storage_options : dict or None

    Notes
    -----
    A checkpoint writes one model store (the summary, published with its
    manifest last) and one small object; the summary it replaces is deleted
    afterwards.  A run killed in between leaves an unreferenced summary,
    removed by the next run (:meth:`clean`).
    """

    def __init__(self, loc: Any, storage_options: dict | None):
        self.loc = loc
        self.storage_options = storage_options
        self.where = loc.url

    def _pointer(self) -> Any:
        return self.loc.child("state.json")

    def read(self) -> dict | None:
        where = self._pointer()
        where.fs.invalidate_cache(self.loc.path)
        return read_json_object(where, _damaged)

    def _summary_name(self, state: dict | None) -> str:
        name = (state or {}).get("summary")
        if not isinstance(name, str) or not name.startswith(_SUMMARY_PREFIX) or "/" in name:
            raise _damaged(self._pointer().url, f"summary is {name!r}")
        return name

    def load(self, method: MethodAdapter) -> None:
        from distsketch.io.model import load

        name = self._summary_name(self.read())
        try:
            method.state = load(self.loc.child(name).url, storage_options=self.storage_options)
        except StoreError as exc:
            raise _damaged(self.loc.child(name).url, str(exc).rstrip(".")) from exc

    def save(self, method: MethodAdapter, meta: dict) -> None:
        """Write the summary locally, upload it under a fresh name, commit ``state.json``.

        The in-memory state is then reloaded from the local copy, whose bytes
        are those uploaded (what a resumed run loads), so :meth:`reload` has
        nothing left to do.
        """
        import tempfile

        from distsketch.io.model import load, save_model

        old = None
        with contextlib.suppress(StoreError):
            old = (self.read() or {}).get("summary")
        name = f"{_SUMMARY_PREFIX}{int(meta['rows_done']):012d}-{uuid.uuid4().hex[:8]}.zarr"
        fs = self.loc.fs
        with tempfile.TemporaryDirectory(prefix="distsketch-checkpoint-") as scratch:
            local = Path(scratch) / name
            save_model(method.state, local)
            try:
                # a fresh name, unreferenced until state.json names it: no publication step
                upload_tree(fs, local, self.loc.child(name))
                body = json.dumps(meta | {"summary": name}, indent=2).encode()
                fs.pipe_file(self._pointer().path, body)  # the commit
            except OSError as exc:
                raise store_error(exc, f"the checkpoint {self.where}") from exc
            method.state = load(local)
        if isinstance(old, str) and old.startswith(_SUMMARY_PREFIX) and old != name:
            with contextlib.suppress(Exception):
                fs.rm(self.loc.child(old).path, recursive=True)

    def reload(self, method: MethodAdapter) -> None:
        """Nothing: :meth:`save` reloaded the state from the bytes it uploaded."""

    def check_foreign(self, inputs: list) -> None:
        fs = self.loc.fs
        fs.invalidate_cache(self.loc.path)
        try:
            entries = fs.ls(self.loc.path, detail=False)
        except FileNotFoundError:
            entries = []
        names = {e.rstrip("/").rsplit("/", 1)[-1] for e in entries}
        foreign = sorted(n for n in names if n != "state.json" and not n.startswith(
            (_SUMMARY_PREFIX, f".{_SUMMARY_PREFIX}")))
        if foreign:
            raise StoreError(f"outputs.dir holds {self.where}, which distsketch did not write "
                             f"(it holds {foreign[:5]}); a run replaces it, so it will not run "
                             "there. Choose another outputs.dir; nothing was changed.")

    def clean(self) -> None:
        fs = self.loc.fs
        try:
            keep = self._summary_name(self.read())
        except StoreError:
            keep = None
        fs.invalidate_cache(self.loc.path)
        with contextlib.suppress(FileNotFoundError):
            for p in fs.ls(self.loc.path, detail=False):
                name = p.rstrip("/").rsplit("/", 1)[-1]
                if name.startswith((_SUMMARY_PREFIX, f".{_SUMMARY_PREFIX}")) and name != keep:
                    with contextlib.suppress(Exception):
                        fs.rm(p, recursive=True)
