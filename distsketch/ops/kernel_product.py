"""``K(A, B) V`` for one row block A, never holding more than a small kernel tile.

The exact solvers spend all their time in kernel–vector products: one CG
iteration is ``K(X, X) V``, i.e. n² kernel values.  :func:`kernel_times`
evaluates the product of one row block ``A`` against every column block of
``B`` in sub-tiles of ``tile_rows × tile_cols`` values (a few MiB, so the
elementwise passes run from cache), multiplying each sub-tile by its slice of
V as soon as it is made.  For the Gaussian kernel the sub-tile is one GEMM of
augmented rows and one in-place ``exp``:

    −γ‖a − b‖² = [2γa, −γ‖a‖², 1] · [b, 1, −γ‖b‖²]ᵀ

so the row norms are computed once per block and no distance matrix or
temporary of the tile's size is allocated.  Other kernels evaluate
:func:`~distsketch.ops.kernels.pairwise_kernel` on the same sub-tiles.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from distsketch.footprint import Footprint
from distsketch.ops.kernels import KERNEL_ALIASES, pairwise_kernel
from distsketch.ops.namespace import as_block, asarray, namespace

__all__ = ["TILE_COLS", "TILE_ROWS", "kernel_times", "kernel_times_memory", "kernel_times_rows",
           "kernel_times_rows_footprint", "tile_buffer_bytes"]

#: Sub-tile shape: 256 × 1024 float64 values (2 MiB) stay in a core's L2/L3 share
#: while the GEMM output, the exp and the product with V pass over them.
TILE_ROWS, TILE_COLS = 256, 1024


def tile_buffer_bytes(tile_rows: int = TILE_ROWS, tile_cols: int = TILE_COLS) -> int:
    """Bytes of the sub-tile buffer :func:`kernel_times` allocates (once per call)."""
    return 8 * int(tile_rows) * int(tile_cols)


#: Values of the largest temporary a kernel of :mod:`distsketch.ops.kernels` makes
#: beyond tile-sized ones (the L1 distances of ``"laplacian"`` go by 2²² values).
_KERNEL_SCRATCH = 2**22


def kernel_times_memory(n_features: int, max_block_b: int, kernel: str | Callable = "rbf",
                        tile_rows: int = TILE_ROWS,
                        tile_cols: int = TILE_COLS) -> tuple[float, float]:
    """Working memory of :func:`kernel_times` beyond its inputs and result.

    Parameters
    ----------
    n_features : int
    max_block_b : int
        Rows of the largest block of B.
    kernel : str or callable
    tile_rows, tile_cols : int

    Returns
    -------
    (bytes per row of A, fixed bytes)
        The augmented copy of A (``d + 2`` values a row) and, fixed, the
        sub-tile buffer, the augmented copy of one block of B and the float64
        copies of a block of B and V when they arrive in another dtype; for a
        kernel other than ``"rbf"``, four sub-tile temporaries and 2²² values
        of scratch instead of the buffer.
    """
    d = int(n_features)
    per_row = 8.0 * (d + 2)
    fixed = 8.0 * max_block_b * (2 * d + 3)
    name = kernel if callable(kernel) else KERNEL_ALIASES.get(str(kernel), str(kernel))
    if name == "rbf":
        fixed += tile_buffer_bytes(tile_rows, tile_cols)
    else:
        fixed += 4 * tile_buffer_bytes(tile_rows, tile_cols) + 8.0 * _KERNEL_SCRATCH
    return per_row, fixed


def augmented_rbf_rows(X: np.ndarray, gamma: float) -> tuple[np.ndarray, np.ndarray]:
    """Left ``[2γx, −γ‖x‖², 1]`` and right ``[x, 1, −γ‖x‖²]`` augmented rows."""
    xp = namespace(X)
    if xp is not np:
        sq = xp.sum(X * X, axis=1)[:, None]
        one = xp.ones_like(sq)
        return (xp.concat((X * (2.0 * gamma), sq * -gamma, one), axis=1),
                xp.concat((X, one, sq * -gamma), axis=1))
    sq = np.einsum("ij,ij->i", X, X)
    n, d = X.shape
    left = np.empty((n, d + 2))
    np.multiply(X, 2.0 * gamma, out=left[:, :d])
    np.multiply(sq, -gamma, out=left[:, d])
    left[:, d + 1] = 1.0
    right = np.empty((n, d + 2))
    right[:, :d] = X
    right[:, d] = 1.0
    np.multiply(sq, -gamma, out=right[:, d + 1])
    return left, right


def kernel_times(
    A: np.ndarray,
    B_blocks: Sequence[np.ndarray],
    V_blocks: Sequence[np.ndarray],
    kernel: str | Callable = "rbf",
    params: dict | None = None,
    *,
    tile_rows: int = TILE_ROWS,
    tile_cols: int = TILE_COLS,
) -> np.ndarray:
    """``Σ_j K(A, B_j) V_j`` in float64, sub-tile by sub-tile.

    Parameters
    ----------
    A : ndarray of shape (n_a, d)
    B_blocks : sequence of ndarray of shape (n_j, d)
        The column points, in blocks (not concatenated).
    V_blocks : sequence of ndarray of shape (n_j, t)
        V's rows matching each block of B.
    kernel : str or callable
        As :func:`~distsketch.ops.kernels.pairwise_kernel`.
    params : dict, optional
        Kernel parameters (``gamma``, ``coef0``, ``degree``).
    tile_rows, tile_cols : int
        Sub-tile shape (one buffer of that many float64 values).

    Returns
    -------
    ndarray of shape (n_a, t), float64

    Notes
    -----
    Memory: the sub-tile buffer, the augmented copies of A and of one block
    of B (``d + 2`` columns) and the (n_a, t) result.  For ``"rbf"`` a
    squared distance below zero by rounding gives an exponent above zero by
    the same rounding (at most a few ulps of ``γ max ‖x‖²``), as the dense
    kernel's clamp would leave it at 1: the two agree to that rounding.
    """
    params = dict(params or {})
    A = as_block(A, dtype=np.float64)
    xp = namespace(A)
    if len(B_blocks) != len(V_blocks):
        raise ValueError(f"kernel_times: {len(B_blocks)} blocks of B but {len(V_blocks)} of V.")
    t = int(as_block(V_blocks[0]).shape[1]) if len(V_blocks) else 0
    out = xp.zeros((A.shape[0], t), dtype=xp.float64, device=A.device)
    tr, tc = max(1, int(tile_rows)), max(1, int(tile_cols))
    name = kernel if callable(kernel) else KERNEL_ALIASES.get(str(kernel), str(kernel))
    fused = name == "rbf"
    if fused:
        left, _ = augmented_rbf_rows(A, float(params["gamma"]))
        # one sub-tile buffer reused in place on NumPy; other namespaces allocate per sub-tile
        buf = np.empty(tr * tc) if xp is np else None
    for Bj, Vj in zip(B_blocks, V_blocks, strict=True):
        Bj = as_block(Bj, dtype=np.float64)
        Vj = as_block(Vj, dtype=np.float64)
        if fused:
            _, right = augmented_rbf_rows(Bj, float(params["gamma"]))
        for c0 in range(0, Bj.shape[0], tc):
            c1 = min(c0 + tc, Bj.shape[0])
            for r0 in range(0, A.shape[0], tr):
                r1 = min(r0 + tr, A.shape[0])
                if fused and buf is not None:
                    T = buf[: (r1 - r0) * (c1 - c0)].reshape(r1 - r0, c1 - c0)
                    np.matmul(left[r0:r1], right[c0:c1].T, out=T)
                    np.exp(T, out=T)
                elif fused:
                    T = xp.exp(left[r0:r1, ...] @ xp.matrix_transpose(right[c0:c1, ...]))
                else:
                    T = pairwise_kernel(A[r0:r1, ...], Bj[c0:c1, ...], kernel, **params)
                out[r0:r1, ...] += T @ Vj[c0:c1, ...]
    return out


def kernel_times_rows(block: Any, row_offset: int, centers: np.ndarray, coef: np.ndarray, *,
                      kernel: Any, params: dict) -> Any:
    """``K(block, centers) · coef`` as a row map: a kernel model's predictions for a block.

    Exists so that predicting from M centres is one map over row blocks
    (:func:`kernel_times` with one block of centres); the host centres and
    coefficients move to the block's device once per task.
    """
    return kernel_times(block, [asarray(centers, like=block, dtype=np.float64)],
                        [asarray(coef, like=block, dtype=np.float64)], kernel, params)


def kernel_times_rows_footprint(n_features: int, n_centers: int, n_targets: int,
                                kernel: str | Callable = "rbf") -> Footprint:
    """Memory of one :func:`kernel_times_rows` task.

    :func:`kernel_times_memory` of one block of M centres, plus the row and
    its t outputs per row, and the M × d centres and M × t coefficients
    fixed (their float64 copies on the block's device).
    """
    per_row, fixed = kernel_times_memory(n_features, n_centers, kernel)
    return Footprint(per_row=per_row + 8.0 * (n_features + n_targets),
                     fixed=fixed + 8.0 * (n_centers * n_features + n_centers * n_targets))
