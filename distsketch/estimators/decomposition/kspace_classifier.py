"""Approximate polynomial-kernel principal component classification: one-vs-rest
regression of ±1 targets on the k-Space embedding (Avron, Nguyen, Woodruff 2014)."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import ClassifierMixin

from distsketch.estimators.base import fit_context
from distsketch.estimators.decomposition.kspace import KernelPCR
from distsketch.estimators.labels import (
    accuracy,
    encode_labels,
    labels_of_scores,
    one_vs_rest,
    softmax_scores,
)

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
        The sorted labels of y, in y's own dtype (int, bool, float, str, object).
    coef_ : ndarray of shape (k, 1) for two classes else (k, n_classes)
        One ±1 target column per class; for two classes one column, +1 for
        ``classes_[1]`` (as :class:`sklearn.linear_model.RidgeClassifier`).
    intercept_ : ndarray of shape (1,) or (n_classes,)
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
    >>> from distsketch.estimators.decomposition.kspace_classifier import KernelPCRClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 4)); y = (X[:, 0] * X[:, 1] > 0).astype(int)
    >>> clf = KernelPCRClassifier(n_components=10, degree=2, random_state=0).fit(X, y)
    >>> clf.predict(X[:3]).shape
    (3,)
    """

    def _targets(self, y: Any, n: int) -> np.ndarray:
        # labels as scikit-learn reads them (type_of_target, classes in their own dtype)
        self.classes_, codes = encode_labels(y, n, owner=type(self).__name__,
                                             regressor="KernelPCR")
        Y = one_vs_rest(codes, self.classes_.size)
        # two classes: one column (+1 for classes_[1]), as scikit-learn's RidgeClassifier
        return Y[:, 1:] if self.classes_.size == 2 else Y

    @fit_context
    def fit(self, X: Any, y: Any) -> KernelPCRClassifier:
        """Fit k-Space on X, then least squares of the ±1 class columns on the embedding.

        Parameters
        ----------
        X : ndarray, sparse matrix or dask array of shape (n_samples, n_features)
        y : array_like of shape (n_samples,)
            Class labels of any kind scikit-learn accepts (int, bool, integral
            floats, str, object, pandas categorical); dask/Zarr labels are read
            once.  Real-valued (continuous) targets raise InputError.

        Returns
        -------
        self
        """
        return super().fit(X, y)

    def decision_function(self, X: Any) -> Any:
        """Class scores V(X)·coef + intercept.

        Returns
        -------
        ndarray or dask array of shape (n_samples,) for two classes (the score
        of ``classes_[1]``) else (n_samples, n_classes)
        """
        D = self._decision(X)  # checks that the model is fitted
        if self.classes_.size == 2:
            # a model fitted with one column per class for two classes has D[:, 0] = -D[:, 1]
            return D[:, -1]
        return D

    def predict_proba(self, X: Any) -> Any:
        """Softmax of the one-vs-rest scores, shape (n_samples, n_classes).

        Not calibrated probabilities (least-squares scores are not log-odds);
        see :meth:`SketchedKernelRidgeClassifier.predict_proba
        <distsketch.SketchedKernelRidgeClassifier.predict_proba>`.
        """
        return softmax_scores(self.decision_function(X))

    def predict(self, X: Any) -> Any:
        """Class labels of shape (n_samples,) (dask in -> dask out)."""
        D = self.decision_function(X)
        return labels_of_scores(self.classes_, D[:, None] if D.ndim == 1 else D)

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Mean accuracy of ``predict(X)`` against the labels y."""
        return accuracy(y, self.predict(X), sample_weight)
