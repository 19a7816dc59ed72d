"""Nyström building blocks as per-block functions (no Dask).

With landmarks L (m × d) and W = K(L, L), the Nyström approximation of the
kernel is G̃ = K(X, L) W_k⁺ K(L, X).  Writing W_k = U_k Λ_k U_kᵀ for the top-k
eigenpairs with eigenvalues above a relative tolerance, the *map*
M = U_k Λ_k^{-1/2} (m × k) gives features z(x) = K(x, L) M with
z(x)·z(y) = G̃(x, y).  MEKA's least-squares link matrices live here too.

Every function computes in the namespace of its array input (NumPy, or CuPy
on a GPU): the small m × m factorisations use ``xp.linalg`` off NumPy, and
host operands (landmarks, maps) are moved to the block's device.

References
----------
Williams, Seeger. Using the Nyström method to speed up kernel machines. NIPS 2001.
Si, Hsieh, Dhillon. Memory efficient kernel approximation. ICML 2014.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from distsketch.blas import single_threaded_blas
from distsketch.errors import ConfigError
from distsketch.footprint import Footprint
from distsketch.ops.kernels import kernel_function
from distsketch.ops.linalg import ROW_TILE, fix_signs
from distsketch.ops.namespace import asarray, densify, namespace, xp_dtype, zeros
from distsketch.ops.random import random_rows

__all__ = [
    "DEFAULT_RCOND",
    "centred_nystrom_map",
    "centred_nystrom_map_footprint",
    "ensemble_map",
    "inv_sqrt_map",
    "link_matrix",
    "link_matrix_closed_form",
    "nystrom_gram_footprint",
    "nystrom_map",
    "nystrom_map_footprint",
    "randomized_inv_sqrt_map",
    "row_stable_apply",
    "truncated_pinv",
]

# Eigenvalues below DEFAULT_RCOND * λ_max are treated as zero: their inverse
# square roots would amplify rounding noise in K(x, L) without adding accuracy.
DEFAULT_RCOND = 1e-10


def _sym(W: np.ndarray) -> np.ndarray:
    W = asarray(W, like=W, dtype=namespace(W).float64)
    if W.ndim != 2 or W.shape[0] != W.shape[1]:
        raise ConfigError(f"expected a square landmark kernel matrix, got shape {W.shape}.")
    return 0.5 * (W + W.T)


def _truncate(vals: np.ndarray, vecs: np.ndarray, rank: int | None,
              rcond: float) -> tuple[np.ndarray, np.ndarray]:
    xp = namespace(vals, vecs)
    if xp is np:
        order = np.argsort(vals)[::-1]
        vals, vecs = vals[order], vecs[:, order]
    else:
        order = xp.flip(xp.argsort(vals))
        vals, vecs = xp.take(vals, order), xp.take(vecs, order, axis=1)
    top = float(vals[0]) if vals.shape[0] else 0.0
    keep = vals > max(rcond * top, 0.0) if top > 0 else zeros(vals.shape, vals, dtype=xp.bool)
    r = int(xp.count_nonzero(keep))
    if rank is not None:
        r = min(r, int(rank))
    return vals[:r], fix_signs(vecs[:, :r], axis=0)


@single_threaded_blas
def inv_sqrt_map(W: np.ndarray, rank: int | None = None,
                 rcond: float = DEFAULT_RCOND) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalue-truncated inverse square root W_k^{+1/2} as an m × r map.

    Parameters
    ----------
    W : ndarray of shape (m, m)
        Kernel matrix of the landmarks (symmetrised here).
    rank : int, optional
        Keep at most the top ``rank`` eigenpairs.
    rcond : float
        Eigenvalues ``<= rcond * λ_max`` are dropped.

    Returns
    -------
    M : ndarray of shape (m, r)
        ``U_r Λ_r^{-1/2}``, so that ``M Mᵀ = W_r⁺``.
    eigenvalues : ndarray of shape (r,)
        The kept eigenvalues, in decreasing order.

    Notes
    -----
    O(m³) time, O(m²) memory; called once per fit on the driver.  The map
    stays in W's namespace (``xp.linalg.eigh`` off NumPy).
    """
    W = _sym(W)
    xp = namespace(W)
    vals, vecs = xp.linalg.eigh(W)
    vals, vecs = _truncate(vals, vecs, rank, rcond)
    return vecs / xp.sqrt(vals)[None, :], vals


@single_threaded_blas
def randomized_inv_sqrt_map(W: np.ndarray, rank: int, seed: int, *, n_oversamples: int = 10,
                            n_power_iter: int = 1, rcond: float = DEFAULT_RCOND
                            ) -> tuple[np.ndarray, np.ndarray]:
    """W_k^{+1/2} from a randomized eigendecomposition of W (Li, Kwok, Lu 2010).

    The range finder of Halko, Martinsson and Tropp with the power scheme:
    Q spans (W Wᵀ)^q W Ω = W^{2q+1} Ω for a Gaussian test matrix Ω of
    ``rank + n_oversamples`` columns, re-orthonormalised after every product
    with W; then W ≈ Q (QᵀWQ) Qᵀ is truncated to its top ``rank`` eigenpairs.

    Parameters
    ----------
    W : ndarray of shape (m, m)
        Kernel matrix of the landmarks (symmetrised here).
    rank : int
        k, eigenpairs kept.
    seed : int
        Ω (m × (k + p)) is a pure function of ``(seed, "nystrom.rsvd")``.
    n_oversamples : int, default 10
        p, extra columns of Ω (the MEKA paper's randomized Nyström uses 10).
    n_power_iter : int, default 1
        q, power iterations, each two products with W (the MEKA paper uses 1);
        ``n_power_iter=0, n_oversamples=0`` is the plain range finder QR(W Ω).
    rcond : float
        Eigenvalues ``<= rcond * λ_max`` are dropped.

    Returns
    -------
    M : ndarray of shape (m, r), eigenvalues : ndarray of shape (r,)
        ``M Mᵀ`` is the pseudo-inverse of the rank-r approximation, r <= k.

    Notes
    -----
    O(m² (k + p)(2q + 1)) time instead of O(m³) for ``eigh``.  With
    probability at least 1 − 6 p^{−p} (p >= 4), the range error is
    ‖(I − QQᵀ) W‖₂ <= (1 + 11 √(k + p) √m)^{1/(2q+1)} σ_{k+1}(W)
    (Halko et al., Cor. 10.9 with §10.4), and the rank-k truncation adds at
    most σ_{k+1} (Thm. 9.3).

    References
    ----------
    Halko, Martinsson, Tropp. Finding structure with randomness. SIAM Review 2011.
    Li, Kwok, Lu. Making large-scale Nyström approximation possible. ICML 2010.
    """
    W = _sym(W)
    xp = namespace(W)
    m = W.shape[0]
    ell = min(m, int(rank) + int(n_oversamples))
    # Ω is generated on the host (the same on every device) and moved once
    omega = asarray(random_rows(seed, "nystrom.rsvd", 0, m, ell), like=W)
    Q, _ = xp.linalg.qr(W @ omega)
    for _ in range(2 * int(n_power_iter)):
        Q, _ = xp.linalg.qr(W @ Q)
    B = Q.T @ W @ Q
    vals, vecs = xp.linalg.eigh(0.5 * (B + B.T))
    vals, vecs = _truncate(vals, Q @ vecs, rank, rcond)
    return vecs / xp.sqrt(vals)[None, :], vals


def ensemble_map(W: np.ndarray, n_experts: int, rank: int | None = None,
                 rcond: float = DEFAULT_RCOND) -> np.ndarray:
    """Block-diagonal map of an ensemble of Nyström experts with uniform weights.

    Landmarks ``e, e + p, e + 2p, ...`` (p = ``n_experts``) form expert e; each
    expert's map is scaled by sqrt(1/p), so that z(x)·z(y) is the average of the
    experts' approximations (Kumar, Mohri, Talwalkar 2009, uniform weights).

    Returns
    -------
    ndarray of shape (m, sum of expert ranks)
    """
    W = _sym(W)
    xp = namespace(W)
    m = W.shape[0]
    p = int(n_experts)
    if not 1 <= p <= m:
        raise ConfigError(f"n_ensemble={p} must be between 1 and the number of landmarks ({m}).")
    blocks = []
    for e in range(p):
        Me, _ = inv_sqrt_map(W[e::p, e::p], rank, rcond)
        full = zeros((m, Me.shape[1]), W)
        full[e::p, :] = Me / math.sqrt(p)
        blocks.append(full)
    return xp.concat(blocks, axis=1)


def row_stable_apply(func: Callable[[np.ndarray], np.ndarray], X: np.ndarray, n_out: int,
                     row_offset: int = 0, tile: int = ROW_TILE,
                     dtype: Any = np.float64) -> np.ndarray:
    """Apply a row-wise ``func`` on canonical tiles of global rows.

    ``func`` maps a (tile, d) array to (tile, n_out) and treats rows
    independently, but BLAS rounds a row differently depending on the matrix
    height and the row's position.  Rows are therefore always processed inside
    the full tile of ``tile`` rows aligned to multiples of ``tile`` in global
    numbering (partial tiles padded with zeros), so each row's result does not
    depend on how X was blocked.

    Parameters
    ----------
    func : callable
    X : ndarray of shape (n, d)
    n_out : int
    row_offset : int
        Global index of ``X[0]``.
    tile : int
    dtype : dtype
        Output dtype.

    Returns
    -------
    ndarray of shape (n, n_out)
    """
    xp = namespace(X)
    n = X.shape[0]
    out = np.empty((n, n_out), dtype=dtype) if xp is np else \
        zeros((n, n_out), X, dtype=xp_dtype(xp, dtype))
    if n == 0:
        return out
    start, stop = int(row_offset), int(row_offset) + n
    t = (start // tile) * tile
    pad = None
    while t < stop:
        lo, hi = max(start, t), min(stop, t + tile)
        if lo == t and hi == t + tile:
            res = func(X[lo - start: hi - start, :])
        else:
            if pad is None:
                pad = zeros((tile, X.shape[1]), X, dtype=X.dtype)
            else:
                pad[...] = 0
            pad[lo - t: hi - t, :] = X[lo - start: hi - start, :]
            res = func(pad)[lo - t: hi - t, :]
        out[lo - start: hi - start, :] = res if xp is np else xp.astype(res, out.dtype)
        t += tile
    return out


def nystrom_map(block: Any, row_offset: int, landmarks: np.ndarray, M: np.ndarray, *,
                kernel: Any = "rbf", params: dict | None = None, dtype: Any = None) -> np.ndarray:
    """Nyström features K(block, L) · M of one row block, chunking-invariant.

    Parameters
    ----------
    block : ndarray or sparse matrix of shape (b, d)
        Rows of X; with ``kernel="precomputed"`` the block *is* K(rows, L) (b × m).
    row_offset : int
        Global index of the block's first row.
    landmarks : ndarray of shape (m, d)
    M : ndarray of shape (m, r)
    kernel : str or callable
    params : dict
        Kernel parameters (gamma, degree, coef0).
    dtype : dtype, optional
        Output dtype (default: float32 for float32 blocks, else float64).

    Returns
    -------
    ndarray of shape (b, r)

    Notes
    -----
    Memory per task: the block plus 256 × (m + r) floats of tile workspace and
    the b × r output.
    """
    X = densify(block)
    xp = namespace(X)
    X = asarray(X, like=X)
    if dtype is None:
        dtype = xp.float32 if X.dtype == xp.float32 else xp.float64
    M = asarray(M, like=X, dtype=xp.float64)
    if isinstance(kernel, str) and kernel == "precomputed":
        def f(T: np.ndarray) -> np.ndarray:
            return asarray(T, like=X, dtype=xp.float64) @ M
    else:
        kfun = kernel_function(kernel, **(params or {}))
        L = asarray(landmarks, like=X, dtype=xp.float64)

        def f(T: np.ndarray) -> np.ndarray:
            return asarray(kfun(T, L), like=X, dtype=xp.float64) @ M
    return row_stable_apply(f, X, M.shape[1], row_offset, dtype=dtype)


def nystrom_map_footprint(n_features: int, n_landmarks: int, n_out: int) -> Footprint:
    """Memory of one :func:`nystrom_map` task (float64 worst case).

    Per row: the input row, its m kernel values and two r-wide rows (the
    tile's product and the output).  The landmarks and the map travel once
    per worker, not per task.

    Parameters
    ----------
    n_features, n_landmarks, n_out : int
        d, m and r.
    """
    return Footprint(per_row=8.0 * (n_features + n_landmarks + 2 * n_out))


def centred_nystrom_map(block: Any, row_offset: int, landmarks: np.ndarray, P: np.ndarray,
                        shift: np.ndarray, *, kernel: Any, params: dict) -> Any:
    """``K(block, L) · P − shift``: Nyström features projected and centred (kernel PCA).

    Exists so that a kernel PCA projection is one row map: the features of
    :func:`nystrom_map` with the projection ``P`` (m × k) folded into the map,
    and the projected mean ``shift`` (k,) subtracted in place on NumPy blocks
    (no second b × k array).

    Returns
    -------
    ndarray of shape (b, k)
        In the block's namespace and dtype rule (:func:`nystrom_map`).
    """
    out = nystrom_map(block, row_offset, landmarks, P, kernel=kernel, params=params)
    if not isinstance(out, np.ndarray):  # the host shift moves to the block's device
        return out - asarray(shift, like=out, dtype=out.dtype)
    out -= shift.astype(out.dtype)
    return out


def centred_nystrom_map_footprint(n_features: int, n_landmarks: int, n_out: int) -> Footprint:
    """Memory of one :func:`centred_nystrom_map` task: the row, its m kernel values, k outputs."""
    return Footprint(per_row=8.0 * (n_features + n_landmarks + n_out))


def nystrom_gram_footprint(n_features: int, n_landmarks: int, rank: int) -> Footprint:
    """Memory :func:`nystrom_map` adds to the task of a Gram pass (the map fused into ``ZᵀZ``).

    A chunk task of such a pass maps its block to r features a row and
    multiplies them into the r × r ``ZᵀZ`` of a
    :class:`~distsketch.summaries.covariance.Covariance` state, which
    declares the state itself.

    Parameters
    ----------
    n_features, n_landmarks, rank : int
        d, m (rows of the map) and r (its columns).

    Returns
    -------
    Footprint
        Per row: the row, two m-wide kernel rows and the r features; fixed:
        two r × r products and the m × r map.
    """
    r = rank
    return Footprint(per_row=8.0 * (n_features + 2 * n_landmarks + r),
                     fixed=8.0 * (2 * r * r + n_landmarks * r))


@single_threaded_blas
def truncated_pinv(A: np.ndarray, tol: float) -> np.ndarray:
    """Pseudo-inverse of A dropping singular values ``<= tol`` (an absolute level).

    An absolute level (set from the kernel's scale, not from A's own largest
    singular value) keeps a nearly-zero A from being inverted into a huge one.
    """
    xp = namespace(A)
    U, s, Vt = xp.linalg.svd(asarray(A, like=A, dtype=xp.float64), full_matrices=False)
    keep = s > tol
    if xp is not np:
        # singular values are descending: the kept ones are a leading slice
        r = int(xp.count_nonzero(keep))
        return (Vt[:r, :].T / s[:r][None, :]) @ U[:, :r].T
    return (Vt[keep].T / s[keep][None, :]) @ U[:, keep].T


def link_matrix(Ws: np.ndarray, G: np.ndarray, Wt: np.ndarray, *, tol: float = 0.0) -> np.ndarray:
    """Least-squares link matrix L minimising ‖G − Ws L Wtᵀ‖_F.

    Parameters
    ----------
    Ws : ndarray of shape (p_s, k_s)
        Basis rows of cluster s at the sampled rows v_s.
    G : ndarray of shape (p_s, p_t)
        The sampled kernel block K(x_{v_s}, x_{v_t}).
    Wt : ndarray of shape (p_t, k_t)
    tol : float
        Singular values of Ws and Wt at or below ``tol`` are treated as zero
        (the minimum-norm solution), so rank-deficient samples cannot blow L up.

    Returns
    -------
    ndarray of shape (k_s, k_t)
        ``Ws⁺ G (Wt⁺)ᵀ``, which equals the closed form of the MEKA paper when
        both bases have full column rank.

    Notes
    -----
    O((p_s + p_t) k² + p_s p_t k) time; sizes are (1 + ρ) k, independent of n.
    """
    xp = namespace(Ws)
    return truncated_pinv(Ws, tol) @ asarray(G, like=Ws, dtype=xp.float64) \
        @ truncated_pinv(asarray(Wt, like=Ws), tol).T


@single_threaded_blas
def link_matrix_closed_form(Ws: np.ndarray, G: np.ndarray, Wt: np.ndarray) -> np.ndarray:
    """The paper's closed form (WsᵀWs)⁻¹ Wsᵀ G Wt (WtᵀWt)⁻¹ (full column rank only)."""
    xp = namespace(Ws)
    Ws = asarray(Ws, like=Ws, dtype=xp.float64)
    Wt = asarray(Wt, like=Ws, dtype=xp.float64)
    left = xp.linalg.solve(Ws.T @ Ws, Ws.T)
    right = xp.linalg.solve(Wt.T @ Wt, Wt.T).T
    return left @ asarray(G, like=Ws, dtype=xp.float64) @ right
