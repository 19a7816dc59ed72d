"""Randomly pivoted Cholesky, blockwise: the per-block pieces (no Dask).

With pivots S (landmarks L = X[S]) and the map M = K_SS^{+1/2}, the residual
diagonal of the Nyström (= partial Cholesky) approximation is

    d_i = k(x_i, x_i) − ‖K(x_i, L) M‖²  =  (K − K_{:S} K_SS⁺ K_{S:})_ii,

one row at a time, so a pass over the data gives every d_i.  Randomly
pivoted Cholesky draws the next pivots with probability ∝ d (Chen, Epperly,
Tropp, Webber); the draw itself is the weighted bottom-k race of
:class:`~distsketch.summaries.leverage.WeightedLandmarks`.

References
----------
Chen, Epperly, Tropp, Webber. Randomly pivoted Cholesky: practical
approximation of a kernel matrix with few entry evaluations. Comm. Pure
Appl. Math. 2024 (arXiv:2207.06503), Algorithm 3 (block RPCholesky).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distsketch.footprint import Footprint
from distsketch.ops.kernels import kernel_diagonal, kernel_function
from distsketch.ops.namespace import as_block, asarray, densify, namespace, to_host
from distsketch.ops.nystrom import row_stable_apply

__all__ = ["residual_diagonal", "residual_diagonal_footprint", "round_sizes"]


def round_sizes(n_pivots: int, rounds: int) -> list[int]:
    """Pivots drawn per round: ``n_pivots`` split as evenly as possible over
    ``min(rounds, n_pivots)`` rounds (earlier rounds never larger)."""
    rounds = max(1, min(int(rounds), int(n_pivots)))
    base, extra = divmod(int(n_pivots), rounds)
    return [base + (1 if r >= rounds - extra else 0) for r in range(rounds)]


def residual_diagonal(block: Any, row_offset: int, landmarks: np.ndarray | None,
                      M: np.ndarray | None, pivots: np.ndarray | None = None, *,
                      kernel: Any = "rbf", params: dict | None = None) -> np.ndarray:
    """Residual diagonal d_i = k(x_i, x_i) − ‖K(x_i, L) M‖² of one row block (host, float64).

    Parameters
    ----------
    block : ndarray or sparse matrix of shape (b, d)
    row_offset : int
        Global index of the block's first row.
    landmarks : ndarray of shape (m, d) or None
        The pivots' rows; None (or m = 0) gives the kernel's diagonal.
    M : ndarray of shape (m, r) or None
        K_SS^{+1/2} (``inv_sqrt_map`` of the pivots' kernel matrix).
    pivots : ndarray of int64, optional
        Global rows already chosen: their d is set to 0 exactly (rounding
        leaves ~1e-16 there), so no row is drawn twice.
    kernel, params
        The kernel and its parameters.

    Returns
    -------
    ndarray of shape (b,), float64, non-negative

    Notes
    -----
    Per task: the block plus a 256 × (m + r) tile; O(b·m·(d + r)) flops.
    """
    X = as_block(densify(block), dtype=np.float64)
    xp = namespace(X)
    params = params or {}
    if landmarks is None or M is None or landmarks.shape[0] == 0 or M.shape[1] == 0:
        d = to_host(kernel_diagonal(X, kernel, **params))
        d = np.asarray(d, dtype=np.float64).reshape(-1)
    else:
        kfun = kernel_function(kernel, **params)
        L = asarray(landmarks, like=X, dtype=xp.float64)
        Mx = asarray(M, like=X, dtype=xp.float64)

        def f(T: Any) -> Any:
            Z = asarray(kfun(T, L), like=T, dtype=xp.float64) @ Mx
            diag = asarray(kernel_diagonal(T, kernel, **params), like=T, dtype=xp.float64)
            return xp.reshape(diag - xp.sum(Z * Z, axis=1), (-1, 1))

        d = np.asarray(to_host(row_stable_apply(f, X, 1, row_offset)), dtype=np.float64)[:, 0]
    d = np.maximum(d, 0.0)
    if pivots is not None and len(pivots):
        rows = np.arange(row_offset, row_offset + X.shape[0], dtype=np.int64)
        d[np.isin(rows, np.asarray(pivots, dtype=np.int64))] = 0.0
    return d


def residual_diagonal_footprint(n_features: int, n_pivots: int, rank: int) -> Footprint:
    """Memory :func:`residual_diagonal` adds to a task (float64).

    Per row: a kernel row against the t pivots and its r mapped values, each
    with a product (``2 (t + r)``).  Fixed: the operands, t × d pivot rows,
    the t × r map and t pivot indices.

    Parameters
    ----------
    n_features, n_pivots, rank : int
        d, t (pivots so far) and r (columns of their map).
    """
    t = n_pivots
    return Footprint(per_row=8.0 * 2 * (t + rank),
                     fixed=8.0 * (t * n_features + t * rank + t))
