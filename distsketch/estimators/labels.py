"""Class labels as scikit-learn handles them, shared by every distsketch classifier.

Targets are typed with :func:`sklearn.utils.multiclass.type_of_target` and
encoded against the sorted classes; ``classes_`` keeps the labels' own dtype
(int, bool, float, ``<U``, object from pandas), so ``predict`` returns the
user's labels, never a float cast of them.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from sklearn.exceptions import DataConversionWarning
from sklearn.utils.multiclass import type_of_target

from distsketch.errors import InputError
from distsketch.graph import to_numpy
from distsketch.ops.namespace import asarray, namespace, to_host
from distsketch.validation import is_dask
from distsketch.validation.finite import is_array_api

__all__ = ["accuracy", "decode_labels", "encode_labels", "one_vs_rest", "softmax_scores"]

_CLASS_TARGETS = ("binary", "multiclass")


def _as_label_array(y: Any, owner: str) -> np.ndarray:
    if y is None:
        raise InputError(f"{owner} requires y to be passed, but the target y is None.")
    # pandas (categorical included) and Zarr arrays go through NumPy; dask is computed:
    # labels are one value per row, read once on the driver
    y = to_numpy(y) if is_dask(y) else np.asarray(to_host(y))
    if y.ndim == 2 and y.shape[1] == 1:
        # scikit-learn's wording, which its estimator checks look for
        warnings.warn(f"A column-vector y was passed when a 1d array was expected ({owner}); "
                      "it is raveled to shape (n_samples,).", DataConversionWarning, stacklevel=4)
        y = y.ravel()
    if y.ndim != 1:
        raise InputError(f"{owner}: y must be 1-D class labels, got shape {y.shape}; "
                         "multi-output classification is not supported.")
    return y


def _target_type(y: np.ndarray, owner: str, regressor: str | None) -> str:
    try:
        kind = type_of_target(y, input_name="y")
    except (TypeError, ValueError) as exc:
        raise InputError(f"{owner}: y cannot be read as class labels ({exc}); pass labels of "
                         "one kind (all strings or all numbers) without missing values.") from exc
    if kind.startswith("continuous"):
        use = f"; use {regressor} for regression" if regressor else ""
        raise InputError(f"{owner}: Unknown label type: {kind}. y holds real values, not class "
                         f"labels{use}, or round the labels to whole numbers.")
    if kind not in _CLASS_TARGETS:
        raise InputError(f"{owner}: Unknown label type: {kind}. Pass 1-D class labels "
                         "(binary or multiclass).")
    return kind


def _sorted_classes(values: np.ndarray, owner: str, what: str) -> np.ndarray:
    try:
        return np.unique(values)
    except TypeError as exc:
        raise InputError(f"{owner}: {what} mix labels that cannot be ordered ({exc}); pass "
                         "labels of one kind (all strings or all numbers).") from exc


def encode_labels(y: Any, n_rows: int | None, *, owner: str, classes: Any = None,
                  regressor: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Check class labels ``y`` and encode them as indices into the sorted classes.

    ``y`` is NumPy (any dtype), pandas (categorical too), Zarr or dask; a column vector
    is raveled with a ``DataConversionWarning``.  ``n_rows`` are the rows of X (None:
    checked by the caller), ``owner`` names the estimator in messages, ``classes`` are
    all labels (``partial_fit``'s first call, or the fitted ``classes_``; default: the
    labels of y) and ``regressor`` is named when y is continuous.  Returns the sorted
    ``classes`` in the labels' own dtype and int64 ``codes`` with ``classes[codes] == y``.
    Dask labels are computed once on the driver: O(n_rows) memory, no pass over X.
    """
    y = _as_label_array(y, owner)
    if n_rows is not None and y.shape[0] != n_rows:
        raise InputError(f"{owner}: y has {y.shape[0]} rows but X has {n_rows}; they must be "
                         "aligned row by row.")
    _target_type(y, owner, regressor)
    given = classes is not None
    classes = _sorted_classes(np.asarray(classes if given else y).ravel(), owner,
                              "classes" if given else "the labels of y")
    if classes.size < 2:
        raise InputError(f"{owner}: {'classes holds' if given else 'y has'} only one class "
                         f"{classes.tolist()}; classification needs at least two.")
    try:
        idx = np.searchsorted(classes, y)
        inside = idx < classes.size
        bad = ~inside
        bad[inside] = classes[idx[inside]] != y[inside]
    except TypeError as exc:
        raise InputError(f"{owner}: the labels of y ({y.dtype}) cannot be compared with the "
                         f"classes {classes.tolist()} ({exc}).") from exc
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError(f"{owner}: label {y[row:row + 1].tolist()[0]!r} (row {row}) is not one of classes "
                         f"{classes.tolist()}; pass every label in classes= on the first "
                         "partial_fit call.")
    return classes, idx.astype(np.int64)


def softmax_scores(D: Any) -> Any:
    """Softmax over classes of one-vs-rest scores ``D`` (n_rows, n_classes), NumPy or dask
    (lazily); a 1-D D (two classes: the score of the second) stands for the scores (−d, d)."""
    if not isinstance(D, np.ndarray) and not is_dask(D) and is_array_api(D):
        xp = namespace(D)  # scores of another namespace: the same softmax on their device
        if D.ndim == 1:
            D = xp.stack([-D, D], axis=1)
        E = xp.exp(D - xp.max(D, axis=1, keepdims=True))
        return E / xp.sum(E, axis=1, keepdims=True)
    if D.ndim == 1:
        # a dask D stays lazy: NumPy hands stack and exp to dask (__array_function__, ufuncs)
        D = np.stack([-D, D], axis=1)
    E = np.exp(D - D.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


def one_vs_rest(codes: np.ndarray, n_classes: int) -> np.ndarray:
    """±1 float64 target columns (n_rows, n_classes): +1 in the column of each row's class."""
    Y = -np.ones((codes.shape[0], n_classes))
    Y[np.arange(codes.shape[0]), codes] = 1.0
    return Y


class _TakeClasses:
    """Block function mapping class indices to labels (picklable for distributed)."""

    def __init__(self, classes: np.ndarray):
        self.classes = classes

    def __call__(self, idx: Any) -> Any:
        if isinstance(idx, np.ndarray):
            return self.classes[idx]
        if _numeric(self.classes):  # a block of another namespace: labels on its device
            return namespace(idx).take(asarray(self.classes, like=idx), idx)
        return self.classes[np.asarray(to_host(idx))]


def _numeric(classes: np.ndarray) -> bool:
    return bool(np.issubdtype(classes.dtype, np.number) or np.issubdtype(classes.dtype, np.bool_))


def decode_labels(classes: np.ndarray, idx: Any) -> Any:
    """The labels ``classes[idx]`` in the classes' dtype (dask in -> dask out; numeric
    labels of a dask array of CuPy blocks stay CuPy blocks)."""
    if is_dask(idx):
        meta = None
        if is_array_api(idx._meta) and _numeric(classes):
            meta = asarray(classes[:0], like=idx._meta)
        return idx.map_blocks(_TakeClasses(classes), dtype=classes.dtype, meta=meta)
    return classes[np.asarray(idx)]


def decode_in_namespace(classes: np.ndarray, D: Any) -> Any:
    """Labels of one-vs-rest scores ``D`` of another namespace (CuPy, array-api-strict).

    ``D`` is 1-D or one column (two classes: the sign) or one column per class
    (the argmax).  Numeric classes stay on D's device; other labels (strings,
    objects) exist only on the host and are returned there.
    """
    xp = namespace(D)
    if D.ndim == 1 or D.shape[1] == 1:
        idx = xp.astype(xp.reshape(D, (-1,)) > 0, xp.int64)
    else:
        idx = xp.argmax(D, axis=1)
    if _numeric(classes):
        return xp.take(asarray(classes, like=D), idx)
    return decode_labels(classes, np.asarray(to_host(idx)))


def labels_of_scores(classes: np.ndarray, D: Any) -> Any:
    """Labels of one-vs-rest scores ``D`` (n × 1 for two classes: the sign; else the argmax),
    in D's kind: NumPy, dask (lazily) or another namespace (:func:`decode_in_namespace`)."""
    if is_array_api(D):
        return decode_in_namespace(classes, D)
    idx = (D[:, 0] > 0).astype(np.int64) if classes.size == 2 else D.argmax(axis=1)
    return decode_labels(classes, idx)


def accuracy(y_true: Any, y_pred: Any, sample_weight: Any = None) -> float:
    """Mean accuracy of predicted labels (scikit-learn's ``accuracy_score``)."""
    from sklearn.metrics import accuracy_score

    # labels are read on the host, as fit reads them (one value per row; any label dtype)
    y_true = to_numpy(y_true) if is_dask(y_true) else np.asarray(to_host(y_true))
    if y_true.ndim == 2 and y_true.shape[1] == 1:
        y_true = y_true.ravel()
    return float(accuracy_score(y_true, to_numpy(y_pred), sample_weight=sample_weight))
