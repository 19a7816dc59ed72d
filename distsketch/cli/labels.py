"""The labels a store holds beside its rows (``STORE::y``, written by ``ingest``), as the
commands find, describe and read them, and the supervised methods their hints suggest."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from distsketch.cli.common import loadable_estimators
from distsketch.errors import DistsketchError
from distsketch.io.arrays.targets import store_labels, whole_numbers

__all__ = ["CLASSIFIER", "REGRESSOR", "integer_class_targets", "method_hint", "store_labels",
           "suggested_methods", "supervised_methods", "target_kind"]

#: the supervised methods a hint suggests, for class labels and for numeric targets
CLASSIFIER = "SketchedKernelRidgeClassifier"
REGRESSOR = "SketchedKernelRidge"

# leading target rows read to tell class numbers from quantities (one read, ≤ 512 KiB)
_KIND_ROWS = 65536
# whole numbers with at most this many distinct values may be class numbers (1..7)
_MAX_NUMBERED_CLASSES = 100


def target_kind(spec: str, storage_options: dict | None = None) -> str | None:
    """What the targets at ``spec`` look like: ``"classes"`` (names or text), ``"integers"``
    (whole numbers, possibly class numbers), ``"numbers"``, or None when unreadable.

    Reads the array's metadata and at most its first 65 536 rows.
    """
    from distsketch.io.arrays.access import open_zarr
    from distsketch.io.arrays.class_codes import class_names
    from distsketch.io.storage.safety import split_array_path

    try:
        path, component = split_array_path(str(spec))
        arr = open_zarr(path, component, storage_options=storage_options)
        if class_names(arr, str(spec)) is not None or arr.dtype.kind in "USOT":
            return "classes"
        if arr.ndim == 2 and arr.shape[1] != 1:
            return "numbers"
        if arr.dtype.kind in "biu":
            return "integers"
        head = np.asarray(arr[: min(int(arr.shape[0]), _KIND_ROWS)], dtype=np.float64)
    except (DistsketchError, TypeError, ValueError):
        return None
    whole = head.size > 0 and bool(np.all(np.isfinite(head) & (head == np.round(head))))
    if whole and np.unique(head).size <= _MAX_NUMBERED_CLASSES:
        return "integers"
    return "numbers"


def suggested_methods(kind: str | None) -> list[tuple[str, str]]:
    """``(method, when)`` pairs of the supervised methods that suit targets of ``kind``, the
    likelier first."""
    classes = (CLASSIFIER, "for class labels")
    numbers = (REGRESSOR, "for numeric targets (a regression)")
    if kind == "classes":
        return [classes]
    if kind == "numbers":
        return [numbers]
    if kind == "integers":
        return [(CLASSIFIER, "if the whole numbers are class labels"),
                (REGRESSOR, "if they are quantities")]
    return [numbers, classes]


def method_hint(kind: str | None) -> str:
    """:func:`suggested_methods` in words: ``--method NAME for ...[, --method NAME ...]``."""
    return ", ".join(f"--method {name} {when}" for name, when in suggested_methods(kind))


def supervised_methods() -> tuple[list[str], list[str]]:
    """Registry names of the estimators whose ``fit`` needs targets: (classifiers, regressors)."""
    from distsketch.workflow.spec_targets import is_classifier_class, needs_targets

    classifiers: list[str] = []
    regressors: list[str] = []
    for name, cls in loadable_estimators():
        if inspect.isclass(cls) and needs_targets(cls):
            (classifiers if is_classifier_class(cls) else regressors).append(name)
    return sorted(classifiers), sorted(regressors)


def integer_class_targets(y: Any) -> Any:
    """Float class labels (dask, shape (n,) or (n, 1)) that are all whole numbers, as int64,
    so that a classifier predicts ``7``, not ``7.0``; anything else unchanged (one pass)."""
    from distsketch.graph import compute

    if np.dtype(y.dtype).kind != "f":
        return y
    whole = whole_numbers(y).all()
    if not bool(compute(whole, progress=False)[0]):
        return y
    return y.astype(np.int64)
