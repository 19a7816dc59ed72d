"""TensorSketch: CountSketch of x⊗…⊗x computed by FFT (Pham & Pagh 2013).

With q independent CountSketches (h_l, s_l) the sketch of the degree-q tensor
power is the circular convolution of the q CountSketches of x, i.e. the
inverse FFT of the product of their FFTs.  It equals, exactly, the CountSketch
of the explicit φ(x) = x⊗…⊗x with bucket H = Σ h_l mod m and sign S = Π s_l.

The linear stage (q CountSketches) and the nonlinear stage (the FFT product)
are separate functions so that wide inputs can be sketched column block by
column block and summed before the product.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.fft
import scipy.sparse as sp

from distsketch.ops.countsketch import countsketch, countsketch_matrix

__all__ = ["FFT_ROWS", "tensor_sketch", "tensor_sketch_combine", "tensor_sketch_linear"]

FFT_ROWS = 2048


def tensor_sketch_linear(X: Any, seed: int, purpose: str, degree: int, m: int,
                         col_offset: int = 0, dtype: Any = None) -> np.ndarray:
    """The ``degree`` CountSketches of X side by side.

    Returns
    -------
    ndarray of shape (n, degree * m)
        Block ``l`` (columns ``l*m:(l+1)*m``) is CountSketch number ``l``.
    """
    if sp.issparse(X) or degree == 1:
        parts = [countsketch(X, seed, f"{purpose}.cs{l}", m, col_offset, dtype) for l in range(degree)]
        return np.concatenate(parts, axis=1) if degree > 1 else parts[0]
    dt = np.dtype(dtype or (X.dtype if X.dtype in (np.float32, np.float64) else np.float64))
    # one transposed copy of the block serves all q sparse-times-dense products
    XT = np.ascontiguousarray(np.asarray(X, dtype=dt).T)
    out = np.empty((X.shape[0], degree * m), dtype=dt)
    for l in range(degree):
        C = countsketch_matrix(seed, f"{purpose}.cs{l}", col_offset, col_offset + X.shape[1], m, dtype=dt)
        out[:, l * m:(l + 1) * m] = (C.T @ XT).T
    return out


def tensor_sketch_combine(C: np.ndarray, degree: int, m: int, out: np.ndarray | None = None,
                          block_rows: int = FFT_ROWS) -> np.ndarray:
    """Circular convolution of the ``degree`` CountSketches held in C.

    Parameters
    ----------
    C : ndarray of shape (n, degree * m)
        Output of :func:`tensor_sketch_linear` (possibly summed over column blocks).
    degree, m : int
    out : ndarray of shape (n, m), optional
    block_rows : int
        Rows per FFT batch (keeps the complex temporaries in cache-sized pieces).

    Returns
    -------
    ndarray of shape (n, m), dtype of C

    Notes
    -----
    O(degree · m log m) per row; memory O(block_rows · m) complex temporaries.
    FFTs along axis 1 are row-independent, so results do not depend on blocking.
    """
    n = C.shape[0]
    if out is None:
        out = np.empty((n, m), dtype=C.dtype)
    if degree == 1:
        out[...] = C[:, :m]
        return out
    for a in range(0, n, block_rows):
        b = min(n, a + block_rows)
        P = scipy.fft.rfft(C[a:b, :m], axis=1)
        for l in range(1, degree):
            P *= scipy.fft.rfft(C[a:b, l * m:(l + 1) * m], axis=1)
        out[a:b] = scipy.fft.irfft(P, n=m, axis=1)
    return out


def tensor_sketch(X: Any, seed: int, purpose: str, degree: int, m: int,
                  dtype: Any = None) -> np.ndarray:
    """TensorSketch of the rows of X (all columns present): shape (n, m)."""
    C = tensor_sketch_linear(X, seed, purpose, degree, m, 0, dtype)
    return tensor_sketch_combine(C, degree, m)
