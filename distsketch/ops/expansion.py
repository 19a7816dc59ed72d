"""Kernel expansions f(x) = Σᵢ αᵢ k(xᵢ, x) + b evaluated on row blocks, a row tile at a time.

Used by rounded expansions' predictions and sparsified kernel PCA's embedding;
a task holds one tile's kernel block, never the n × (support) block.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distsketch.footprint import Footprint
from distsketch.ops.kernels import kernel_function
from distsketch.ops.namespace import asarray, namespace, zeros

__all__ = ["EXPANSION_ROWS", "centred_expansion_rows", "expansion_footprint", "expansion_rows"]

#: Rows per tile: the tile's kernel block (rows × support points) is the task's temporary.
EXPANSION_ROWS = 256


def _operands(block: Any, support: np.ndarray, coef: np.ndarray, intercept: np.ndarray
              ) -> tuple[Any, Any, Any, Any, Any]:
    """The block in float64, the expansion's operands on its device and the output buffer."""
    xp = namespace(block)
    if xp is np:
        B = np.asarray(block, dtype=np.float64)
        return B, support, coef, intercept, np.empty((B.shape[0], coef.shape[1]))
    B = xp.astype(block, xp.float64)
    S, C, b = (asarray(a, like=B, dtype=np.float64) for a in (support, coef, intercept))
    return B, S, C, b, zeros((B.shape[0], coef.shape[1]), B)


def expansion_rows(block: Any, row_offset: int, support: np.ndarray, coef: np.ndarray,
                   intercept: np.ndarray, *, kernel: Any, params: dict,
                   rows: int = EXPANSION_ROWS) -> Any:
    """``k(block, support) @ coef + intercept``, ``rows`` rows at a time, in float64.

    Parameters
    ----------
    block : ndarray or array of another namespace, shape (n, d)
    row_offset : int
        Global index of the block's first row (unused: rows are independent).
    support : ndarray of shape (s, d)
    coef : ndarray of shape (s, q)
    intercept : ndarray of shape (q,)
    kernel, params
        As :func:`~distsketch.ops.kernels.kernel_function`.
    rows : int
        Rows per tile.

    Returns
    -------
    array of shape (n, q), float64, in the block's namespace
        A block of another namespace is evaluated on its device (the support
        points and coefficients move there once per block).
    """
    kfun = kernel_function(kernel, **params)
    B, S, C, b, out = _operands(block, support, coef, intercept)
    n = B.shape[0]
    for i in range(0, n, rows):
        stop = min(i + rows, n)
        out[i:stop, ...] = kfun(B[i:stop, ...], S) @ C + b
    return out


def centred_expansion_rows(block: Any, row_offset: int, support: np.ndarray, coef: np.ndarray,
                           intercept: np.ndarray, *, kernel: Any, params: dict,
                           rows: int = EXPANSION_ROWS) -> Any:
    """``k̃(block, support) @ coef + intercept`` with each row's kernel values centred.

    ``k̃(x, ·) = k(x, ·) − mean_i k(x, xᵢ)``: a new point's kernel row centred
    by its own mean, the training centring entering through ``coef`` and
    ``intercept`` (kernel PCA's out-of-sample embedding).  NumPy blocks,
    float64 in the block's namespace; tiles of ``rows`` rows.
    """
    kfun = kernel_function(kernel, **params)
    xp = namespace(block)
    B, S, C, b, out = _operands(block, support, coef, intercept)
    colsum = xp.sum(C, axis=0)
    n = B.shape[0]
    for i in range(0, n, rows):
        stop = min(i + rows, n)
        K = kfun(B[i:stop, ...], S)
        out[i:stop, ...] = K @ C - xp.mean(K, axis=1, keepdims=True) * colsum + b
    return out


def expansion_footprint(n_features: int, n_outputs: int, n_support: int,
                        rows: int = EXPANSION_ROWS) -> Footprint:
    """Memory of one :func:`expansion_rows` / :func:`centred_expansion_rows` task (float64).

    Per row: the input row and its q outputs.  Fixed: the tile's kernel block
    and one temporary of its size (2 · rows · s), the support points (s × d)
    and the coefficients (s × q).

    Parameters
    ----------
    n_features, n_outputs, n_support : int
        d, q and s.
    rows : int
        Rows per tile.
    """
    return Footprint(per_row=8.0 * (n_features + n_outputs),
                     fixed=8.0 * (2 * rows * n_support + n_support * n_features
                                  + n_support * n_outputs))
