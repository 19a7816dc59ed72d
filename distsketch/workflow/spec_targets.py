"""A workflow's targets as ``distsketch fit`` finds and reads them.

A spec without ``targets:`` whose method needs them (a classifier or
regressor: its ``fit`` takes ``y``) and whose input is a store ingested with
labels (``distsketch ingest --label-column``) uses the store's ``y``, as the
CLI's ``fit`` does.  A classifier's labels that are whole numbers stored as
floats (a CSV's class numbers 1..7, read as float64) are read as int64, so
its classes and predictions are the integers of the table, not ``7.0``.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

__all__ = ["IntegerLabels", "is_classifier_class", "needs_targets", "store_targets",
           "whole_number_labels"]

# float64 holds every integer up to 2**53 exactly: beyond it a value is no class number
_EXACT_INTEGERS = 2.0**53


def needs_targets(cls: type) -> bool:
    """Whether the estimator ``cls`` is supervised: its ``fit`` has a ``y`` without default."""
    fit = getattr(cls, "fit", None)
    if not callable(fit):
        return False
    y = inspect.signature(fit).parameters.get("y")
    return y is not None and y.default is inspect.Parameter.empty


def store_targets(input_path: str, cls: type, storage_options: dict | None = None) -> str | None:
    """``"STORE::y"`` when a supervised ``cls`` is given an input store holding labels, else None.

    The rule of the CLI (:func:`distsketch.io.arrays.targets.store_labels`): only a
    store whose ingest manifest lists both ``X`` and ``y`` counts; labels are
    never guessed from an array's name.
    """
    if not needs_targets(cls):
        return None
    from distsketch.io.arrays.targets import store_labels

    return store_labels(input_path, storage_options)


def whole_number_labels(values: np.ndarray) -> np.ndarray:
    """Float labels that are all whole numbers (finite, below 2**53), as int64; else unchanged."""
    values = np.asarray(values)
    if values.dtype.kind != "f" or values.size == 0:
        return values
    with np.errstate(invalid="ignore"):
        whole = np.isfinite(values) & (values == np.round(values)) & \
            (np.abs(values) < _EXACT_INTEGERS)
    return values.astype(np.int64) if bool(whole.all()) else values


def is_classifier_class(cls: type) -> bool:
    """Whether ``cls`` predicts class labels (scikit-learn's ``ClassifierMixin``)."""
    from sklearn.base import ClassifierMixin

    return inspect.isclass(cls) and issubclass(cls, ClassifierMixin)


class IntegerLabels:
    """A classifier's targets (:class:`~distsketch.io.arrays.targets.Targets`) whose whole-number
    float labels are read as int64 (every other attribute is the wrapped object's)."""

    def __init__(self, targets: Any):
        self.targets = targets

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Rows ``[start, stop)`` of the labels, whole numbers as int64."""
        return whole_number_labels(self.targets.rows(start, stop))

    def distinct(self, stop: int, block_rows: int = 65536) -> np.ndarray:
        """The distinct labels of rows ``[0, stop)``, whole numbers as int64."""
        return whole_number_labels(self.targets.distinct(stop, block_rows))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.targets, name)
