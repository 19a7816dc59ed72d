"""Input and parameter validation with errors from :mod:`distsketch.errors`.

Parameters are checked against a declared constraint table (as scikit-learn
does): each estimator lists ``_parameter_constraints = {name: [constraint, ...]}``
and :func:`validate_params` raises :class:`~distsketch.errors.ConfigError`
naming the parameter, the value and what is allowed.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import dask.array as da
import numpy as np

from distsketch.errors import ConfigError, InputError

__all__ = [
    "Interval",
    "Options",
    "check_input",
    "check_n_features",
    "check_targets",
    "is_dask",
    "validate_params",
]


@dataclass(frozen=True)
class Interval:
    """A numeric range constraint: ``kind`` is ``int`` or ``float`` (real)."""

    kind: type
    left: float | None
    right: float | None
    closed: str = "both"  # "both", "left", "right", "neither"

    def accepts(self, value: Any) -> bool:
        if isinstance(value, bool):
            return False
        if self.kind is int:
            if not isinstance(value, numbers.Integral):
                return False
        elif not isinstance(value, numbers.Real):
            return False
        lo_ok = self.left is None or (
            value >= self.left if self.closed in ("both", "left") else value > self.left)
        hi_ok = self.right is None or (
            value <= self.right if self.closed in ("both", "right") else value < self.right)
        return bool(lo_ok and hi_ok)

    def __str__(self) -> str:
        lb = "[" if self.closed in ("both", "left") else "("
        rb = "]" if self.closed in ("both", "right") else ")"
        lo = "-inf" if self.left is None else self.left
        hi = "inf" if self.right is None else self.right
        return f"{'an int' if self.kind is int else 'a float'} in {lb}{lo}, {hi}{rb}"


@dataclass(frozen=True)
class Options:
    """One of a fixed set of values."""

    values: frozenset

    def __init__(self, values: Iterable[Any]):
        object.__setattr__(self, "values", frozenset(values))

    def accepts(self, value: Any) -> bool:
        try:
            return value in self.values
        except TypeError:
            return False

    def __str__(self) -> str:
        return "one of " + ", ".join(repr(v) for v in sorted(self.values, key=str))


def _accepts(constraint: Any, value: Any) -> bool:
    if constraint is None:
        return value is None
    if constraint == "random_state":
        return value is None or isinstance(value, (numbers.Integral, np.random.Generator,
                                                   np.random.RandomState))
    if constraint == "boolean":
        return isinstance(value, (bool, np.bool_))
    if constraint == "callable":
        return callable(value)
    if constraint == "array-like":
        return hasattr(value, "shape") or isinstance(value, (list, tuple))
    if constraint == "str":
        return isinstance(value, str)
    if constraint == "estimator":
        return hasattr(value, "fit") or hasattr(value, "transform")
    if isinstance(constraint, type):
        return isinstance(value, constraint)
    if isinstance(constraint, (Interval, Options)):
        return constraint.accepts(value)
    raise TypeError(f"unknown constraint {constraint!r}")


def validate_params(estimator: Any) -> None:
    """Check every parameter of ``estimator`` against its constraint table."""
    table: dict[str, list[Any]] = getattr(estimator, "_parameter_constraints", {})
    params = estimator.get_params(deep=False)
    for name, constraints in table.items():
        if name not in params:
            continue
        value = params[name]
        if not any(_accepts(c, value) for c in constraints):
            allowed = " or ".join(str(c) if not isinstance(c, str) else c for c in constraints)
            raise ConfigError(
                f"{type(estimator).__name__}: parameter {name}={value!r} is invalid; "
                f"it must be {allowed}."
            )


def is_dask(X: Any) -> bool:
    """True for dask arrays."""
    return isinstance(X, da.Array)


def check_input(
    X: Any,
    *,
    where: str = "X",
    allow_sparse: bool = False,
    dtype: Any = None,
    min_rows: int = 1,
) -> Any:
    """Validate the shape and dtype of a NumPy, SciPy-sparse or dask input.

    Checks that the input is 2-D, numeric, has at least ``min_rows`` rows; for
    NumPy input also that it is finite (dask input is checked lazily, block by
    block, in :func:`distsketch.graph.map_rows`).  Zarr arrays and paths are
    opened with :func:`distsketch.io.open_array`.

    Parameters
    ----------
    X : array_like, dask array, zarr array or path
    where : str
        Name used in messages.
    allow_sparse : bool
        Accept SciPy sparse matrices (returned as CSR).
    dtype : dtype, optional
        Cast floating input to this dtype (float32 or float64); None keeps
        float32/float64 and casts others to float64.
    min_rows : int
        Minimum number of rows.

    Returns
    -------
    ndarray, scipy.sparse.csr_matrix or dask.array.Array
    """
    if isinstance(X, (str,)) or type(X).__module__.startswith("zarr") or hasattr(X, "__fspath__"):
        from distsketch.io.zarr_io import open_array

        return open_array(X)
    if hasattr(X, "tocsr") and not is_dask(X):
        if not allow_sparse:
            raise InputError(f"{where}: sparse input is not supported here; pass a dense array.")
        X = X.tocsr()
        _check_shape_dtype(X.shape, X.dtype, where, min_rows)
        X = X.astype(_target_dtype(X.dtype, dtype), copy=False)
        if not np.all(np.isfinite(X.data)):
            from distsketch.graph.blocks import check_finite_block

            check_finite_block(X, 0, where)
        return X
    if not is_dask(X):
        try:
            X = np.asarray(X)
        except (TypeError, ValueError) as exc:
            raise InputError(f"{where}: cannot be read as an array ({exc}).") from exc
        if X.dtype == object:
            # numbers held in an object array are accepted; a TypeError for
            # non-scalar entries propagates with NumPy's own message
            try:
                X = X.astype(np.float64)
            except ValueError as exc:
                raise InputError(f"{where}: object array with non-numeric entries ({exc}); "
                                 "convert to float32/float64 first.") from exc
    _check_shape_dtype(X.shape, X.dtype, where, min_rows)
    target = _target_dtype(X.dtype, dtype)
    if X.dtype != target:
        X = X.astype(target)
    if not is_dask(X) and not np.all(np.isfinite(X)):
        from distsketch.graph.blocks import check_finite_block

        check_finite_block(X, 0, where)
    return X


def _target_dtype(current: np.dtype, requested: Any) -> np.dtype:
    if requested is not None:
        return np.dtype(requested)
    if current in (np.float32, np.float64):
        return np.dtype(current)
    return np.dtype(np.float64)


def _check_shape_dtype(shape: tuple, dtype: np.dtype, where: str, min_rows: int) -> None:
    if len(shape) != 2:
        raise InputError(
            f"{where}: expected a 2-D array (rows are points), got {len(shape)}-D with shape "
            f"{tuple(shape)}. Reshape your data, e.g. X.reshape(-1, 1) for a single feature."
        )
    if not (np.issubdtype(dtype, np.number) or np.issubdtype(dtype, np.bool_)) or \
            np.issubdtype(dtype, np.complexfloating):
        kind = "Complex data not supported: " if np.issubdtype(dtype, np.complexfloating) else ""
        raise InputError(
            f"{where}: {kind}dtype {dtype} is not real numeric; convert to float32/float64 first."
        )
    if shape[0] < min_rows:
        raise InputError(f"{where}: has {shape[0]} rows; at least {min_rows} needed.")
    if shape[1] < 1:
        raise InputError(f"{where}: has 0 features: found array with 0 feature(s) "
                         f"(shape={tuple(shape)}) while a minimum of 1 is required.")


def check_n_features(estimator: Any, X: Any, *, reset: bool) -> None:
    """Record ``n_features_in_`` (reset) or check that X matches it."""
    n = X.shape[1]
    if reset:
        estimator.n_features_in_ = int(n)
        return
    expected = getattr(estimator, "n_features_in_", None)
    if expected is not None and n != expected:
        raise InputError(
            f"X has {n} features, but {type(estimator).__name__} is expecting {expected} features "
            "as input (the number it was fitted with); pass data with the same columns as in fit."
        )


def check_targets(y: Any, n_rows: int, *, where: str = "y") -> Any:
    """Validate regression/classification targets aligned with ``n_rows`` rows."""
    if y is None:
        raise InputError(f"{where}: this estimator requires y to be passed, but the target y is None.")
    if not is_dask(y):
        y = np.asarray(y)
        if y.dtype == object:
            try:
                y = y.astype(np.float64)
            except (TypeError, ValueError) as exc:
                raise InputError(f"{where}: Unknown label type: y holds non-numeric values ({exc}); "
                                 "pass numeric targets.") from exc
    if y.ndim not in (1, 2):
        raise InputError(f"{where}: expected 1-D or 2-D targets, got shape {y.shape}.")
    if y.shape[0] != n_rows:
        raise InputError(
            f"{where} has {y.shape[0]} rows but X has {n_rows}; they must be aligned row by row."
        )
    if not is_dask(y) and np.issubdtype(y.dtype, np.floating) and not np.all(np.isfinite(y)):
        bad = int(np.flatnonzero(~np.isfinite(y.reshape(y.shape[0], -1)).any(axis=1))[0])
        raise InputError(f"{where} contains NaN or Inf (first at row {bad}); clean the targets.")
    return y


def as_callable_or_name(kernel: Any) -> str | Callable:
    """Accept a kernel name or a callable."""
    if isinstance(kernel, str) or callable(kernel):
        return kernel
    raise ConfigError(f"kernel must be a name or a callable, got {type(kernel).__name__}.")
