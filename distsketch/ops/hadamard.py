"""Fast Walsh–Hadamard transform and the subsampled randomized Hadamard transform.

The SRHT of Definition 2.7 in Song et al. (2021),

    SRHT(x) = sqrt(D/m) · P · H · D_s · x   (H normalised, i.e. H_{kj} = ±1/sqrt(D)),

uses signs ``D_s`` keyed by global input column and ``m`` sampled coordinates
(bottom-m hash priorities, i.e. without replacement, so the rows of the
operator are orthogonal) keyed by the Hadamard coordinate: both pure functions
of (seed, purpose, index).

Signs, coordinates and explicit Hadamard entries are host operands (pure
functions of the seed and index); blocks of another namespace get them on
their device and run the same Kronecker-factored GEMMs with plain ``@``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
import scipy.sparse as sp

from distsketch.errors import ConfigError
from distsketch.ops.linalg import row_stable_matmul
from distsketch.ops.namespace import (
    as_block,
    asarray,
    assign,
    contiguous,
    float_dtype,
    host_dtype,
    is_numpy,
    namespace,
    to_host,
    typed_scalar,
    zeros,
)
from distsketch.ops.random import hash_sign, hash_uniform

__all__ = [
    "fwht",
    "hadamard_entries",
    "next_pow2",
    "srht",
    "srht_apply",
    "srht_coordinates",
    "srht_operator",
    "srht_signs",
]

_COL_TILE = 4096
_GEMM_MAX = 256
_GEMM_TILE = 256


def next_pow2(n: int) -> int:
    """Smallest power of two >= n (1 for n <= 1)."""
    return 1 << max(0, int(n - 1).bit_length())


@lru_cache(maxsize=32)
def _sylvester(D: int, dtype: str) -> np.ndarray:
    H = np.ones((1, 1))
    while H.shape[0] < D:
        H = np.block([[H, H], [H, -H]])
    H = H.astype(dtype)
    H.setflags(write=False)
    return H


def _gemm(X: Any, H: Any, row_offset: int) -> Any:
    """``X @ H`` in row-stable tiles on NumPy (bits independent of the blocking), else one product."""
    if is_numpy(namespace(X)):
        return row_stable_matmul(X, H, row_offset, tile=_GEMM_TILE)
    return X @ H


def _fwht_rows(X: Any, row_offset: int) -> Any:
    """``X @ H_D`` for a C-contiguous (N, D) array whose first row is global row ``row_offset``."""
    xp = namespace(X)
    N, D = X.shape
    if D <= _GEMM_MAX:
        return _gemm(X, asarray(_sylvester(D, host_dtype(X.dtype).str), like=X), row_offset)
    # H_D = H_a ⊗ H_rest (Sylvester order): transform the trailing factor of every row, then
    # the leading one after a transpose.  Small dense GEMMs run ~50x faster per element than
    # butterfly passes in NumPy; row_stable_matmul keeps each row's rounding independent of blocking.
    k = D.bit_length() - 1
    a = 1 << min(k - k // 2, 6)   # balanced factors, a <= 64
    rest = D // a
    Y = xp.reshape(_fwht_rows(xp.reshape(X, (N * a, rest)), row_offset * a), (N, a, rest))
    Z = xp.reshape(contiguous(xp, xp.permute_dims(Y, (0, 2, 1))), (N * rest, a))
    Z = _gemm(Z, asarray(_sylvester(a, host_dtype(X.dtype).str), like=X), row_offset * rest)
    return xp.reshape(contiguous(xp, xp.permute_dims(xp.reshape(Z, (N, rest, a)), (0, 2, 1))),
                      (N, D))


def fwht(X: np.ndarray, normalize: bool = False, row_offset: int = 0) -> np.ndarray:
    """Fast Walsh–Hadamard transform along the last axis: ``X @ H`` (result written into X).

    Parameters
    ----------
    X : ndarray of shape (n, D), D a power of two, float dtype
        Overwritten with ``X @ H`` (H symmetric ±1, Sylvester ordering).
    normalize : bool
        Scale by 1/sqrt(D) (orthonormal H).
    row_offset : int
        Global index of X's first row (the result of a row is then bitwise
        the same for any row blocking).

    Returns
    -------
    ndarray
        ``X`` itself.

    Notes
    -----
    D <= 256 is one GEMM with the explicit H; larger D is factored as
    H_a ⊗ H_{D/a} (a <= 64, recursively), one GEMM per factor over all rows
    with a transposed copy between factors (2·D·(a + D/a) flops per row for
    two factors); memory about two extra n × D buffers.  In NumPy this is
    2–5x slower than scipy.fft's rfft of the same length.
    """
    D = X.shape[-1]
    if D & (D - 1) or X.ndim != 2:
        raise ConfigError(f"fwht needs a 2-D array with a power-of-two length; got shape {X.shape}. "
                          "Pad with next_pow2 first.")
    xp = namespace(X)
    X[...] = _fwht_rows(contiguous(xp, X), row_offset)
    if normalize:
        X *= typed_scalar(1.0 / np.sqrt(D), X.dtype)
    return X


def hadamard_entries(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Entries ``H[rows[:, None], cols[None, :]]`` of the unnormalised Hadamard matrix (±1)."""
    parity = np.bitwise_count(np.bitwise_and(np.asarray(rows, dtype=np.uint64)[:, None],
                                             np.asarray(cols, dtype=np.uint64)[None, :])) & 1
    return 1.0 - 2.0 * parity.astype(np.float64)


@lru_cache(maxsize=64)
def _coords(seed: int, key: str, D: int, m: int, replace: bool) -> np.ndarray:
    # key: the full purpose of the hash stream (purpose + ".P" for srht_coordinates)
    if replace:
        u = hash_uniform(seed, key, np.arange(m, dtype=np.int64))
        out = np.minimum((u * D).astype(np.int64), D - 1)
    else:
        pri = hash_uniform(seed, key, np.arange(D, dtype=np.int64))
        # bottom-m priorities, listed in priority order: a uniform sample without replacement
        sel = np.argpartition(pri, m - 1)[:m] if m < D else np.arange(D)
        out = sel[np.argsort(pri[sel], kind="stable")].astype(np.int64)
    out.setflags(write=False)
    return out


def srht_coordinates(seed: int, purpose: str, D: int, m: int, replace: bool = False) -> np.ndarray:
    """The ``m`` sampled Hadamard coordinates (P of the SRHT), int64 in ``[0, D)``.

    Without replacement (default) ``m <= D`` is required.
    """
    if not replace and m > D:
        raise ConfigError(
            f"SRHT: n_components={m} exceeds the padded dimension D={D} (next power of two of "
            "the input width); choose n_components <= D or use a TensorSketch/CountSketch.")
    return _coords(int(seed), str(purpose) + ".P", int(D), int(m), bool(replace))


def srht_signs(seed: int, purpose: str, start: int, stop: int) -> np.ndarray:
    """Random signs (D_s of the SRHT) of global input columns ``start:stop`` (read-only)."""
    return _signs(int(seed), str(purpose) + ".D", int(start), int(stop))


@lru_cache(maxsize=64)
def _signs(seed: int, key: str, start: int, stop: int) -> np.ndarray:
    # rebuilt per process once: tasks apply the same operator to many row slices
    out = hash_sign(seed, key, np.arange(start, stop, dtype=np.int64))
    out.setflags(write=False)
    return out


def _srht_dense(X: np.ndarray, signs: np.ndarray, P: np.ndarray, D: int, scale: Any,
                dt: np.dtype, row_offset: int) -> np.ndarray:
    """``scale · (pad_D(X · D_s) @ H)[:, P]`` by one FWHT of the zero-padded rows."""
    xp = namespace(X)
    w = X.shape[1]
    buf = zeros((X.shape[0], D), X, dtype=dt)
    assign(xp, buf, (slice(None), slice(0, w)), "multiply", X, asarray(signs[:w], like=X, dtype=dt))
    # np.take gathers columns ~5x faster than fancy indexing (same values)
    out = xp.take(_fwht_rows(buf, row_offset), asarray(P, like=X), axis=1)
    out *= scale
    return out


def srht(X: Any, seed: int, purpose: str, m: int, D: int, col_offset: int = 0,
         replace: bool = False, scale: float | None = None, dtype: Any = None,
         row_offset: int = 0) -> np.ndarray:
    """Apply ``scale · P · H · D_s`` (H unnormalised ±1) to the rows of X.

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n, w)
        Column ``c`` is global input column ``col_offset + c``; all columns
        must lie in ``[0, D)``.
    seed, purpose
        Key of the operator.
    m : int
        Number of sampled coordinates.
    D : int
        Padded dimension (a power of two).
    col_offset : int
        Global index of X's first column.
    replace : bool
        Sample coordinates with replacement (TensorSRHT) or without (SRHT).
    scale : float, optional
        Output scale; default ``1/sqrt(m)``, which with the ±1 matrix equals
        ``sqrt(D/m)`` times the normalised H of Definition 2.7.
    dtype : dtype, optional
    row_offset : int
        Global index of X's first row (keeps dense products chunking-invariant).

    Returns
    -------
    ndarray of shape (n, m)

    Notes
    -----
    A dense block holding all columns uses the FWHT: O(n·D·log D) time and an
    n × D buffer.  Column blocks and sparse input use the explicit entries of
    the sampled rows of H: O(w·m) per dense row (tiled), O(nnz·m) for sparse.
    The operator is linear, so column blocks may be sketched separately and
    summed.
    """
    dt = float_dtype(X, dtype)
    n, w = X.shape
    if col_offset + w > D:
        raise ConfigError(f"SRHT: input columns {col_offset}..{col_offset + w} exceed D={D}.")
    P = srht_coordinates(seed, purpose, D, m, replace)
    signs = srht_signs(seed, purpose, col_offset, col_offset + w)
    sc = typed_scalar(1.0 / np.sqrt(m) if scale is None else scale, dt)
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        cols = np.unique(X.indices)
        out = np.zeros((n, m), dtype=dt)
        for t in range(0, cols.size, _COL_TILE):
            c = cols[t:t + _COL_TILE]
            Hc = (hadamard_entries(c + col_offset, P) * signs[c][:, None]).astype(dt)
            out += np.asarray(X[:, c].astype(dt) @ Hc)
        out *= sc
        return out
    X = as_block(X)
    if col_offset == 0 and w * 4 >= D and D <= 1 << 20:
        return _srht_dense(X, signs, P, D, sc, dt, row_offset)
    xp = namespace(X)
    out = xp.zeros((n, m), dtype=dt, device=X.device)
    # Per-row sums in a fixed column-tile order keep rows independent of the blocking.
    for t in range(0, w, _COL_TILE):
        c = np.arange(t, min(w, t + _COL_TILE))
        Hc = (hadamard_entries(c + col_offset, P) * signs[c][:, None]).astype(host_dtype(dt))
        out += _gemm(asarray(contiguous(xp, X[:, t:t + c.size]), like=X, dtype=dt),
                     asarray(Hc, like=X), row_offset)
    out *= sc
    return out


def srht_operator(seed: int, m: int, s: int, purpose: str = "srht") -> tuple[np.ndarray, np.ndarray]:
    """Signs and sampled coordinates of an SRHT from m to s coordinates, as arrays.

    Parameters
    ----------
    seed : int
    m : int
        Input dimension (padded to the next power of two M).
    s : int
        Output dimension, ``1 <= s <= M``.
    purpose : str
        Key of the randomness (signs ``purpose + ".sign"``, coordinate
        priorities ``purpose + ".index"``).

    Returns
    -------
    signs : ndarray of shape (M,)
        Rademacher diagonal D.
    index : ndarray of shape (s,), int64
        Sampled coordinates (without replacement, sorted): the s smallest of
        per-coordinate hash priorities.
    """
    M = next_pow2(max(int(m), 1))
    if not 1 <= s <= M:
        raise ConfigError(f"srht_operator: output size {s} must be in [1, {M}] for m={m}.")
    signs = _signs(int(seed), str(purpose) + ".sign", 0, M).copy()
    index = np.sort(_coords(int(seed), str(purpose) + ".index", M, int(s), False))
    return signs, index


def srht_apply(Z: np.ndarray, signs: np.ndarray, index: np.ndarray, row_offset: int = 0) -> np.ndarray:
    """``z ↦ √(M/s) (H D z)[index]`` for each row z of Z, H orthonormal (inner products kept
    in expectation).

    Parameters
    ----------
    Z : ndarray of shape (n, m)
    signs, index : from :func:`srht_operator`
    row_offset : int
        Global index of Z's first row (the result of a row is then bitwise the
        same for any row blocking).

    Returns
    -------
    ndarray of shape (n, s), float64

    Notes
    -----
    One FWHT of the zero-padded rows (:func:`fwht`): O(n·M·log M) time and an
    n × M float64 buffer.
    """
    M = signs.shape[0]
    Z = as_block(Z, dtype=np.float64)
    dt = float_dtype(Z)
    # √(M/s) · 1/√M with the ±1 matrix H; signs and index are host operands of the model
    return _srht_dense(Z, np.asarray(to_host(signs)), np.asarray(to_host(index)), M,
                       typed_scalar(1.0 / np.sqrt(len(index)), dt), dt, row_offset)
