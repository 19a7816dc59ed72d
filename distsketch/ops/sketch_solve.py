"""Small dense solvers behind sketched kernel ridge regression and kernel preconditioners.

Everything here works on m × m (or s × m) matrices whose size does not
depend on the number of rows n, in the namespace of its array input (NumPy
with SciPy's LAPACK calls, or ``xp.linalg`` of CuPy on a GPU):

* a ridge *path*: one eigendecomposition of ZᵀZ serves every λ;
* centring of tree-reduced normal equations (intercept) and the validation
  error of a fold computed from its summary alone (no second pass);
* the Woodbury pieces of a low-rank-plus-ridge preconditioner
  ``P = Z Zᵀ + λI`` (a Cholesky factor of ``ZᵀZ + λI``, i.e. the R of a QR
  of ``[Z; √λ I]``) and the Falkon-style Nyström factor;
* the statistical dimension ``s_λ(K) = Σ σᵢ / (σᵢ + λ)`` and its estimate
  from a row sample's spectrum.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from distsketch.blas import single_threaded_blas
from distsketch.errors import ConfigError
from distsketch.ops.namespace import asarray, device_of, namespace, to_host, zeros

__all__ = [
    "centered_normal_equations",
    "estimate_statistical_dimension",
    "kernel_statistical_dimension",
    "ridge_path",
    "solve_path_from_eigh",
    "statistical_dimension",
    "summary_sse",
    "woodbury_apply",
    "woodbury_factor",
]


def centered_normal_equations(state: dict, fit_intercept: bool) -> tuple[np.ndarray, np.ndarray,
                                                                         np.ndarray, np.ndarray]:
    """Normal equations of a :class:`~distsketch.summaries.Covariance` state.

    Parameters
    ----------
    state : dict
        Keys ``n``, ``sum`` (m,), ``ztz`` (m, m), ``zty`` (m, t), ``ysum`` (t,).
    fit_intercept : bool
        Centre features and targets (the intercept is then ``ȳ − z̄ᵀw``).

    Returns
    -------
    A : ndarray of shape (m, m)
        ``Zcᵀ Zc`` (centred when ``fit_intercept``).
    b : ndarray of shape (m, t)
        ``Zcᵀ yc``.
    z_mean : ndarray of shape (m,)
        Feature means (zeros without intercept).
    y_mean : ndarray of shape (t,)
        Target means (zeros without intercept).
    """
    n = float(state["n"])
    like = state["ztz"]
    xp = namespace(like)
    ztz = asarray(state["ztz"], like=like, dtype=xp.float64)
    zty = asarray(state["zty"], like=like, dtype=xp.float64)
    m, t = zty.shape
    if not fit_intercept or n == 0:
        return ztz, zty, zeros(m, like), zeros(t, like)
    zm = asarray(state["sum"], like=like, dtype=xp.float64) / n
    ym = asarray(state["ysum"], like=like, dtype=xp.float64) / n
    # the outer products as NumPy's ``outer`` computes them: a[:, None] * b[None, :]
    A = ztz - n * (zm[:, None] * zm[None, :])
    b = zty - n * (zm[:, None] * ym[None, :])
    return (A + A.T) / 2, b, zm, ym


def solve_path_from_eigh(evals: np.ndarray, evecs: np.ndarray, b: np.ndarray,
                         alphas: np.ndarray) -> np.ndarray:
    """Ridge solutions ``(A + λI)⁻¹ b`` for every λ from ``A = V diag(e) Vᵀ``.

    Parameters
    ----------
    evals : ndarray of shape (m,)
    evecs : ndarray of shape (m, m)
    b : ndarray of shape (m, t)
    alphas : ndarray of shape (p,)

    Returns
    -------
    ndarray of shape (p, m, t)

    Notes
    -----
    Cost O(p m² t) after the O(m³) eigendecomposition, instead of p solves.
    """
    xp = namespace(evecs)
    evals = xp.clip(evals, 0.0, None)  # ZᵀZ is PSD; clip rounding noise
    vb = evecs.T @ b
    lams = np.asarray(to_host(alphas), dtype=np.float64).reshape(-1)
    out = xp.empty((len(lams), evecs.shape[0], b.shape[1]), dtype=xp.float64, device=device_of(evecs))
    for k, lam in enumerate(lams):
        out[k, ...] = evecs @ (vb / (evals + (lam if xp is np else float(lam)))[:, None])
    return out


@single_threaded_blas
def ridge_path(A: np.ndarray, b: np.ndarray, alphas: np.ndarray) -> np.ndarray:
    """``(A + λI)⁻¹ b`` for a path of λ values from one eigendecomposition.

    Parameters
    ----------
    A : ndarray of shape (m, m), symmetric PSD
    b : ndarray of shape (m, t)
    alphas : array_like of shape (p,), every entry > 0

    Returns
    -------
    ndarray of shape (p, m, t)
    """
    alphas = np.atleast_1d(np.asarray(to_host(alphas), dtype=np.float64))
    if np.any(~(alphas > 0)):
        raise ConfigError(f"ridge_path: every alpha must be > 0, got {alphas.tolist()}.")
    xp = namespace(A)
    evals, evecs = xp.linalg.eigh((A + A.T) / 2)
    return solve_path_from_eigh(evals, evecs, asarray(b, like=A, dtype=xp.float64), alphas)


def summary_sse(state: dict, W: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Sum of squared residuals of ``y ≈ Z W + c`` over the rows of a summary.

    ``Σ‖y − Zw − c‖² = yᵀy − 2wᵀZᵀy − 2c·Σy + wᵀZᵀZw + 2c·(Σz)ᵀw + n c²``,
    evaluated per target from the fold's state alone.

    Parameters
    ----------
    state : dict
        Covariance state with targets (``n``, ``sum``, ``ztz``, ``zty``,
        ``ysum``, ``yty``).
    W : ndarray of shape (p, m, t)
        Coefficients for p models.
    c : ndarray of shape (p, t)
        Intercepts.

    Returns
    -------
    ndarray of shape (p, t)
    """
    n = float(state["n"])
    ztz, zty = state["ztz"], state["zty"]
    zsum, ysum = state["sum"], state["ysum"]
    xp = namespace(ztz)
    W, c = asarray(W, like=ztz), asarray(c, like=ztz)
    yty = asarray(state["yty"], like=ztz)
    yty = xp.linalg.diagonal(yty) if yty.ndim == 2 else xp.reshape(yty, (-1,))
    # NumPy contracts with einsum (its summation order is the NumPy path's); the array
    # API has no einsum, so other namespaces use products and sums
    if xp is np:
        quad = np.einsum("pmt,mk,pkt->pt", W, ztz, W)
        cross = np.einsum("pmt,mt->pt", W, zty)
        zw = np.einsum("m,pmt->pt", zsum, W)
    else:
        quad = xp.sum(W * xp.matmul(ztz, W), axis=1)
        cross = xp.sum(W * zty[None, :, :], axis=1)
        zw = xp.sum(zsum[None, :, None] * W, axis=1)
    return yty[None, :] - 2 * cross - 2 * c * ysum[None, :] + quad + 2 * c * zw + n * c ** 2


@single_threaded_blas
def woodbury_factor(ztz: np.ndarray, lam: float) -> np.ndarray:
    """Upper Cholesky factor R with ``RᵀR = ZᵀZ + λI`` (the R of QR([Z; √λ I])).

    Parameters
    ----------
    ztz : ndarray of shape (m, m)
    lam : float, > 0

    Returns
    -------
    ndarray of shape (m, m), upper triangular
    """
    if not lam > 0:
        raise ConfigError(f"woodbury_factor: the regularisation must be > 0, got {lam}.")
    xp = namespace(ztz)
    if xp is not np:
        G = (ztz + ztz.T) / 2 + float(lam) * xp.eye(ztz.shape[0], dtype=ztz.dtype,
                                                     device=device_of(ztz))
        return xp.linalg.cholesky(G, upper=True)
    G = (ztz + ztz.T) / 2 + lam * np.eye(ztz.shape[0])
    return sla.cholesky(G, lower=False)


def woodbury_apply(Z: np.ndarray, R: np.ndarray, lam: float, V: np.ndarray) -> np.ndarray:
    """``(Z Zᵀ + λI)⁻¹ V = (V − Z (RᵀR)⁻¹ Zᵀ V) / λ`` with R from :func:`woodbury_factor`.

    Parameters
    ----------
    Z : ndarray of shape (n, m)
    R : ndarray of shape (m, m)
    lam : float
    V : ndarray of shape (n, t)

    Returns
    -------
    ndarray of shape (n, t)

    Notes
    -----
    O(n m t) flops; the m × m triangular solves are O(m² t).
    """
    xp = namespace(Z)
    U = Z.T @ V
    if xp is np:
        U = sla.solve_triangular(R, sla.solve_triangular(R, U, trans="T", lower=False),
                                 lower=False)
    else:  # the array API has no triangular solve: m × m general solves
        R = asarray(R, like=Z)
        U = xp.linalg.solve(R, xp.linalg.solve(R.T, U))
    return (V - Z @ U) / lam


@single_threaded_blas
def nystrom_factor(kmm: np.ndarray, jitter: float = 1e-10) -> np.ndarray:
    """Falkon's T, the upper Cholesky factor of ``K_MM + εI``: ``Z = K_nM T⁻¹`` has ``Z Zᵀ``
    the Nyström approximation; ε = ``jitter`` · trace/M keeps T defined for coinciding landmarks."""
    M = kmm.shape[0]
    xp = namespace(kmm)
    if xp is not np:
        eps = jitter * max(float(xp.linalg.trace(kmm)) / max(M, 1), 1e-300)
        return xp.linalg.cholesky((kmm + kmm.T) / 2 + eps * xp.eye(M, dtype=kmm.dtype,
                                                                   device=device_of(kmm)),
                                  upper=True)
    eps = jitter * max(np.trace(kmm) / max(M, 1), 1e-300)
    return sla.cholesky((kmm + kmm.T) / 2 + eps * np.eye(M), lower=False)


def statistical_dimension(eigenvalues: np.ndarray, lam: float) -> float:
    """``s_λ = Σᵢ σᵢ / (σᵢ + λ)`` over the eigenvalues σ of a PSD matrix."""
    xp = namespace(eigenvalues)
    sig = xp.clip(asarray(eigenvalues, like=eigenvalues, dtype=xp.float64), 0.0, None)
    return float(xp.sum(sig / (sig + float(lam))))


@single_threaded_blas
def estimate_statistical_dimension(Z_sample: np.ndarray, n_total: int, lam: float) -> float:
    """Estimate ``s_λ(Z Zᵀ)`` from a uniform row sample of Z.

    The nonzero eigenvalues of ``Z Zᵀ`` are those of ``ZᵀZ``; for a uniform
    sample of n_s rows, ``(n/n_s) Z_sᵀZ_s`` is an unbiased estimate of ``ZᵀZ``.

    Parameters
    ----------
    Z_sample : ndarray of shape (n_s, m)
    n_total : int
        Number of rows n of the full matrix.
    lam : float

    Returns
    -------
    float
    """
    xp = namespace(Z_sample)
    Zs = asarray(Z_sample, like=Z_sample, dtype=xp.float64)
    if Zs.shape[0] == 0:
        raise ConfigError("estimate_statistical_dimension needs at least one sampled row.")
    # the nonzero spectra of ZᵀZ (m × m) and Z Zᵀ (n_s × n_s) agree: use the smaller
    G = Zs @ Zs.T if Zs.shape[0] < Zs.shape[1] else Zs.T @ Zs
    ev = xp.linalg.eigvalsh(G) * (float(n_total) / Zs.shape[0])
    return statistical_dimension(ev, lam)


@single_threaded_blas
def kernel_statistical_dimension(k_sample: np.ndarray, n_total: int, lam: float) -> float:
    """Estimate ``d_λ = tr(K (K + λI)⁻¹)`` of an n × n kernel matrix from a row sample.

    For a uniform sample of s rows, the eigenvalues of ``(n/s) K_ss`` estimate
    the top s eigenvalues of K (the sample's kernel operator is an unbiased
    estimate of the data's), so ``Σ μ / (μ + λ)`` over them estimates d_λ.
    The estimate cannot exceed s: a value close to s means "at least s".

    Parameters
    ----------
    k_sample : ndarray of shape (s, s)
        The exact kernel on the sampled rows.
    n_total : int
        n.
    lam : float
        λ > 0.

    Returns
    -------
    float

    Notes
    -----
    O(s³) for the eigenvalues; nothing depends on n.

    References
    ----------
    Alaoui, Mahoney. Fast randomized kernel ridge regression with statistical
    guarantees. NeurIPS 2015 (d_λ and sampling).
    """
    xp = namespace(k_sample)
    Ks = asarray(k_sample, like=k_sample, dtype=xp.float64)
    if Ks.shape[0] == 0:
        raise ConfigError("kernel_statistical_dimension needs at least one sampled row.")
    ev = xp.linalg.eigvalsh((Ks + Ks.T) / 2) * (float(n_total) / Ks.shape[0])
    return statistical_dimension(ev, lam)
