"""Kernel ridge classification on sketched features (one-vs-rest, ±1 targets)."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import ClassifierMixin

from distsketch.errors import ConfigError
from distsketch.estimators.labels import accuracy, decode_labels, encode_labels, one_vs_rest
from distsketch.estimators.ridge import SketchedKernelRidge

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

    def _encode(self, y: Any, n_rows: int | None, classes: Any = None) -> np.ndarray:
        # labels as scikit-learn reads them (type_of_target, classes in their own dtype);
        # their alignment with X is checked with the ±1 matrix by the regressor
        classes, codes = encode_labels(y, n_rows, owner=type(self).__name__, classes=classes,
                                       regressor="SketchedKernelRidge")
        self.classes_ = classes
        Y = one_vs_rest(codes, classes.size)
        return Y[:, 1:] if classes.size == 2 else Y

    def fit(self, X: Any, y: Any) -> SketchedKernelRidgeClassifier:
        """Fit on labels y of shape (n_samples,)."""
        if np.ndim(self.alpha) > 0 and self.cv is None:
            raise ConfigError(f"{type(self).__name__}: alpha must be a scalar (or set cv to "
                              "choose among alphas).")
        Y = self._encode(y, None)
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
        Y = self._encode(y, None, classes if first else self.classes_)
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
        return decode_labels(classes, idx)

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Mean accuracy of ``predict(X)`` against the labels y."""
        return accuracy(y, self.predict(X), sample_weight)


# --------------------------------------------------------------------------- Theorem E.2 sketch
