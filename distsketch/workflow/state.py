"""Checkpoint state: ``state/state.json`` (what the summary depends on and how far the run
got) plus the method's summary, committed atomically by the storage's checkpoint."""

from __future__ import annotations

import errno
from typing import Any

from distsketch.errors import StoreError, WorkflowError
from distsketch.io.arrays.fingerprints import fingerprint
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
    """Refuse a checkpoint of an older format, of another spec, or of consumed rows that
    changed (rows may only be appended)."""
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


class StateStore:
    """``state/`` of a run (``loc``): the location's checkpoint
    (:meth:`~distsketch.io.storage.location.Location.checkpoint`) holding the method's
    summary as its store, with errors that say to rerun with ``--full``."""

    def __init__(self, loc: Location):
        self.loc = loc
        self.where: Any = loc.user_path()
        self.commit = loc.checkpoint(_damaged)

    def read(self) -> dict | None:
        """The committed ``state.json`` content, or None without a checkpoint."""
        return self.commit.read()

    def load(self, method: MethodAdapter) -> None:
        """Load the committed summary (a model store) into ``method``, refusing a damaged one."""
        self.commit.load(method.load)

    def save(self, method: MethodAdapter, meta: dict) -> None:
        """Commit ``meta`` and the method's summary as the new checkpoint; the method then
        holds the state as committed (what a resumed run loads)."""
        try:
            self.commit.save(meta, method.save, method.load)
        except OSError as exc:
            raise store_error(exc, f"the checkpoint {self.where}") from exc

    def check_foreign(self, inputs: list) -> None:
        """Refuse a state location distsketch did not write (a run replaces it)."""
        self.commit.check_foreign(inputs)

    def clean(self) -> None:
        """Remove what a killed run left beside the committed checkpoint (under the lock)."""
        self.commit.clean()
