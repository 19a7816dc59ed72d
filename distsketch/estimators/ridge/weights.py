"""The input side of sketched kernel ridge regression: row weights and ``[X | y]`` stacking
(the summary itself is :class:`~distsketch.summaries.ridge.RidgeSummary`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from distsketch.errors import InputError
from distsketch.graph import as_dask, derive_row_source, hstack_blocks, plan_rows, to_numpy
from distsketch.ops.kernels import max_row_sqnorm
from distsketch.ops.namespace import asarray, host_dtype, namespace, to_host, xp_dtype
from distsketch.validation import is_dask
from distsketch.validation.finite import is_array_api

__all__ = ["MAX_WEIGHT_SUM", "check_sample_weight", "check_weight_scale", "stack_xy",
           "with_weights"]


#: The largest total of the row weights of one fit (about 5.8e76).  The weighted summaries
#: are float64 sums of w·z·y, and the solvers multiply up to three of them (GCV's residuals:
#: a squared Zᵀy times an eigenvalue of ZᵀZ); below the fourth root of the largest squared
#: row norm of float64 those products stay finite for targets of any ordinary size.  A
#: larger total would otherwise reach the fit's per-row magnitude check, where the weights
#: are a last column of the rows, or overflow the solve to inf/NaN.
MAX_WEIGHT_SUM = max_row_sqnorm(np.float64) ** 0.25


def check_sample_weight(sample_weight: Any, n_rows: int, where: str) -> np.ndarray:
    """Row weights as float64 of shape (n_rows,): finite, non-negative, not all zero, and
    small enough that the weighted sums cannot overflow (:func:`check_weight_scale`); an
    InputError names the first bad row (or the largest weight).
    """
    # row weights are checked on the host (one number per row) and move with the targets
    w = np.asarray(to_numpy(sample_weight) if is_dask(sample_weight) else to_host(sample_weight),
                   dtype=np.float64)
    w = np.full(n_rows, float(w)) if w.ndim == 0 else w
    need = (f"{where}: sample_weight must be {n_rows} finite non-negative numbers (one per row "
            "of X), not all zero")
    if w.shape != (n_rows,):
        raise InputError(f"{need}; got shape {w.shape}.")
    bad = np.flatnonzero(~np.isfinite(w) | (w < 0))
    if bad.size:
        raise InputError(f"{need}; row {int(bad[0])} has weight {float(w[bad[0]])!r}. Fix or drop "
                         "that row's weight.")
    if not w.sum() > 0:
        raise InputError(f"{need}; every weight is 0.")
    check_weight_scale(w, where, "sample_weight")
    return w


def check_weight_scale(w: np.ndarray, where: str, name: str,
                       label_of: Any = None) -> None:
    """Refuse row weights whose total exceeds :data:`MAX_WEIGHT_SUM`, naming the weights.

    Without this check such weights reach the fit's per-row magnitude check
    as one more column of the rows, whose message blames the data ("row 0
    is too large ... scale the data") although X is fine.  ``name`` says what the
    weights are (``"sample_weight"``, ``"class_weight"``, ...); ``label_of(row)``, when
    given, names the class of the row holding the largest weight.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        total = float(np.sum(w))
    if total <= MAX_WEIGHT_SUM:
        return
    row = int(np.argmax(w))
    label = f" (class {label_of(row)!r})" if label_of is not None else ""
    size = f"sum to {total:.3g}" if math.isfinite(total) else "sum beyond float64's range"
    what = {"class_weight": "every class weight",
            "sample_weight": "every sample_weight"}.get(name, "the sample_weight or the class "
                                                             "weights")
    raise InputError(
        f"{where}: {name} is too large: the row weights {size}, above {MAX_WEIGHT_SUM:.3g}, so "
        f"the fit's weighted sums would overflow float64 (the largest weight is {w[row]:.3g}, "
        f"at row {row}{label}). The data X is not the problem. Weights are relative: divide "
        f"{what} by one constant c, e.g. the largest weight (with a fixed alpha, divide alpha "
        "by c too for the same fit), and fit again.")


def with_weights(Y: Any, w: np.ndarray | None) -> Any:
    """Targets with the row weights as one more last column (Y itself without weights)."""
    if w is None:
        return Y
    if is_dask(Y):
        # on the device of Y's blocks (a dask array of CuPy blocks takes CuPy weights)
        return hstack_blocks(Y.astype(np.float64), asarray(w[:, None], like=Y._meta))
    if not isinstance(Y, np.ndarray) and is_array_api(Y):
        xp = namespace(Y)  # the host weights move to the targets' device
        return xp.concat([xp.astype(Y, xp.float64), asarray(w[:, None], like=Y)], axis=1)
    return np.hstack([np.asarray(Y, dtype=np.float64), w[:, None]])


def stack_xy(X: Any, Y: Any) -> Any:
    """Targets appended as the last columns of X, row blocks aligned.

    The blocks take the common dtype of X and the targets (float32 X and
    float32 targets stay float32); each block is stacked in its own task, so
    no copy of the whole input (in another dtype) is made on the driver.  X
    read from a store stays re-readable: a stage planned on smaller blocks
    re-reads X at that size and stacks again (``graph.derive_row_source``).
    """
    dt = np.result_type(host_dtype(X.dtype), host_dtype(Y.dtype), np.float32)
    if is_dask(X):
        # X and y from different array libraries: an InputError naming what to do
        namespace(X._meta, getattr(Y, "_meta", Y))
        Yc = Y.astype(dt) if is_dask(Y) else asarray(Y, like=Y, dtype=dt)

        def stack(A: Any) -> Any:
            return hstack_blocks(A.astype(dt), Yc)

        return derive_row_source(stack(X), X, stack)
    if not isinstance(X, np.ndarray) and is_array_api(X):
        xp = namespace(X, Y)  # an InputError when X and y come from different libraries
        # in-memory blocks of another namespace run in this process (no dask array of them)
        dx = xp_dtype(xp, dt)
        return xp.concat([xp.astype(X, dx), xp.astype(Y, dx)], axis=1)
    X = np.asarray(X)
    rows = plan_rows(X).plan.block_rows
    return hstack_blocks(as_dask(X, block_rows=rows).astype(dt), np.asarray(Y, dtype=dt))
