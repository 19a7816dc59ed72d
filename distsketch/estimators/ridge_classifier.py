"""Kernel ridge classification on sketched features (one-vs-rest, ±1 targets)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.exceptions import DataConversionWarning
from sklearn.utils.multiclass import type_of_target

from distsketch.errors import ConfigError, InputError
from distsketch.estimators.base import to_numpy
from distsketch.estimators.ridge import SketchedKernelRidge
from distsketch.validation import is_dask

__all__ = ["SketchedKernelRidgeClassifier"]


class SketchedKernelRidgeClassifier(ClassifierMixin, SketchedKernelRidge):
    """One-vs-rest classification with sketched kernel ridge regression.

    Classes are encoded as ±1 targets (one column per class; one column for
    two classes), exactly as scikit-learn's ``RidgeClassifier`` does, and the
    regression is solved once for all columns from the same summary.

    Parameters
    ----------
    See :class:`SketchedKernelRidge` (``alpha`` must be a scalar, or use ``cv``).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (m,) for two classes else (n_classes, m)
    Other attributes as :class:`SketchedKernelRidge`.

    Notes
    -----
    Same cost as the regressor with t = n_classes targets (t = 1 for two
    classes).  ``predict`` returns labels; ``decision_function`` the scores.

    References
    ----------
    Song, Woodruff, Yu, Zhang. ICML 2021, Appendix E.
    """

    def _encode(self, y: Any, classes: Any = None) -> np.ndarray:
        if y is None:
            raise InputError(f"{type(self).__name__} requires y to be passed, but the target y is None.")
        y = to_numpy(y)
        if y.ndim == 2 and y.shape[1] == 1:
            warnings.warn(f"{type(self).__name__}: a column-vector y was passed when a 1-D array "
                          "was expected; it is raveled.", DataConversionWarning, stacklevel=3)
            y = y.ravel()
        if y.ndim != 1:
            raise InputError(f"{type(self).__name__}: y must be 1-D labels, got shape {y.shape}.")
        if type_of_target(y) == "continuous":
            raise InputError(f"{type(self).__name__}: Unknown label type: continuous. y holds "
                             "real values; use SketchedKernelRidge for regression.")
        if classes is None:
            classes = np.unique(y)
        classes = np.asarray(classes)
        if classes.size < 2:
            raise InputError(f"{type(self).__name__}: y has only one class {classes.tolist()}; "
                             "classification needs at least two.")
        idx = np.searchsorted(classes, y)
        bad = (idx >= classes.size) | (classes[np.minimum(idx, classes.size - 1)] != y)
        if bad.any():
            raise InputError(f"{type(self).__name__}: label {y[bad][0]!r} (row "
                             f"{int(np.flatnonzero(bad)[0])}) is not one of classes "
                             f"{classes.tolist()}.")
        Y = -np.ones((y.shape[0], classes.size))
        Y[np.arange(y.shape[0]), idx] = 1.0
        self.classes_ = classes
        return Y[:, 1:] if classes.size == 2 else Y

    def fit(self, X: Any, y: Any) -> SketchedKernelRidgeClassifier:
        """Fit on labels y of shape (n_samples,)."""
        if np.ndim(self.alpha) > 0 and self.cv is None:
            raise ConfigError(f"{type(self).__name__}: alpha must be a scalar (or set cv to "
                              "choose among alphas).")
        Y = self._encode(y)
        super().fit(X, Y)
        return self

    def _prepare_targets(self, y: Any, n_rows: int) -> tuple[Any, bool]:
        # the ±1 matrix has one column for two classes: reported as one output
        Y, _ = super()._prepare_targets(y, n_rows)
        return Y, self.classes_.size == 2

    def partial_fit(self, X: Any, y: Any, classes: Any = None) -> SketchedKernelRidgeClassifier:
        """Merge new labelled rows; ``classes`` is required on the first call."""
        first = not hasattr(self, "coef_")
        if first and classes is None:
            raise ConfigError(f"{type(self).__name__}.partial_fit: pass classes=... (all labels) "
                              "on the first call.")
        Y = self._encode(y, classes if first else self.classes_)
        return super().partial_fit(X, Y)

    def decision_function(self, X: Any) -> Any:
        """Scores of shape (n_samples,) for two classes else (n_samples, n_classes)."""
        self._check_is_fitted("coef_")
        return self._shape_output(self._decision(X))

    def predict(self, X: Any) -> Any:
        """Class labels of shape (n_samples,) (dask in -> dask out)."""
        self._check_is_fitted("coef_")
        D = self._decision(X)
        classes = self.classes_
        if classes.size == 2:
            idx = (D[:, 0] > 0).astype(np.int64)
        else:
            idx = D.argmax(axis=1)
        if is_dask(idx):
            return idx.map_blocks(lambda i: classes[i], dtype=classes.dtype)
        return classes[idx]

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Mean accuracy."""
        if sample_weight is not None:
            raise ConfigError(f"{type(self).__name__}.score does not support sample_weight.")
        return float(np.mean(to_numpy(self.predict(X)) == to_numpy(y)))


# --------------------------------------------------------------------------- Theorem E.2 sketch
