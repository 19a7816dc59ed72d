"""Array checks: shape, dtype, finiteness, width and targets of in-memory arrays.

These checks take arrays (NumPy, SciPy sparse, dask), never paths: opening a
store is :mod:`distsketch.io`'s job, which calls back into these checks for
what it opened.  Nothing here imports :mod:`distsketch.io`.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from distsketch.errors import InputError
from distsketch.ops.namespace import host_dtype, namespace, to_host, xp_dtype
from distsketch.validation.finite import (
    cast_checked,
    check_finite_rows,
    check_finite_targets,
    first_out_of_range,
    is_array_api,
    is_dask,
    narrows,
)

__all__ = [
    "check_input",
    "check_n_features",
    "check_shape_dtype",
    "check_targets",
    "is_dask",
    "is_path_like",
]


def is_path_like(X: Any) -> bool:
    """True for what :func:`distsketch.io.open_array` opens: a path or a Zarr array."""
    return isinstance(X, (str, os.PathLike)) or type(X).__module__.startswith("zarr")


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
    NumPy input also that it is finite and that no row's squared norm
    overflows the working dtype (dask input is checked lazily, block by
    block, in :func:`distsketch.graph.map_rows`).  A narrowing cast (e.g.
    float64 data with ``dtype=float32``) checks the range first.  Paths and Zarr arrays are
    not accepted here: open them with :func:`distsketch.io.open_array`, which
    applies these checks.

    Parameters
    ----------
    X : array_like, sparse matrix or dask array of shape (n_samples, n_features)
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

    Raises
    ------
    InputError
        A path or Zarr array, not 2-D, not real numeric, too few rows, NaN/Inf,
        a row too large for kernel computations, or a value the requested
        dtype cannot hold (each naming the first bad row).
    """
    if is_path_like(X):
        raise InputError(f"{where}: got a path or Zarr array ({X!r}); open it with "
                         "distsketch.open_array first.")
    if hasattr(X, "tocsr") and not is_dask(X):
        if not allow_sparse:
            raise InputError(f"{where}: sparse input is not supported here; pass a dense array.")
        X = X.tocsr()
        check_shape_dtype(X.shape, X.dtype, where, min_rows)
        target = _target_dtype(X.dtype, dtype)
        _check_sparse_range(X, target, where)
        X = X.astype(target, copy=False)
        check_finite_rows(X, 0, where)
        return X
    if is_array_api(X):
        return _check_array_api(X, where, dtype, min_rows)
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
    check_shape_dtype(X.shape, X.dtype, where, min_rows)
    target = _target_dtype(X.dtype, dtype)
    if X.dtype != target:
        if is_dask(X):
            X = _cast_dask(X, target, where)
        else:
            X = cast_checked(X, target, where=where)
    if not is_dask(X):
        # dask input: the same check runs per block in the graph
        check_finite_rows(X, 0, where)
    return X


def _check_array_api(X: Any, where: str, dtype: Any, min_rows: int) -> Any:
    """:func:`check_input` for an in-memory array of another namespace (CuPy, array-api-strict),
    checked on its device: only per-row flags come to the host."""
    xp = namespace(X)
    current = host_dtype(X.dtype)
    check_shape_dtype(X.shape, current, where, min_rows)
    target = _target_dtype(current, dtype)
    if current != target:
        if narrows(current, target) and np.issubdtype(target, np.floating):
            too_large = xp.isfinite(X) & (xp.abs(X) > float(np.finfo(target).max))
            rows = np.flatnonzero(np.asarray(to_host(xp.any(too_large, axis=1))))
            if rows.size:
                raise InputError(
                    f"{where}: row {int(rows[0])} holds a value which {target} cannot represent "
                    f"(converting {current} to {target} would change it). Use dtype=float64 "
                    "(CLI: --dtype) or rescale the data first.")
        X = xp.astype(X, xp_dtype(xp, target))
    check_finite_rows(X, 0, where)
    return X


def _cast_dask(X: Any, target: np.dtype, where: str) -> Any:
    """Lazy cast; a narrowing one checks each block's range and names its global row."""
    if not narrows(X.dtype, target):
        return X.astype(target)  # widening: no check needed, the graph stays as it was
    # the meta follows the input's blocks (a dask array of CuPy blocks stays one)
    return X.map_blocks(_cast_block, target, where, dtype=target,  # type: ignore[arg-type]
                        meta=X._meta.astype(target))


def _cast_block(block: np.ndarray, target: np.dtype, where: str,
                block_info: dict | None = None) -> np.ndarray:
    start = int(block_info[0]["array-location"][0][0]) if block_info else 0
    return cast_checked(block, target, where=where, row_start=start)


def _check_sparse_range(X: Any, target: np.dtype, where: str) -> None:
    found = first_out_of_range(X.data.reshape(-1, 1), target)
    if found is None:
        return
    # one value per "row" of the reshaped data: found[0] is its index in X.data
    row = int(np.searchsorted(X.indptr, found[0], side="right") - 1)
    raise InputError(f"{where}: row {row} holds {found[1].item()!r}, which {target} cannot represent; "
                     "pass float64 data or rescale it first.")


def _target_dtype(current: np.dtype, requested: Any) -> np.dtype:
    if requested is not None:
        return np.dtype(requested)
    if current in (np.float32, np.float64):
        return np.dtype(current)
    return np.dtype(np.float64)


def check_shape_dtype(shape: tuple, dtype: np.dtype, where: str, min_rows: int = 1) -> None:
    """Check that ``shape``/``dtype`` describe a 2-D real numeric matrix with rows.

    Works on metadata only, so a store can be checked before any chunk is read.

    Raises
    ------
    InputError
        Not 2-D, complex or non-numeric, fewer than ``min_rows`` rows, no columns.
    """
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
    if is_array_api(y):
        pass  # checked in its own namespace below (no copy to the host)
    elif not is_dask(y):
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
    if not is_dask(y):
        check_finite_targets(y, where)
    return y
