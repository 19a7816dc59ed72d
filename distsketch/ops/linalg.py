"""Small dense linear-algebra helpers shared by per-block kernels."""

from __future__ import annotations

import numpy as np

from distsketch.ops.namespace import asarray, copy_array, namespace, zeros

__all__ = ["ROW_TILE", "fix_signs", "row_stable_matmul"]

ROW_TILE = 256


def fix_signs(V: np.ndarray, axis: int = 0) -> np.ndarray:
    """Flip each vector of V so that its largest-magnitude entry is positive.

    Eigen- and singular vectors are defined up to sign; this convention makes
    them a deterministic function of the matrix they come from.

    Parameters
    ----------
    V : ndarray of shape (p, k)
        The vectors.
    axis : {0, 1}, default 0
        The axis their entries run along: 0 when the vectors are the columns
        (``eigh``'s layout), 1 when they are the rows (``components_``).

    Returns
    -------
    ndarray of the shape and dtype of V
        A new array in V's namespace; a vector whose entries are all zero is
        left as is, and of entries tied in magnitude the first decides.
    """
    xp = namespace(V)
    V = asarray(V, like=V)
    if axis not in (0, 1) or V.ndim != 2:
        raise ValueError(f"fix_signs: needs a 2-D array and axis 0 or 1; got shape {V.shape}, "
                         f"axis={axis}.")
    if V.shape[0] * V.shape[1] == 0:
        return copy_array(V)
    # the lead entry of each vector gathered along ``axis`` (array-API calls: no fancy
    # indexing); multiplying by ±1 is exact, so every namespace gets the same bits
    lead = xp.expand_dims(xp.argmax(xp.abs(V), axis=axis), axis=axis)
    signs = xp.sign(xp.take_along_axis(V, lead, axis=axis))
    return V * xp.where(signs == 0, xp.ones_like(signs), signs)


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
    xp = namespace(X)
    W = asarray(W, like=X)
    n = X.shape[0]
    dt = xp.result_type(X.dtype, W.dtype)
    if out is None:
        out = xp.empty((n, W.shape[1]), dtype=dt) if xp is np else zeros((n, W.shape[1]), X,
                                                                         dtype=dt)
    if n == 0:
        return out
    start = row_offset
    stop = row_offset + n
    first_full = -(-start // tile) * tile
    last_full = (stop // tile) * tile
    pad = prod = None

    def padded(lo: int, hi: int) -> None:
        nonlocal pad, prod
        if pad is None:
            pad = zeros((tile, X.shape[1]), X, dtype=X.dtype)
        else:
            pad[...] = 0
        t0 = (lo // tile) * tile
        pad[lo - t0: hi - t0, ...] = X[lo - start: hi - start, ...]
        if xp is np:
            # the tile's product into one reused buffer: a fresh tile x m product per edge
            # costs page faults in a worker (Dask's nannies set MALLOC_TRIM_THRESHOLD_,
            # so every large temporary is a new mapping)
            if prod is None:
                prod = np.empty((tile, W.shape[1]), dtype=dt)
            np.matmul(pad, W, out=prod)
            out[lo - start: hi - start, ...] = prod[lo - t0: hi - t0, ...]
        else:
            out[lo - start: hi - start, ...] = (pad @ W)[lo - t0: hi - t0, ...]

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
        if xp is np:
            np.matmul(X[u - start: u - start + tile], W, out=out[u - start: u - start + tile])
        else:  # the array API has no ``out=``
            out[u - start: u - start + tile, ...] = X[u - start: u - start + tile, ...] @ W
    if last_full < stop:
        padded(last_full, stop)
    return out
