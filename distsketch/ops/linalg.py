"""Small dense linear-algebra helpers shared by per-block kernels."""

from __future__ import annotations

import numpy as np

__all__ = ["ROW_TILE", "row_stable_matmul"]

ROW_TILE = 256


def row_stable_matmul(X: np.ndarray, W: np.ndarray, row_offset: int = 0,
                      out: np.ndarray | None = None, tile: int = ROW_TILE) -> np.ndarray:
    """``X @ W`` whose every row is bitwise independent of how rows are blocked.

    BLAS GEMM rounds a row differently depending on the matrix height and the
    row's position in it (edge micro-kernels).  Here rows are multiplied in
    canonical tiles aligned to multiples of ``tile`` in *global* row numbers;
    a partial tile at a block edge is padded to the full tile with the row at
    its global position, so each row always meets the same GEMM shape and
    position.  Cost: at most two extra padded tiles per block.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    W : ndarray of shape (d, m)
    row_offset : int
        Global index of ``X[0]``.
    out : ndarray of shape (n, m), optional
    tile : int

    Returns
    -------
    ndarray of shape (n, m), dtype of ``X @ W``
    """
    n = X.shape[0]
    dt = np.result_type(X.dtype, W.dtype)
    if out is None:
        out = np.empty((n, W.shape[1]), dtype=dt)
    if n == 0:
        return out
    start = row_offset
    stop = row_offset + n
    first_full = -(-start // tile) * tile
    last_full = (stop // tile) * tile
    pad = None

    def padded(lo: int, hi: int) -> None:
        nonlocal pad
        if pad is None:
            pad = np.zeros((tile, X.shape[1]), dtype=X.dtype)
        else:
            pad[...] = 0
        t0 = (lo // tile) * tile
        pad[lo - t0: hi - t0] = X[lo - start: hi - start]
        out[lo - start: hi - start] = (pad @ W)[lo - t0: hi - t0]

    if first_full >= last_full:
        # the block lies within at most two tiles
        mid = min(stop, first_full)
        padded(start, mid)
        if mid < stop:
            padded(mid, stop)
        return out
    if start < first_full:
        padded(start, first_full)
    # full tiles are multiplied one by one: the same GEMM shape every time
    for u in range(first_full, last_full, tile):
        np.matmul(X[u - start: u - start + tile], W, out=out[u - start: u - start + tile])
    if last_full < stop:
        padded(last_full, stop)
    return out
