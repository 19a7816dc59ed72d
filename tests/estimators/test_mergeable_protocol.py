"""The mergeable-estimator protocol over every public estimator that implements it.

The estimators are found in ``distsketch.__all__`` by the protocol itself
(:func:`~distsketch.estimators.base.is_mergeable`), so a new one is covered
without an edit here; ``CASES`` only gives small parameters (and the
guarantee of an inexact merge) to the ones it names.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from sklearn.base import is_classifier, is_regressor

import distsketch as ds
from distsketch.estimators.base import MergeableEstimator, is_mergeable
from distsketch.testing import MergeableEstimatorTests


def _public_classes() -> list[type]:
    out = []
    for name in ds.__all__:
        try:
            value = getattr(ds, name)
        except ImportError:  # an optional dependency is missing
            continue
        if isinstance(value, type) and hasattr(value, "fit"):
            out.append(value)
    return out


MERGEABLE = [c for c in _public_classes() if is_mergeable(c)]
#: estimators with a partial_fit that is not (yet) a fold of summaries, with the reason
NOT_MERGEABLE: dict[str, str] = {}


def _fd_guarantee(rows, sketch, sketch_size):
    A = np.asarray(rows, dtype=np.float64)
    err = np.linalg.norm(A.T @ A - sketch.T @ sketch, 2)
    assert err <= np.linalg.norm(A, "fro") ** 2 / sketch_size * (1 + 1e-9)
    # the sketch never overstates a direction: AᵀA − BᵀB is positive semidefinite
    assert np.linalg.eigvalsh(A.T @ A - sketch.T @ sketch).min() >= -1e-8 * np.linalg.norm(A) ** 2


def _skpca_guarantee(est, X):
    _fd_guarantee(est.features_.transform(X), est.sketch_, est.sketch_size)


def _frequent_directions_guarantee(est, X):
    _fd_guarantee(X, est.sketch_, est.sketch_size)


def _rff(n):
    return ds.RandomFourierFeatures(gamma=0.5, n_components=n, random_state=0)


#: class name -> [(parameters, guarantee of an inexact merge or None)]
CASES = {
    "FrequentDirections": [({"sketch_size": 6}, _frequent_directions_guarantee)],
    "StreamingKernelPCA": [
        ({"n_components": 3, "n_random_features": 40, "sketch_size": 10, "gamma": 0.3,
          "random_state": 0}, _skpca_guarantee),
        ({"method": "rnca", "n_components": 3, "n_random_features": 40, "gamma": 0.3,
          "random_state": 0}, None),
    ],
    "NystromFeatures": [({"n_landmarks": 20, "gamma": 0.3, "random_state": 0}, None)],
    "NystromKernelPCA": [({"n_components": 3, "n_landmarks": 30, "gamma": 0.3, "center": True,
                           "random_state": 0}, None)],
    "SketchedKernelRidge": [({"features": _rff(30), "alpha": 0.1, "random_state": 0}, None)],
    "SketchedKernelRidgeClassifier": [
        ({"features": _rff(30), "alpha": 0.1, "class_weight": {1: 2.0}, "random_state": 0},
         None)],
}

PARAMS = [pytest.param((cls, params, guarantee), id=f"{cls.__name__}-{i}")
          for cls in MERGEABLE
          for i, (params, guarantee) in enumerate(CASES.get(cls.__name__, [({}, None)]))]


class TestMergeableProtocol(MergeableEstimatorTests):
    """Every public estimator implementing the protocol, with each of its cases."""

    @pytest.fixture(autouse=True, params=PARAMS)
    def _case(self, request):
        self.cls, self.params, self.guarantee = request.param
        self.exact = self.guarantee is None
        probe = self.cls(**self.params)
        self.supervised = is_classifier(probe) or is_regressor(probe)
        self.classifier = is_classifier(probe)
        takes = "classes" in inspect.signature(self.cls.partial_fit).parameters
        self.first_call = {"classes": [0, 1, 2]} if takes else {}

    def make_estimator(self):
        return self.cls(**self.params)

    def make_data(self, rng):
        X = rng.normal(size=(320, 4))
        if not self.supervised:
            return X, None
        if self.classifier:
            return X, (X[:, 0] > 0).astype(np.int64) + (X[:, 1] > 0.5)
        return X, np.sin(X[:, 0]) + 0.1 * rng.normal(size=X.shape[0])

    def check_guarantee(self, est, X):
        self.guarantee(est, X)


def test_the_protocol_is_found_on_the_estimators_that_fold_rows():
    names = {c.__name__ for c in MERGEABLE}
    assert {"FrequentDirections", "NystromFeatures", "NystromKernelPCA", "StreamingKernelPCA",
            "SketchedKernelRidge", "SketchedKernelRidgeClassifier"} <= names
    # every public estimator with a partial_fit implements the protocol or says why not
    for cls in _public_classes():
        if hasattr(cls, "partial_fit") and not is_mergeable(cls):
            assert cls.__name__ in NOT_MERGEABLE, cls.__name__
    # the declaration is inheriting MergeableEstimator, read from a class or an instance
    assert all(issubclass(c, MergeableEstimator) for c in MERGEABLE)
    assert is_mergeable(ds.FrequentDirections()) and not is_mergeable(ds.RandomFourierFeatures)


def test_fold_and_summarize_refuse_an_unfitted_estimator():
    est = ds.FrequentDirections(sketch_size=4)
    with pytest.raises(ds.NotFittedError):
        est.summarize(np.ones((5, 3)), row_offset=0)
    with pytest.raises(ds.NotFittedError):
        est.fold({"sketch": np.zeros((4, 3)), "n": 0, "sq_frobenius": 0.0, "shrinkage": 0.0})
