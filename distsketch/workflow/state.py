"""Checkpoint state: ``state/state.json`` plus the method's summary, written atomically.

``state.json`` records what the summary depends on (spec key, input width and
dtype, scaler) and how far the run got (``rows_done``, ``in_progress``, a
fingerprint of the consumed rows).
"""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

from distsketch.errors import StoreError, WorkflowError
from distsketch.io.fingerprints import fingerprint
from distsketch.io.manifest import read_json_object
from distsketch.workflow.methods import MethodAdapter

__all__ = ["STATE_VERSION", "check_state", "load_checkpoint", "prefix_fingerprint", "read_state",
           "save_state", "store_error"]

STATE_VERSION = 1
#: the summary file of the former built-in RNCA method, which is no longer read
_OLD_RNCA_SUMMARY = "covariance.npz"


def store_error(exc: OSError, what: str) -> StoreError:
    """An OS error while writing ``what``, as a StoreError that says what to do."""
    hint = "the disk is full; free space" if exc.errno == errno.ENOSPC else "check the path and permissions"
    return StoreError(f"cannot write {what}: {exc}. {hint} and rerun; the previous result is intact.")


def _damaged(where: Path, why: str) -> StoreError:
    return StoreError(f"the workflow state {where} is damaged ({why}); rerun with --full to rebuild "
                      "it from the input (the input and the last result are not touched).")


def read_state(state_dir: Path) -> dict | None:
    """The committed ``state.json``, or None when there is no checkpoint.

    Raises
    ------
    StoreError
        The file is unreadable, not JSON, or not a JSON object.
    """
    return read_json_object(state_dir / "state.json", _damaged)


def load_checkpoint(method: MethodAdapter, state_dir: Path) -> None:
    """Load the checkpointed summary into ``method``, refusing a damaged one with the fix.

    The summary is a model store read by :func:`distsketch.io.model.load`:
    only registered classes, numeric arrays with every chunk present, nothing
    unpickled.
    """
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


def check_state(state: dict, input_path: str, key: str, X: Any, seed: int, state_dir: Path) -> None:
    """Refuse a checkpoint that does not belong to this spec and input.

    Raises
    ------
    WorkflowError
        Written in an older format, by another spec, or the consumed rows of
        the input changed (rows may only be appended).  The fix is ``--full``.
    """
    if (state_dir / "summary" / _OLD_RNCA_SUMMARY).exists():
        raise WorkflowError(
            f"the stored state in {state_dir} was written by the former built-in 'rnca' method "
            f"({_OLD_RNCA_SUMMARY}), which this version no longer reads; rerun with --full to refit "
            "with StreamingKernelPCA (method: rnca).")
    if state.get("version") != STATE_VERSION or state.get("spec_key") != key:
        raise WorkflowError(
            f"the stored state in {state_dir} was written by a different spec (input, method, params, "
            "seed, preprocessing or segment_rows changed); rerun with --full to refit from scratch."
        )
    _check_fields(state, state_dir / "state.json")
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


def _check_fields(state: dict, where: Path) -> None:
    for key, kind in _FIELDS.items():
        value = state.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise _damaged(where, f"{key} is {value!r}, expected {kind.__name__}")
    if state["rows_done"] < 0:
        raise _damaged(where, f"rows_done is {state['rows_done']}")


def prefix_fingerprint(X: Any, stop: int, seed: int) -> str:
    """Hash of the consumed rows [0, stop) (see :func:`distsketch.io.fingerprint`)."""
    return fingerprint(X, n_rows=stop, seed=seed)["sample_hash"]
