"""A workflow's targets as ``distsketch fit`` finds and reads them: the labels stored with the
input for a supervised method given none, whole-number float class labels as int64."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from distsketch.io.arrays.targets import store_labels, whole_numbers

__all__ = ["IntegerLabels", "is_classifier_class", "needs_targets", "store_targets",
           "whole_number_labels"]


def needs_targets(cls: type) -> bool:
    """Whether the estimator ``cls`` is supervised: its ``fit`` has a ``y`` without default."""
    fit = getattr(cls, "fit", None)
    if not callable(fit):
        return False
    y = inspect.signature(fit).parameters.get("y")
    return y is not None and y.default is inspect.Parameter.empty


def store_targets(input_path: str, cls: type, storage_options: dict | None = None) -> str | None:
    """``"STORE::y"`` when a supervised ``cls`` is given an input store holding labels (the CLI's
    rule, :func:`distsketch.io.arrays.targets.store_labels`), else None."""
    if not needs_targets(cls):
        return None
    return store_labels(input_path, storage_options)


def whole_number_labels(values: np.ndarray) -> np.ndarray:
    """Float labels that are all whole numbers (finite, below 2**53), as int64; else unchanged."""
    values = np.asarray(values)
    if values.dtype.kind != "f" or values.size == 0:
        return values
    return values.astype(np.int64) if bool(whole_numbers(values).all()) else values


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
