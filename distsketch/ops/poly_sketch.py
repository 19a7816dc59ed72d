"""TensorSRHT and the recursive-squaring polynomial sketch (Song et al. 2021, Algorithm 1).

TensorSRHT (Definition 2.9; Ahle et al. 2020) of ``u ⊗ v``::

    TensorSRHT(u ⊗ v) = (1/sqrt(m)) · (P1 H D1 u) ∘ (P2 H D2 v)

with H the ±1 Hadamard matrix, D1, D2 independent random signs and P1, P2
independent coordinate samples (with replacement).  It is computed without
forming ``u ⊗ v``: two FWHTs and an elementwise product.  The degree-q
generalisation multiplies q such transforms; E⟨z(x), z(y)⟩ = ⟨x, y⟩^q.

Algorithm 1 (recursive squaring) sketches x^{⊗p} with one base sketch T
(applied once, to x) and one degree-2 sketch per level::

    y_0 = T x,        y_l = S_l(y_{l-1} ⊗ y_{l-1})   (l = 1 .. floor(log2 p))

so y_l sketches x^{⊗2^l}.  A degree p that is not a power of two is assembled
from its binary representation, combining the pieces from the lowest set bit
upwards with independent degree-2 sketches C_l: acc ← C_l(acc ⊗ y_l).  The
cost per row is one T plus O(log p) degree-2 sketches of m-vectors, instead of
p of them for a tree with independent leaves.

Base sketches: ``"srht"`` (T = SRHT, S = TensorSRHT) or ``"tensorsketch"``
(T = CountSketch, S = degree-2 TensorSketch).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.fft

from distsketch.errors import ConfigError
from distsketch.ops.countsketch import countsketch, countsketch_transposed
from distsketch.ops.hadamard import next_pow2, srht
from distsketch.ops.namespace import contiguous, copy_array, namespace, typed_scalar

__all__ = [
    "BASES",
    "degree2_sketch",
    "leaf_sketch",
    "poly_sketch",
    "poly_sketch_combine",
    "tensor_srht_combine",
    "tensor_srht_linear",
]

BASES = ("srht", "tensorsketch")


def tensor_srht_linear(X: Any, seed: int, purpose: str, degree: int, m: int, D: int,
                       col_offset: int = 0, dtype: Any = None, row_offset: int = 0) -> np.ndarray:
    """The ``degree`` sampled Hadamard transforms ``P_l H D_l x`` side by side.

    Returns
    -------
    ndarray of shape (n, degree * m)
        Linear in X (column blocks may be summed).
    """
    parts = [srht(X, seed, f"{purpose}.t{l}", m, D, col_offset, replace=True, scale=1.0,
                  dtype=dtype, row_offset=row_offset) for l in range(degree)]
    if degree == 1:
        return parts[0]
    return namespace(parts[0]).concat(parts, axis=1)


def tensor_srht_combine(L: np.ndarray, degree: int, m: int) -> np.ndarray:
    """Elementwise product of the ``degree`` transforms, scaled by 1/sqrt(m): shape (n, m)."""
    out = copy_array(L[:, :m])
    for l in range(1, degree):
        out *= L[:, l * m:(l + 1) * m]
    out *= typed_scalar(1.0 / np.sqrt(m), out.dtype)
    return out


def degree2_sketch(U: np.ndarray, V: np.ndarray, seed: int, purpose: str, m: int,
                   base: str = "srht", row_offset: int = 0) -> np.ndarray:
    """Sketch of the rowwise tensor products ``U[i] ⊗ V[i]`` into m coordinates.

    Parameters
    ----------
    U, V : ndarray of shape (n, k)
    seed, purpose
        Key of the sketch.
    m : int
        Output size.
    base : {"srht", "tensorsketch"}
        TensorSRHT or degree-2 TensorSketch.

    Returns
    -------
    ndarray of shape (n, m)
        Bilinear in (U, V); the flattened tensor index is ``a * k + b`` (``np.kron`` order).
    """
    if base == "srht":
        D = next_pow2(U.shape[1])
        a = srht(U, seed, purpose + ".t0", m, D, replace=True, scale=1.0, row_offset=row_offset)
        a *= srht(V, seed, purpose + ".t1", m, D, replace=True, scale=1.0, row_offset=row_offset)
        a *= typed_scalar(1.0 / np.sqrt(m), a.dtype)
        return a
    if base == "tensorsketch":
        # bucket-major (m × n) layout straight from the sparse products, FFTs along axis 0:
        # the same numbers as CountSketches side by side + tensor_sketch_combine, one transpose
        xp = namespace(U, V)
        fft = scipy.fft if xp is np else xp.fft
        UT = contiguous(xp, xp.matrix_transpose(U))
        VT = UT if V is U else contiguous(xp, xp.matrix_transpose(V))
        P = fft.rfft(countsketch_transposed(UT, seed, purpose + ".cs0", m), axis=0)
        P *= fft.rfft(countsketch_transposed(VT, seed, purpose + ".cs1", m), axis=0)
        return contiguous(xp, xp.matrix_transpose(fft.irfft(P, n=m, axis=0)))
    raise ConfigError(f"unknown base sketch {base!r}; choose one of {BASES}.")


def leaf_sketch(X: Any, seed: int, purpose: str, m: int, D: int, base: str = "srht",
                col_offset: int = 0, dtype: Any = None, row_offset: int = 0) -> np.ndarray:
    """The base sketch T applied to (a column block of) X: shape (n, m), linear in X.

    For ``"srht"``, coordinates are sampled without replacement when ``m <= D``
    (D = padded input width) and with replacement otherwise.
    """
    if base == "srht":
        return srht(X, seed, purpose + ".T", m, D, col_offset, replace=m > D, dtype=dtype,
                    row_offset=row_offset)
    if base == "tensorsketch":
        return countsketch(X, seed, purpose + ".T", m, col_offset, dtype)
    raise ConfigError(f"unknown base sketch {base!r}; choose one of {BASES}.")


def poly_sketch_combine(Y0: np.ndarray, degree: int, seed: int, purpose: str, m: int,
                        base: str = "srht", row_offset: int = 0) -> np.ndarray:
    """Recursive squaring from the leaf sketch ``Y0 = T x`` to a sketch of x^{⊗degree}.

    Parameters
    ----------
    Y0 : ndarray of shape (n, m)
        Leaf sketches (possibly summed over column blocks).
    degree : int
        p >= 1.
    seed, purpose, m, base
        As in :func:`degree2_sketch`.

    Returns
    -------
    ndarray of shape (n, m)

    Notes
    -----
    floor(log2 p) squarings plus (popcount(p) − 1) combinations, each a
    degree-2 sketch of m-vectors: O(log p · m log m) per row.
    """
    if degree < 1:
        raise ConfigError(f"PolySketch degree must be >= 1; got {degree}.")
    acc = None
    y = Y0
    for level in range(int(degree).bit_length()):
        if level > 0:
            y = degree2_sketch(y, y, seed, f"{purpose}.S{level}", m, base, row_offset)
        if (degree >> level) & 1:
            acc = y if acc is None else degree2_sketch(acc, y, seed, f"{purpose}.C{level}", m, base,
                                                       row_offset)
    assert acc is not None
    return acc


def poly_sketch(X: Any, seed: int, purpose: str, degree: int, m: int, base: str = "srht",
                dtype: Any = None, row_offset: int = 0) -> np.ndarray:
    """Algorithm 1 on the rows of X (all columns present): shape (n, m)."""
    D = next_pow2(X.shape[1])
    Y0 = leaf_sketch(X, seed, purpose, m, D, base, 0, dtype, row_offset)
    return poly_sketch_combine(Y0, degree, seed, purpose, m, base, row_offset)
