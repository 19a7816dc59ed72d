"""Database-friendly random projections (host operator, blocks on their own namespace).

Achlioptas' projections x ↦ Rᵀx / √k, the d × k matrix R of independent entries
±1 (``"dense"``) or √3·{+1, 0, −1} with probabilities 1/6, 2/3, 1/6 (``"sparse"``),
preserve every pairwise distance of n points within (1 ± ε) with probability
>= 1 − n^(−β) when k >= :func:`jl_min_dim`.  Row ``c`` of R (input column ``c``) is
drawn from :func:`~distsketch.ops.random.random_rows` keyed by ``(seed, c)``, so any
column chunking of the input gives the same operator.

Kernels of projected points approximate kernels of the originals: Gaussian
(and Cauchy) kernels through projected distances, polynomial, linear and
arc-cosine kernels through projected inner products and norms.

References
----------
Achlioptas. Database-friendly random projections. PODS 2001.
Achlioptas, McSherry, Schölkopf. Sampling techniques for kernel methods. NIPS 2001, §5.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distsketch.errors import ConfigError
from distsketch.footprint import Footprint
from distsketch.ops.kernels import PROJECTABLE_KERNELS
from distsketch.ops.linalg import row_stable_matmul
from distsketch.ops.namespace import as_block, asarray, namespace
from distsketch.ops.random import random_rows

__all__ = ["PROJECTABLE_KERNELS", "affine_map_footprint", "affine_rows", "jl_min_dim", "project",
           "projection_block", "projection_map_footprint", "projection_matrix"]


def projection_matrix(seed: int, n_features: int, n_components: int, density: str = "dense",
                      col_start: int = 0, col_stop: int | None = None,
                      dtype: Any = np.float64) -> np.ndarray:
    """Rows ``col_start:col_stop`` of the scaled projection matrix R / √k.

    Parameters
    ----------
    seed : int
    n_features : int
        Input dimension d.
    n_components : int
        Output dimension k.
    density : {"dense", "sparse"}
        ±1 entries, or √3·{+1, 0, −1} with probabilities 1/6, 2/3, 1/6.
    col_start, col_stop : int
        Range of input columns (rows of R); default all.
    dtype : dtype

    Returns
    -------
    ndarray of shape (col_stop − col_start, n_components)
        Entries ±1/√k (dense) or {±√(3/k), 0} (sparse); E[RRᵀ] = I.
    """
    stop = n_features if col_stop is None else col_stop
    if density == "dense":
        R = random_rows(seed, "dbfp.dense", col_start, stop, n_components, kind="rademacher")
        R *= 1.0 / np.sqrt(n_components)
    elif density == "sparse":
        u = random_rows(seed, "dbfp.sparse", col_start, stop, n_components, kind="uniform")
        s = np.sqrt(3.0 / n_components)
        R = np.where(u < 1.0 / 6.0, s, np.where(u >= 5.0 / 6.0, -s, 0.0))
    else:
        raise ConfigError(f"density={density!r} must be 'dense' or 'sparse'.")
    return R.astype(dtype, copy=False)


def project(block: Any, R: np.ndarray, row_offset: int = 0) -> np.ndarray:
    """Project a row block: ``block @ R`` (rows bitwise independent of the blocking).

    Parameters
    ----------
    block : ndarray or sparse matrix of shape (n, d)
    R : ndarray of shape (d, k)
        From :func:`projection_matrix`.
    row_offset : int
        Global index of the block's first row.

    Returns
    -------
    ndarray of shape (n, k)
        float32 for float32 input, else float64.

    Notes
    -----
    Cost 2·n·d·k flops (sparse R is applied densely: BLAS on the dense matrix
    is faster here than exploiting the 2/3 zeros).
    """
    if hasattr(block, "tocsr"):
        csr = block.tocsr()
        return np.asarray(csr @ R.astype(csr.dtype if csr.dtype == np.float32 else np.float64))
    X = as_block(block)
    xp = namespace(X)
    if xp is not np:
        dt = X.dtype if X.dtype == xp.float32 else xp.float64
        return xp.astype(X, dt) @ asarray(R, like=X, dtype=dt)
    W = R.astype(X.dtype if X.dtype == np.float32 else np.float64, copy=False)
    return row_stable_matmul(X, W, row_offset)


def projection_block(block: Any, row_offset: int, C: np.ndarray) -> np.ndarray:
    """:func:`project` as a row map ``(block, row_offset, *operands)`` with ``C = Rᵀ`` (k × d).

    The order :func:`distsketch.graph.map_blocks` calls a per-block function
    in; ``C`` is the operator as an estimator stores it (``components_``).
    """
    return project(block, C.T, row_offset)


def projection_map_footprint(n_features: int, n_components: int) -> Footprint:
    """Memory of one :func:`projection_block` task: per row the input row and two k-wide rows
    (the product and its cast), float64 worst case."""
    return Footprint(per_row=8.0 * (n_features + 2 * n_components))


def affine_rows(block: Any, row_offset: int, P: np.ndarray, b: np.ndarray) -> Any:
    """``block @ P + b`` with rows bitwise independent of the blocking.

    The row map of a learned linear embedding (k-Space's projection of its
    sketched features).  The block is cast to ``P``'s dtype; host operands
    move to the block's device once.

    Parameters
    ----------
    block : ndarray or array of another namespace, shape (n, d)
    row_offset : int
        Global index of the block's first row.
    P : ndarray of shape (d, k)
    b : ndarray of shape (k,)

    Returns
    -------
    array of shape (n, k), dtype of ``P``
    """
    block = as_block(block, dtype=P.dtype)
    P, b = asarray(P, like=block), asarray(b, like=block)
    out = row_stable_matmul(block, P, row_offset)
    out += b
    return out


def affine_map_footprint(n_features: int, n_out: int) -> Footprint:
    """Memory of one :func:`affine_rows` task: per row the input row and its k outputs (float64)."""
    return Footprint(per_row=8.0 * (n_features + n_out))


def jl_min_dim(n_samples: int, eps: float, beta: float = 1.0) -> int:
    """Achlioptas' dimension: k >= (4 + 2β) ln n / (ε²/2 − ε³/3).

    Parameters
    ----------
    n_samples : int
        Number of points whose pairwise distances must be preserved.
    eps : float in (0, 1)
        Relative distortion of squared distances.
    beta : float
        Failure probability n^(−β).
    """
    if not 0 < eps < 1:
        raise ConfigError(f"eps={eps} must be in (0, 1).")
    if n_samples < 2:
        return 1
    return int(np.ceil((4.0 + 2.0 * beta) * np.log(n_samples) / (eps**2 / 2.0 - eps**3 / 3.0)))
