"""Gram-matrix sparsification and quantisation, and orthogonal iteration.

The simplified Gram matrix of Achlioptas, McSherry and Schölkopf (2001) replaces
every entry K_ij by an independent, unbiased random variable:

* **sparsification** — ``K_ij / p`` with probability ``p``, else 0;
* **quantisation** — ``+b`` with probability ``1/2 + K_ij / (2b)``, else ``-b``,
  where ``b >= max |K_ij|``;
* both — keep with probability ``p``, then quantise to ``±b / p``.

The keep decision of entry (i, j) is ``hash_uniform(seed, "gram.keep", min(i, j),
max(i, j)) < p`` and the quantisation coin is ``hash_uniform(seed, "gram.sign",
min(i, j), max(i, j))``, so the simplified matrix is symmetric, reproducible and
the same whichever tiles compute it.  Kernel values themselves are evaluated on
canonical ``CELL x CELL`` cells aligned to global indices (:func:`kernel_tile`),
so every entry is bitwise the same for any tiling of the matrix.

Kernel tiles and their simplification run on the tile's array namespace; the
hash coins are host operands (pure functions of the global indices) moved to
the tile's device.  :func:`orthogonal_iteration` is a host driver.

References
----------
Achlioptas, McSherry, Schölkopf. Sampling techniques for kernel methods. NIPS 2001.
Füredi, Komlós. The eigenvalues of random symmetric matrices. Combinatorica 1981.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from distsketch.blas import single_threaded_blas
from distsketch.errors import ConfigError
from distsketch.ops.kernels import BOUNDED_KERNELS, kernel_diagonal
from distsketch.ops.namespace import as_block, asarray, namespace, to_host
from distsketch.ops.random import hash_uniform, random_rows

__all__ = [
    "CELL",
    "diagonal_block",
    "entry_variance_bound",
    "furedi_komlos_bound",
    "kernel_bound",
    "kernel_tile",
    "orthogonal_iteration",
    "simplify_entries",
    "simplify_tile",
]

CELL = 256


def kernel_bound(kernel: str | Callable) -> float | None:
    """An analytic bound on ``|k(x, y)|``, or None when it depends on the data.

    Parameters
    ----------
    kernel : str or callable

    Returns
    -------
    float or None
        1.0 for rbf, laplacian, cauchy and arccos0; None otherwise (then use
        ``max_i k(x_i, x_i)``, a bound for positive-definite kernels).
    """
    return 1.0 if isinstance(kernel, str) and kernel in BOUNDED_KERNELS else None


def diagonal_block(block: Any, row_offset: int, kernel: str | Callable, params: dict) -> np.ndarray:
    """The kernel diagonal K(x_i, x_i) of a row block as one column, shape (n, 1).

    The row map a quantised Gram reads its bound b >= max |K_ij| from when the
    kernel has no known bound (max over the diagonal, by Cauchy–Schwarz for a
    positive semi-definite kernel).
    """
    return kernel_diagonal(block, kernel, **params)[:, None]


def kernel_tile(kfun: Callable[[np.ndarray, np.ndarray], np.ndarray], A: np.ndarray, a0: int,
                B: np.ndarray, b0: int, cell: int = CELL) -> np.ndarray:
    """The kernel block K(A, B) computed on canonical cells of global indices.

    Each ``cell x cell`` cell of the global matrix is evaluated with the same
    shapes and positions whatever tile asks for it (rows outside the tile are
    zero-padded), so an entry's floating-point value depends only on (i, j)
    and not on the tiling.

    Parameters
    ----------
    kfun : callable
        ``kfun(X, Y) -> (len(X), len(Y))`` kernel block in float64.
    A : ndarray of shape (n_a, d)
        Rows ``a0 .. a0 + n_a`` of the data.
    a0 : int
        Global index of ``A[0]``.
    B : ndarray of shape (n_b, d)
        Rows ``b0 .. b0 + n_b``.
    b0 : int
        Global index of ``B[0]``.
    cell : int
        Cell size.

    Returns
    -------
    ndarray of shape (n_a, n_b), float64

    Notes
    -----
    Memory: the output plus two ``cell x d`` pads and one ``cell x cell``
    block.  Tiles aligned to multiples of ``cell`` waste no work.
    """
    A = as_block(A, dtype=np.float64)
    B = as_block(B, dtype=np.float64)
    xp = namespace(A, B)
    na, nb = A.shape[0], B.shape[0]
    out = xp.empty((na, nb), dtype=xp.float64, device=A.device)
    if na == 0 or nb == 0:
        return out
    d = A.shape[1]
    pa = xp.zeros((cell, d), dtype=xp.float64, device=A.device)
    pb = xp.zeros((cell, d), dtype=xp.float64, device=A.device)
    for ca in range(a0 // cell, (a0 + na - 1) // cell + 1):
        lo_a, hi_a = max(a0, ca * cell), min(a0 + na, (ca + 1) * cell)
        pa[...] = 0.0
        pa[lo_a - ca * cell: hi_a - ca * cell, ...] = A[lo_a - a0: hi_a - a0, ...]
        for cb in range(b0 // cell, (b0 + nb - 1) // cell + 1):
            lo_b, hi_b = max(b0, cb * cell), min(b0 + nb, (cb + 1) * cell)
            pb[...] = 0.0
            pb[lo_b - cb * cell: hi_b - cb * cell, ...] = B[lo_b - b0: hi_b - b0, ...]
            block = kfun(pa, pb)
            out[lo_a - a0: hi_a - a0, lo_b - b0: hi_b - b0] = \
                block[lo_a - ca * cell: hi_a - ca * cell, lo_b - cb * cell: hi_b - cb * cell]
    return out


def _check_p(p: float) -> None:
    if not 0.0 < p <= 1.0:
        raise ConfigError(f"sampling probability p={p} must be in (0, 1].")


def simplify_entries(K: np.ndarray, i: np.ndarray, j: np.ndarray, seed: int, p: float,
                     quantize: bool = False, bound: float | None = None
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Simplified values of given Gram entries.

    Parameters
    ----------
    K : ndarray of float
        Exact kernel values K_ij (any shape).
    i, j : ndarray of int
        Global indices of the entries, broadcastable with ``K``.
    seed : int
    p : float in (0, 1]
        Keep probability.
    quantize : bool
        Round kept values to ``±bound / p`` unbiasedly.
    bound : float, optional
        Quantisation level b with ``|K_ij| <= b`` (required if ``quantize``).

    Returns
    -------
    keep : ndarray of bool
        Which entries are non-zero in the simplified matrix.
    values : ndarray of float64
        The simplified values (0 where not kept); ``E[values] = K``.

    Raises
    ------
    ConfigError
        If ``quantize`` and some ``|K_ij| > bound``.
    """
    _check_p(p)
    i, j = np.asarray(to_host(i)), np.asarray(to_host(j))
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    K = as_block(K, dtype=np.float64)
    xp = namespace(K)
    keep = (xp.broadcast_to(asarray(hash_uniform(seed, "gram.keep", lo, hi) < p, like=K), K.shape)
            if p < 1.0 else xp.ones(K.shape, dtype=xp.bool, device=K.device))
    zero = 0.0 if xp is np else xp.zeros_like(K)
    if not quantize:
        return keep, xp.where(keep, K / p, zero)
    if bound is None or bound <= 0:
        raise ConfigError("quantize=True needs a positive bound b >= max |K_ij|.")
    big = xp.abs(K) > bound * (1 + 1e-9)
    if bool(xp.any(big)):
        raise ConfigError(
            f"kernel value {float(xp.max(xp.abs(K)[big])):.6g} exceeds the quantisation level "
            f"b={bound:.6g}; the kernel is not bounded by its diagonal (not positive definite?). "
            "Pass a larger quantize_bound."
        )
    u = asarray(hash_uniform(seed, "gram.sign", lo, hi), like=K)
    if xp is np:
        sign = np.where(u < 0.5 + K / (2.0 * bound), 1.0, -1.0)
    else:
        sign = xp.where(u < 0.5 + K / (2.0 * bound), xp.ones_like(K), -xp.ones_like(K))
    return keep, xp.where(keep, sign * (bound / p), zero)


def simplify_tile(K: np.ndarray, r0: int, c0: int, seed: int, p: float, quantize: bool = False,
                  bound: float | None = None, lower: bool = True
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Kept entries of one tile of the simplified Gram matrix, as COO triplets.

    Parameters
    ----------
    K : ndarray of shape (n_r, n_c)
        Exact kernel tile, rows ``r0 ..`` and columns ``c0 ..`` (global).
    r0, c0 : int
        Global index of the first row and column.
    seed, p, quantize, bound
        See :func:`simplify_entries`.
    lower : bool, default True
        Keep only entries with column <= row (the lower triangle incl. the
        diagonal), the half that a symmetric store holds.

    Returns
    -------
    rows : ndarray of int64
        Tile-local row numbers.
    cols : ndarray of int64
        Global column numbers.
    values : ndarray of float64
        Simplified values, in row-major order.

    Notes
    -----
    Memory: a few arrays of the tile's size (the hashes); the output is
    proportional to the kept entries (about ``p`` of the tile).
    """
    nr, nc = K.shape
    gi = np.arange(r0, r0 + nr, dtype=np.int64)[:, None]
    gj = np.arange(c0, c0 + nc, dtype=np.int64)[None, :]
    keep, vals = simplify_entries(K, gi, gj, seed, p, quantize, bound)
    xp = namespace(vals)
    if lower:
        keep = keep & (gj <= gi) if xp is np else keep & asarray(gj <= gi, like=vals)
    rows, cols = xp.nonzero(keep)
    return xp.astype(rows, xp.int64), xp.astype(cols, xp.int64) + c0, vals[rows, cols]


def entry_variance_bound(p: float, quantize: bool, bound: float) -> float:
    """Upper bound σ² on the variance of an entry of E = K̂ − K.

    Sparsification: K²(1/p − 1) <= b²(1 − p)/p; quantisation: b² − K² <= b²;
    both: b²/p − K² <= b²/p.

    Parameters
    ----------
    p : float
    quantize : bool
    bound : float
        b >= max |K_ij|.
    """
    _check_p(p)
    return bound**2 / p if quantize else bound**2 * (1.0 - p) / p


def furedi_komlos_bound(n: int, sigma: float) -> float:
    """The Füredi–Komlós spectral-norm bound ``4 σ √n`` on a random symmetric error matrix.

    Parameters
    ----------
    n : int
        Matrix size.
    sigma : float
        Entry standard deviation bound (√ of :func:`entry_variance_bound`).

    Returns
    -------
    float
        With high probability ‖K̂ − K‖₂ <= 4σ√n (for n large enough relative to
        the entry magnitude bound).
    """
    return 4.0 * float(sigma) * float(np.sqrt(n))


@single_threaded_blas
def orthogonal_iteration(matmat: Callable[[np.ndarray], np.ndarray], n: int, k: int, *,
                         seed: int, oversample: int = 8, max_iter: int = 300, tol: float = 1e-9
                         ) -> tuple[np.ndarray, np.ndarray, int]:
    """Top-k algebraic eigenpairs of a symmetric operator by orthogonal (subspace) iteration.

    Q₀ is a random orthonormal n × (k + oversample) basis (rows from
    :func:`~distsketch.ops.random.random_rows`, keyed by row); repeat
    ``Q ← orth((A + σI) Q)`` with a Rayleigh–Ritz step until the k largest
    Ritz pairs have residuals ‖A v − λ v‖ <= ``tol`` · max|θ|.  A may be
    indefinite (a sparsified or quantised Gram matrix is): σ ≥ 0 grows to the
    most negative Ritz value seen, so the iteration amplifies the largest
    *algebraic* eigenvalues instead of the most negative ones; for A ⪰ 0 it
    stays 0 (plain orthogonal iteration).

    Parameters
    ----------
    matmat : callable
        ``V (n, m) -> A V (n, m)`` for a symmetric A.
    n : int
        Size of A.
    k : int
        Number of eigenpairs.
    seed : int
        Seed of the start basis.
    oversample : int
        Extra basis vectors (faster convergence when λ_k ≈ λ_{k+1}).
    max_iter : int
        Iteration cap; reaching it without convergence warns
        (``sklearn.exceptions.ConvergenceWarning``) and returns the last Ritz pairs.
    tol : float
        Residual tolerance relative to the largest Ritz value in magnitude (the
        eigenvector error is about tol · max|θ| / gap).

    Returns
    -------
    eigenvalues : ndarray of shape (k,)
        The k largest (algebraic) Ritz values, sorted descending.
    eigenvectors : ndarray of shape (n, k)
    n_iter : int

    Notes
    -----
    Per iteration: one product A Q (the dominant cost; O(nnz(A)·m) for sparse A)
    and a QR of n × m (O(n m²)).  The error in the subspace decays like
    ((λ_{m+1} + σ) / (λ_k + σ))^t: slow when the top eigenvalues sit at the
    edge of a wide noise spectrum (a sparsified Gram matrix at small p), where
    Lanczos needs far fewer products.

    References
    ----------
    Golub, Van Loan. Matrix Computations, §8.2.4 (orthogonal iteration), §7.3
    (shifted power iteration).
    """
    m = min(n, k + oversample)
    Q, _ = np.linalg.qr(random_rows(seed, "kpca.orth-iter.Q0", 0, n, m))
    shift = 0.0
    n_iter, rel = 0, np.inf
    while True:
        n_iter += 1
        Z = np.asarray(matmat(Q), dtype=np.float64)
        T = Q.T @ Z
        vals, U = np.linalg.eigh(0.5 * (T + T.T))
        vals, U = vals[::-1], U[:, ::-1]  # descending: the top k are the largest algebraic
        # Rayleigh–Ritz residuals of the top k: ‖A v − λ v‖ with A v = Z u
        resid = np.linalg.norm(Z @ U[:, :k] - (Q @ U[:, :k]) * vals[None, :k], axis=0)
        scale = max(abs(vals[0]), abs(vals[-1]), 1e-300)
        rel = float(resid.max() / scale)
        if rel <= tol or n_iter >= max_iter:
            break
        if vals[-1] < -tol * scale:
            # a negative eigenvalue dominates in magnitude: shift it to about 0
            shift = max(shift, -float(vals[-1]))
        Q, _ = np.linalg.qr(Z @ U + shift * (Q @ U))
    if rel > tol:
        warnings.warn(
            f"orthogonal iteration did not converge in max_iter={max_iter} iterations: the "
            f"largest relative residual of the top {k} Ritz pairs is {rel:.2e} > tol={tol:.1e}. "
            "Increase max_iter, loosen tol, or use the Lanczos solver.",
            ConvergenceWarning, stacklevel=3)
    vals, V = vals[:k], Q @ U[:, :k]
    return vals, V, n_iter
