"""Falkon classification: one-vs-rest ±1 targets solved together, one pass per CG iteration."""

from __future__ import annotations

from typing import Any

from sklearn.base import ClassifierMixin

from distsketch.errors import ConfigError
from distsketch.estimators import labels
from distsketch.estimators.base import fit_context
from distsketch.estimators.solvers.falkon import NystromKernelRidge

__all__ = ["NystromKernelRidgeClassifier"]


class NystromKernelRidgeClassifier(ClassifierMixin, NystromKernelRidge):
    """Nyström kernel ridge classification by Falkon's preconditioned CG, out of core.

    Classes are encoded as ±1 targets (one column per class; one column for
    two classes, +1 for ``classes_[1]``), all solved in the same passes over
    X; the predicted class has the largest score.  Parameters as
    :class:`~distsketch.estimators.solvers.falkon.NystromKernelRidge`.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Sorted labels, in their own dtype.
    coef_ : ndarray of shape (M, 1) for two classes, else (M, n_classes)
    centers_, n_iter_, residuals_, converged_, kernel_params_, factor_dtype_, memory_plan_
        As :class:`~distsketch.estimators.solvers.falkon.NystromKernelRidge`.

    Notes
    -----
    Labels are read on the driver (O(n)); the targets travel with X's blocks
    in the first pass only.  Cost and memory as the regressor with t =
    n_classes (1 for two classes).

    References
    ----------
    Rudi, Carratino, Rosasco. FALKON: an optimal large scale kernel method. NeurIPS 2017.
    Rifkin, Klautau. In defense of one-vs-all classification. JMLR 2004.

    Examples
    --------
    >>> import numpy as np
    >>> from distsketch import NystromKernelRidgeClassifier
    >>> X = np.random.default_rng(0).normal(size=(300, 2)); y = X[:, 0] > 0
    >>> clf = NystromKernelRidgeClassifier(n_centers=50, alpha=1e-4, random_state=0).fit(X, y)
    >>> clf.score(X, y) > 0.9
    True
    """

    @fit_context
    def fit(self, X: Any, y: Any) -> NystromKernelRidgeClassifier:
        """Fit on class labels y of shape (n_samples,); returns the fitted classifier."""
        X = self._start(X)
        self.classes_, codes = labels.encode_labels(y, X.shape[0], owner=type(self).__name__,
                                                    regressor="NystromKernelRidge")
        Y = labels.one_vs_rest(codes, self.classes_.size)
        if self.classes_.size == 2:
            Y = Y[:, 1:]
        self._init_seed()
        self._fit_targets(X, Y)
        self.coef_ = self._coef
        self.n_samples_seen_ = int(X.shape[0])
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = False  # labels are 1-D (one-vs-rest inside)
        return tags

    def decision_function(self, X: Any) -> Any:
        """Scores of shape (n_samples,) for two classes else (n_samples, n_classes)."""
        self._check_is_fitted("coef_")
        D = self._decision(X, self.coef_)
        return D[:, 0] if self.classes_.size == 2 else D

    def predict_proba(self, X: Any) -> Any:
        """Softmax of the one-vs-rest scores (uncalibrated), shape (n_samples, n_classes)."""
        return labels.softmax_scores(self.decision_function(X))

    def predict(self, X: Any) -> Any:
        """Class labels of shape (n_samples,) (dask in -> dask out)."""
        self._check_is_fitted("coef_")
        return labels.labels_of_scores(self.classes_, self._decision(X, self.coef_))

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Mean accuracy of ``predict(X)`` against the labels y."""
        if y is None:
            raise ConfigError(f"{type(self).__name__}.score needs the labels y.")
        return labels.accuracy(y, self.predict(X), sample_weight)
