"""Shared machinery of distsketch estimators (scikit-learn conventions).

* keyword-only ``__init__`` that only stores parameters;
* ``_parameter_constraints`` checked by :meth:`DistsketchMixin._validate_params`;
* randomness drawn once in ``fit`` into an integer ``seed_`` from which every
  operator is regenerated, on any worker;
* NumPy in, NumPy out; dask in, dask out (lazy);
* ``save(path)`` / :func:`distsketch.load`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import dask.array as da
import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

from distsketch.blas import single_threaded_blas
from distsketch.errors import NotFittedError
from distsketch.graph import (
    as_dask,
    compute,
    compute_array,
    map_rows,
    rows_for_budget,
    task_memory_budget,
    tree_reduce,
)
from distsketch.graph.arrays import default_block_rows
from distsketch.ops.random import resolve_seed
from distsketch.validation import check_input, check_n_features, is_dask, validate_params

__all__ = ["DistsketchEstimator", "RowMapTransformer", "apply_rows", "reduce_rows"]

_WORKING_SET_TARGET = 256 * 2**20


def apply_rows(
    X: Any,
    func: Callable[..., np.ndarray],
    *operands: Any,
    n_out: int,
    dtype: Any,
    kwargs: dict | None = None,
    bytes_per_row: float | None = None,
    fixed_bytes: float = 0.0,
    name: str = "map-rows",
    progress: bool | None = None,
) -> Any:
    """Map ``func`` over the row blocks of X, returning the same kind as X.

    Dask input gives a lazy dask array; NumPy/sparse input is split into
    blocks, computed, and returned as a NumPy array.
    """
    lazy = is_dask(X)
    if lazy:
        Xd = X
    else:
        rows = None
        if bytes_per_row:
            # size in-memory blocks by the working set, not only by the input bytes
            target = min(task_memory_budget(), _WORKING_SET_TARGET)
            rows = int(min(X.shape[0], max(256, rows_for_budget(bytes_per_row, fixed_bytes, target))))
            rows = min(rows, default_block_rows(X.shape[0], X.shape[1], np.dtype(X.dtype).itemsize))
        Xd = as_dask(X, block_rows=rows)
    out = map_rows(func, Xd, *operands, n_out=n_out, dtype=dtype, kwargs=kwargs,
                   bytes_per_row=bytes_per_row, fixed_bytes=fixed_bytes, name=name)
    if lazy:
        return out
    if Xd.npartitions == 1:
        return compute(out, progress=False, scheduler="sync")[0]
    return compute_array(out, progress=progress)


def reduce_rows(summary: Any, X: Any, *operands: Any, split_every: int = 8,
                bytes_per_row: float | None = None, fixed_bytes: float = 0.0,
                progress: bool | None = None, name: str | None = None) -> Any:
    """Tree-reduce ``summary`` over X (NumPy, sparse or dask) and return the state."""
    Xd = X if is_dask(X) else as_dask(X)
    red = tree_reduce(summary, Xd, *operands, split_every=split_every,
                      bytes_per_row=bytes_per_row, fixed_bytes=fixed_bytes, name=name)
    if Xd.npartitions == 1:
        return compute(red, progress=False, scheduler="sync")[0]
    return compute(red, progress=progress)[0]


_SINGLE_THREADED = ("fit", "partial_fit", "merge")


class DistsketchEstimator(BaseEstimator):
    """Base class: parameter validation, input checks, fitted checks, save.

    ``fit``, ``partial_fit`` and ``merge`` of every subclass run with BLAS on
    one thread: LAPACK results change in the last bits with the thread count,
    and a fitted model must be bitwise the same in any process.
    """

    _parameter_constraints: dict[str, list[Any]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in _SINGLE_THREADED:
            method = cls.__dict__.get(name)
            if callable(method) and not getattr(method, "_single_threaded", False):
                wrapped = single_threaded_blas(method)
                wrapped._single_threaded = True
                setattr(cls, name, wrapped)

    def _validate_params(self) -> None:
        validate_params(self)

    def _check_input(self, X: Any, *, reset: bool, allow_sparse: bool = False,
                     dtype: Any = None) -> Any:
        if reset and isinstance(X, (str, os.PathLike)):
            # a model fitted from a store records which data it saw (saved with the model)
            from distsketch.io.zarr_io import fingerprint

            self.fingerprint_ = fingerprint(X)
        X = check_input(X, where=f"{type(self).__name__} input", allow_sparse=allow_sparse,
                        dtype=dtype)
        check_n_features(self, X, reset=reset)
        return X

    def _check_is_fitted(self, attribute: str | None = None) -> None:
        fitted = (hasattr(self, attribute) if attribute else
                  any(k.endswith("_") and not k.startswith("_") for k in vars(self)))
        if not fitted:
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet; call fit (or "
                "partial_fit) with training data first."
            )

    def _init_seed(self) -> int:
        if not hasattr(self, "seed_"):
            self.seed_ = resolve_seed(getattr(self, "random_state", None))
        return self.seed_

    def save(self, path: str | os.PathLike, *, overwrite: bool = False) -> Any:
        """Save the fitted estimator to a Zarr group at ``path`` (atomic).

        Load it with :func:`distsketch.load`.
        """
        from distsketch.io.model import save_model

        self._check_is_fitted()
        return save_model(self, path, overwrite=overwrite)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        tags.input_tags.sparse = bool(getattr(self, "_accepts_sparse", False))
        return tags


class RowMapTransformer(TransformerMixin, DistsketchEstimator):
    """Base for oblivious/learned row maps ``x -> z(x)`` (feature maps).

    Subclasses implement ``_map_block(block, offset, *operands) -> ndarray`` and
    ``_operands()`` (arrays shipped once to workers), ``n_output_features_`` and
    optionally ``_bytes_per_row()``.
    """

    dtype: Any = None

    def _operands(self) -> tuple:
        return ()

    def _bytes_per_row(self) -> float | None:
        return None

    def _output_dtype(self, X: Any) -> np.dtype:
        return np.dtype(X.dtype) if np.dtype(X.dtype) in (np.float32, np.float64) else \
            np.dtype(np.float64)

    def transform(self, X: Any) -> Any:
        """Map rows of X to features.

        Parameters
        ----------
        X : ndarray, sparse matrix or dask array of shape (n_samples, n_features)

        Returns
        -------
        ndarray or dask array of shape (n_samples, n_output_features_)
            Same kind (NumPy or dask) as X; float32 input gives float32 output.
        """
        self._check_is_fitted("n_output_features_")
        X = self._check_input(X, reset=False, allow_sparse=getattr(self, "_accepts_sparse", False))
        return apply_rows(X, self._map_block, *self._operands(),
                          n_out=self.n_output_features_, dtype=self._output_dtype(X),
                          bytes_per_row=self._bytes_per_row(), name=type(self).__name__.lower())

    def fit_transform(self, X: Any, y: Any = None, **fit_params: Any) -> Any:
        return self.fit(X, y, **fit_params).transform(X)

    def kernel_approx(self, A: np.ndarray, B: np.ndarray | None = None) -> np.ndarray:
        """The approximate kernel block z(A) z(B)ᵀ (small in-memory inputs)."""
        ZA = np.asarray(self.transform(np.asarray(A)), dtype=np.float64)
        ZB = ZA if B is None else np.asarray(self.transform(np.asarray(B)), dtype=np.float64)
        return ZA @ ZB.T

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        name = type(self).__name__.lower()
        return np.asarray([f"{name}{i}" for i in range(self.n_output_features_)], dtype=object)


def to_numpy(X: Any) -> np.ndarray:
    """Materialise a (small) dask or NumPy array."""
    if isinstance(X, da.Array):
        return compute(X, progress=False)[0]
    return np.asarray(X)
