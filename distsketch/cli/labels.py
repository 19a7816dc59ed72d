"""The labels a store holds beside its rows, as the commands find, describe and read them.

``distsketch ingest --label-column`` (or ``--labels``) stores a table's
targets as the array ``y`` of the same group as its rows ``X``.  ``fit``
then takes them when a supervised method is given no ``--y``, names the
supervised methods when an unsupervised one is fitted on a labelled store,
and the hints of ``fit``, ``predict`` and ``score`` suggest a classifier for
class labels and a regressor for numeric targets.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from distsketch.errors import DistsketchError
from distsketch.io.arrays.targets import store_labels

__all__ = ["CLASSIFIER", "REGRESSOR", "integer_class_targets", "method_hint", "store_labels",
           "suggested_methods", "supervised_methods", "target_kind"]

#: the supervised methods a hint suggests, for class labels and for numeric targets
CLASSIFIER = "SketchedKernelRidgeClassifier"
REGRESSOR = "SketchedKernelRidge"

# leading target rows read to tell class numbers from quantities (one read, ≤ 512 KiB)
_KIND_ROWS = 65536
# whole numbers with at most this many distinct values may be class numbers (1..7)
_MAX_NUMBERED_CLASSES = 100
# float64 holds every integer up to 2**53 exactly: beyond it a value is no class number
_EXACT_INTEGERS = 2.0**53


def target_kind(spec: str, storage_options: dict | None = None) -> str | None:
    """What the targets at ``spec`` look like: ``"classes"``, ``"integers"`` or ``"numbers"``.

    ``"classes"``: class names (a store's ``classes`` attribute) or text;
    ``"integers"``: whole numbers, or at most 100 distinct whole values among
    the first 65 536 rows (class numbers such as 1..7, or counts);
    ``"numbers"``: anything else, and several target columns.  None when the
    array cannot be read (its own error comes where it is used).

    Notes
    -----
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
    """``(method, when)`` pairs of the supervised methods that suit targets of ``kind``.

    Class labels suggest the classifier, numbers the regressor; whole numbers
    (:func:`target_kind`'s ``"integers"``) and unknown targets both, the
    likelier first.
    """
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
    from sklearn.base import ClassifierMixin

    from distsketch import registry
    from distsketch.errors import ConfigError

    classifiers: list[str] = []
    regressors: list[str] = []
    for name in registry.ESTIMATORS:
        try:
            cls = registry.resolve(name)
        except ConfigError:  # a module this installation lacks
            continue
        fit = getattr(cls, "fit", None) if inspect.isclass(cls) else None
        y = inspect.signature(fit).parameters.get("y") if callable(fit) else None
        if y is None or y.default is not inspect.Parameter.empty:
            continue
        (classifiers if issubclass(cls, ClassifierMixin) else regressors).append(name)
    return sorted(classifiers), sorted(regressors)


def integer_class_targets(y: Any) -> Any:
    """Float class labels that are all whole numbers, as int64 (one pass over ``y``).

    A label column of numbers is stored as float64 (``1, 2, ... 7`` read as
    ``1.0 ... 7.0``); a classifier fitted on those would predict ``7.0``.
    Converted, its classes and predictions are the integers of the table.
    Anything else (text, integers, a fractional or non-finite value, a
    magnitude beyond 2**53) is returned unchanged.

    Parameters
    ----------
    y : dask array of shape (n,) or (n, 1)
    """
    from distsketch.graph import compute

    if np.dtype(y.dtype).kind != "f":
        return y
    # NumPy's ufuncs and the array's own methods stay lazy on a dask array
    whole = (np.isfinite(y) & (y == y.round()) & (abs(y) < _EXACT_INTEGERS)).all()
    if not bool(compute(whole, progress=False)[0]):
        return y
    return y.astype(np.int64)
