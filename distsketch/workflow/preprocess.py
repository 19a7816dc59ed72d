"""Preprocessing learned by a mergeable summary, then frozen in the state and the model (a
saved ``Pipeline([("scale", Standardizer), ("model", estimator)])``)."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import TransformerMixin

from distsketch.errors import InputError
from distsketch.estimators.base import DistsketchEstimator, fit_context
from distsketch.estimators.kernel_params import median_gamma
from distsketch.graph import reduce_blocks
from distsketch.summaries.moments import ColumnMoments, column_scale

__all__ = ["Standardizer", "apply_scaler", "learn_scaler", "median_gamma", "with_preprocessing"]


def learn_scaler(X: Any) -> dict:
    """``{"mean": [...], "scale": [...]}`` of X's columns (scale 1 for constant ones), JSON-able,
    in one tree-reduced pass (per task: one block and a 3·d state)."""
    mom = reduce_blocks(ColumnMoments(), X, name="standardize-moments", progress=False)
    mean, scale = column_scale(mom)  # constant columns are centred only
    return {"mean": mean.tolist(), "scale": scale.tolist()}


def apply_scaler(X: Any, scaler: dict | None) -> Any:
    """``(X - mean) / scale`` lazily, in X's float type (float64 for integer input)."""
    if scaler is None:
        return X
    dt = X.dtype if np.dtype(X.dtype).kind == "f" else np.float64
    mean = np.asarray(scaler["mean"], dtype=np.float64).astype(dt)
    scale = np.asarray(scaler["scale"], dtype=np.float64).astype(dt)
    return ((X.astype(dt) - mean) / scale).astype(dt)


class Standardizer(TransformerMixin, DistsketchEstimator):
    """Centre and scale columns: ``(X - mean_) / scale_`` in X's float type.

    The workflow's ``preprocessing: {standardize: true}`` as a transformer, so
    that a saved model holds its preprocessing.  Unlike
    ``sklearn.preprocessing.StandardScaler`` it keeps dask input lazy (one
    elementwise map per block), and it rounds exactly as the workflow does:
    mean and scale are cast to X's float type first, then subtracted and
    divided in that type.

    Attributes
    ----------
    mean_ : ndarray of shape (n_features,), float64
    scale_ : ndarray of shape (n_features,), float64
        Population standard deviations; 1 for constant columns.
    n_features_in_ : int
    n_samples_seen_ : int

    Notes
    -----
    ``fit`` is one tree-reduced pass (per task: one block and a 3·d state);
    ``transform`` is elementwise, O(block) memory, no communication.
    """

    def __init__(self) -> None:
        pass

    @classmethod
    def from_scaler(cls, scaler: dict, n_samples: int) -> Standardizer:
        """The transformer of a workflow state's ``{"mean": [...], "scale": [...]}``."""
        est = cls()
        est.mean_ = np.asarray(scaler["mean"], dtype=np.float64)
        est.scale_ = np.asarray(scaler["scale"], dtype=np.float64)
        est.n_features_in_ = int(est.mean_.size)
        est.n_samples_seen_ = int(n_samples)
        return est

    @fit_context
    def fit(self, X: Any, y: Any = None) -> Standardizer:
        """Learn column means and standard deviations of X (NumPy or dask, shape (n, d))."""
        X = self._check_input(X, reset=True)
        if X.shape[0] == 0:
            raise InputError("Standardizer.fit: X has no rows; pass at least one.")
        fitted = Standardizer.from_scaler(learn_scaler(X), int(X.shape[0]))
        self.__dict__.update(vars(fitted))
        return self

    def transform(self, X: Any) -> Any:
        """Standardised X, same kind (NumPy or lazy dask) and float type as X."""
        self._check_is_fitted("mean_")
        X = self._check_input(X, reset=False)
        return apply_scaler(X, {"mean": self.mean_, "scale": self.scale_})


def with_preprocessing(model: Any, scaler: dict | None, n_samples: int) -> Any:
    """The model a workflow saves: ``model`` alone, or a Pipeline with its scaler first (whose
    outputs of raw rows equal the workflow's bitwise)."""
    if scaler is None:
        return model
    from sklearn.pipeline import Pipeline

    return Pipeline([("scale", Standardizer.from_scaler(scaler, n_samples)), ("model", model)])
