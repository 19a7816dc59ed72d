"""TensorSketch: CountSketch of x⊗…⊗x computed by FFT (Pham & Pagh 2013).

With q independent CountSketches (h_l, s_l) the sketch of the degree-q tensor
power is the circular convolution of the q CountSketches of x, i.e. the
inverse FFT of the product of their FFTs.  It equals, exactly, the CountSketch
of the explicit φ(x) = x⊗…⊗x with bucket H = Σ h_l mod m and sign S = Π s_l.

The linear stage (q CountSketches) and the nonlinear stage (the FFT product)
are separate functions so that wide inputs can be sketched column block by
column block and summed before the product.

NumPy blocks use SciPy's FFT; other namespaces their own ``xp.fft`` extension
(same transforms, rounding of that library).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.fft
import scipy.sparse as sp

from distsketch.footprint import Footprint
from distsketch.ops.countsketch import countsketch, countsketch_transposed
from distsketch.ops.namespace import as_block, asarray, float_dtype, namespace, typed_scalar

__all__ = ["FFT_ROWS", "FUSED_ROWS", "sketch_combine_footprint", "sketch_linear_footprint",
           "sketch_map_footprint", "tensor_sketch", "tensor_sketch_combine", "tensor_sketch_dense",
           "tensor_sketch_linear"]

FFT_ROWS = 2048
# rows per slice of the fused kernel: q·m-wide temporaries of this many rows stay in cache
FUSED_ROWS = 128


def sketch_linear_footprint(n_columns: int, n_linear: int) -> Footprint:
    """Memory of one linear-stage task of a two-stage polynomial sketch on a column block.

    Per row: the block's ``n_columns`` values and the ``n_linear``-wide
    linear stage with its partial sum, float64 worst case.  Holds for every
    sketch built as ``combine(linear(x))`` (TensorSketch, TensorSRHT,
    PolySketch and the Taylor-series sketches over them).
    """
    return Footprint(per_row=8.0 * (n_columns + 2 * n_linear))


def sketch_combine_footprint(n_features: int, padded_width: int, n_linear: int,
                             n_out: int) -> Footprint:
    """Per-row memory of a two-stage polynomial sketch: the input row, the padded
    Hadamard buffer (``padded_width``; 0 without one), the linear stage and its sum, and
    the output, float64 worst case."""
    return Footprint(per_row=8.0 * (n_features + padded_width + 2 * n_linear + n_out))


def sketch_map_footprint(n_features: int, padded_width: int, n_linear: int,
                         n_out: int) -> Footprint:
    """Memory of one task of a two-stage polynomial sketch applied to whole rows.

    :func:`sketch_combine_footprint` per row, and fixed: two complex
    (``FFT_ROWS`` × m/2 + 1) spectra per FFT product, the FFT temporaries
    being bounded by ``FFT_ROWS`` rows whatever the block.

    Parameters
    ----------
    n_features, padded_width, n_linear, n_out : int
        d, the Hadamard width (0: none), the linear stage's width and m.
    """
    return (sketch_combine_footprint(n_features, padded_width, n_linear, n_out)
            + Footprint(fixed=48.0 * FFT_ROWS * n_out))


def tensor_sketch_linear(X: Any, seed: int, purpose: str, degree: int, m: int,
                         col_offset: int = 0, dtype: Any = None) -> np.ndarray:
    """The ``degree`` CountSketches of X side by side.

    Returns
    -------
    ndarray of shape (n, degree * m)
        Block ``l`` (columns ``l*m:(l+1)*m``) is CountSketch number ``l``.
    """
    xp = namespace(X)
    if sp.issparse(X) or degree == 1 or xp is not np:
        parts = [countsketch(X, seed, f"{purpose}.cs{l}", m, col_offset, dtype) for l in range(degree)]
        if degree == 1:
            return parts[0]
        return np.concatenate(parts, axis=1) if xp is np else xp.concat(parts, axis=1)
    dt = float_dtype(X, dtype)
    # one transposed copy of the block serves all q sparse-times-dense products
    XT = np.ascontiguousarray(np.asarray(X, dtype=dt).T)
    out = np.empty((X.shape[0], degree * m), dtype=dt)
    for l in range(degree):
        out[:, l * m:(l + 1) * m] = countsketch_transposed(XT, seed, f"{purpose}.cs{l}", m, col_offset).T
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
    xp = namespace(C)
    fft = scipy.fft if xp is np else xp.fft
    n = C.shape[0]
    if out is None:
        out = xp.empty((n, m), dtype=C.dtype, device=C.device)
    if degree == 1:
        out[...] = C[:, :m]
        return out
    for a in range(0, n, block_rows):
        b = min(n, a + block_rows)
        P = fft.rfft(C[a:b, :m], axis=1)
        for l in range(1, degree):
            P *= fft.rfft(C[a:b, l * m:(l + 1) * m], axis=1)
        out[a:b, ...] = fft.irfft(P, n=m, axis=1)
    return out


def tensor_sketch_dense(X: np.ndarray, seed: int, purpose: str, degree: int, m: int,
                        scale: float = 1.0, bias: np.ndarray | None = None, dtype: Any = None,
                        block_rows: int = FUSED_ROWS) -> np.ndarray:
    """Both stages fused, for a dense block holding all columns.

    Equal, bit for bit, to ``tensor_sketch_combine(tensor_sketch_linear(X) · scale + bias)``.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    seed, purpose, degree, m
        As in :func:`tensor_sketch_linear`.
    scale : float
        Factor applied to the linear stage (sqrt(γ) of the polynomial kernel).
    bias : ndarray of shape (degree * m,), optional
        Added to the scaled linear stage (the image of constant coordinates).
    dtype : dtype, optional
    block_rows : int
        Rows per slice.

    Returns
    -------
    ndarray of shape (n, m)

    Notes
    -----
    Slices of ``block_rows`` rows go through the whole pipeline in the
    bucket-major (m × rows) layout that the sparse CountSketch product
    produces, with FFTs along axis 0: one transposed copy per slice instead of
    one per CountSketch, and every temporary stays in cache.  Each column of
    a slice is an independent transform, so results do not depend on slicing.
    """
    xp = namespace(X)
    dt = float_dtype(X, dtype)
    if xp is not np:
        # the two stages one after the other (the fusion is a CPU cache layout)
        C = tensor_sketch_linear(X, seed, purpose, degree, m, 0, dt)
        if scale != 1.0:
            C *= typed_scalar(scale, dt)
        if bias is not None:
            C += asarray(bias, like=C, dtype=dt)
        return tensor_sketch_combine(C, degree, m)
    n = X.shape[0]
    out = np.empty((n, m), dtype=dt)
    sc = dt.type(scale)
    b = None if bias is None else np.asarray(bias, dtype=dt).reshape(degree, m, 1)
    for a in range(0, n, block_rows):
        XT = np.ascontiguousarray(np.asarray(X[a:a + block_rows], dtype=dt).T)
        P: Any = None
        for l in range(degree):
            Y = countsketch_transposed(XT, seed, f"{purpose}.cs{l}", m)
            if scale != 1.0:
                Y *= sc
            if b is not None:
                Y += b[l]
            if degree == 1:
                P = Y
                break
            F = scipy.fft.rfft(Y, axis=0)
            P = F if P is None else np.multiply(P, F, out=P)
        out[a:a + block_rows] = (P if degree == 1 else scipy.fft.irfft(P, n=m, axis=0)).T
    return out


def tensor_sketch(X: Any, seed: int, purpose: str, degree: int, m: int,
                  dtype: Any = None) -> np.ndarray:
    """TensorSketch of the rows of X (all columns present): shape (n, m)."""
    if not sp.issparse(X):
        return tensor_sketch_dense(as_block(X), seed, purpose, degree, m, dtype=dtype)
    C = tensor_sketch_linear(X, seed, purpose, degree, m, 0, dtype)
    return tensor_sketch_combine(C, degree, m)
