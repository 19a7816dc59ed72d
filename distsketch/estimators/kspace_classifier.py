"""Approximate polynomial-kernel principal component classification: one-vs-rest
regression of ±1 targets on the k-Space embedding (Avron, Nguyen, Woodruff 2014)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.exceptions import DataConversionWarning
from sklearn.utils.multiclass import type_of_target

from distsketch.errors import InputError
from distsketch.estimators.base import to_numpy
from distsketch.estimators.kspace import KernelPCR
from distsketch.validation import check_targets, is_dask

__all__ = ["KernelPCRClassifier"]


class KernelPCRClassifier(ClassifierMixin, KernelPCR):
    """Classification by approximate polynomial-kernel PCR (one-vs-rest RLSC).

    Each class is one column of ±1 targets (regularised least-squares
    classification); the regression of :class:`~distsketch.KernelPCR` is
    solved once for all columns from the same summary, and ``predict``
    returns the class of largest score.

    Parameters
    ----------
    See :class:`~distsketch.KernelPCR`.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The sorted labels of y.
    coef_ : ndarray of shape (k, n_classes)
    intercept_ : ndarray of shape (n_classes,)
    kspace_ : KSpaceKernelPCA
    n_features_in_ : int

    Notes
    -----
    Same cost as the regressor with n_classes targets: two passes (k-Space's
    sketch Gram, then the exact k × k summary of the embedded rows).

    References
    ----------
    Avron, Nguyen, Woodruff. Subspace embeddings for the polynomial kernel. NIPS
    2014 (Definition 8, Theorem 9, Table 1).

    Examples
    --------
    >>> import numpy as np
    >>> from distsketch.estimators.kspace_classifier import KernelPCRClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 4)); y = (X[:, 0] * X[:, 1] > 0).astype(int)
    >>> clf = KernelPCRClassifier(n_components=10, degree=2, random_state=0).fit(X, y)
    >>> clf.predict(X[:3]).shape
    (3,)
    """

    def _targets(self, y: Any, n: int) -> np.ndarray:
        y = check_targets(y, n)
        if is_dask(y):
            y = to_numpy(y)
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            warnings.warn(f"{type(self).__name__}: a column-vector y was passed when a 1-D array "
                          "was expected; it is raveled.", DataConversionWarning, stacklevel=3)
        if type_of_target(y.ravel()) == "continuous":
            raise InputError(f"{type(self).__name__}: Unknown label type: continuous. y holds "
                             "real values; use KernelPCR for regression.")
        self.classes_, codes = np.unique(y.ravel(), return_inverse=True)
        if self.classes_.size < 2:
            raise InputError(f"{type(self).__name__}: y has only one class "
                             f"{self.classes_.tolist()}; classification needs at least two.")
        Y = -np.ones((n, self.classes_.size))
        Y[np.arange(n), codes] = 1.0
        return Y

    def fit(self, X: Any, y: Any) -> KernelPCRClassifier:
        """Fit k-Space on X, then least squares of the ±1 class columns on the embedding.

        Parameters
        ----------
        X : ndarray, sparse matrix or dask array of shape (n_samples, n_features)
        y : array_like of shape (n_samples,)
            Class labels.

        Returns
        -------
        self
        """
        return super().fit(X, y)

    def decision_function(self, X: Any) -> Any:
        """Class scores V(X)·coef + intercept, shape (n_samples, n_classes)."""
        return self._decision(X)

    def predict(self, X: Any) -> Any:
        """Class labels of shape (n_samples,) (dask in -> dask out)."""
        idx = self._decision(X).argmax(axis=1)
        classes = self.classes_
        if is_dask(idx):
            return idx.map_blocks(lambda i: classes[i], dtype=classes.dtype)
        return classes[idx]

    def score(self, X: Any, y: Any) -> float:
        """Mean accuracy."""
        from sklearn.metrics import accuracy_score

        return float(accuracy_score(to_numpy(y), to_numpy(self.predict(X))))
