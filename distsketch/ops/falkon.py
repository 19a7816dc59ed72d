"""Falkon's linear algebra: the M × M preconditioner, one block's kernel products, the CG step.

Nyström kernel ridge regression restricted to M centres solves

    H α = K_nMᵀ y,   H = K_nMᵀ K_nM + λ n K_MM                         (1)

(the minimiser of ‖K_nM α − y‖² + λ n αᵀ K_MM α).  Falkon preconditions it
with ``P = n Tᵀ A ᵀA T = (n/M) K_MM² + λ n K_MM``, where ``T = chol(K_MM)``
and ``A = chol(T Tᵀ/M + λ I)`` (upper factors): when the centres are a
uniform sample, ``K_nMᵀ K_nM ≈ (n/M) K_MM²`` and ``P⁻¹ H`` has a condition
number close to 1.

Precision.  CG here runs on α itself (``P⁻¹`` is only applied to residuals),
with the operator (1) and every vector in float64, so the preconditioner's
rounding changes how many iterations CG needs, never what it converges to.
The factors may therefore be float32 (half the M² memory, as Falkon keeps
them on a GPU), provided their Cholesky succeeds: float32 needs a jitter of
about ``1e-6 · M`` relative to the mean of K_MM's diagonal (float64:
``1e-14 · M``), and the preconditioner stays useful while λ is well above
``jitter / M`` (about 1e-6 for float32 factors of a unit-diagonal kernel).
Below that (λ ≲ 1e-6, or an ``tol`` under ~1e-6, where a float32 solve's
rounding makes ``P⁻¹`` noticeably non-symmetric), use float64 factors.

Everything here is NumPy/SciPy on arrays whose size does not depend on n,
except :func:`gram_times`, which runs in its block's namespace (CuPy blocks on a GPU).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.linalg as sla
from scipy.linalg import blas, lapack

from distsketch.errors import ConfigError
from distsketch.footprint import Footprint
from distsketch.ops.kernel_product import augmented_rbf_rows
from distsketch.ops.kernels import KERNEL_ALIASES, pairwise_kernel
from distsketch.ops.namespace import asarray, buffer, inplace, into, namespace, zeros

__all__ = [
    "FACTOR_JITTER",
    "TILE_BYTES",
    "CholeskyFailed",
    "FalkonCG",
    "falkon_apply",
    "falkon_factors",
    "falkon_memory",
    "falkon_pass_flops",
    "falkon_pass_footprint",
    "falkon_preconditioner",
    "gram_times",
    "kernel_matrix",
    "tile_rows_for",
]

#: Diagonal jitter of K_MM per centre, relative to its mean diagonal (Falkon's
#: ``pc_epsilon``: 1e-13 for float64 and 1e-5 for float32, here per centre).
FACTOR_JITTER = {np.dtype(np.float64): 1e-14, np.dtype(np.float32): 1e-6}
#: Bytes of one kernel sub-tile (rows × M float64 values) a task holds.
TILE_BYTES = 32 * 2**20


def tile_rows_for(n_centers: int, tile_bytes: int = TILE_BYTES) -> int:
    """Rows of a ``rows × M`` float64 kernel sub-tile of about ``tile_bytes`` (16 … 2048)."""
    return int(min(2048, max(16, tile_bytes // (8 * max(1, int(n_centers))))))


def falkon_memory(n_centers: int, n_features: int, n_targets: int, factor_itemsize: int,
                  tile_bytes: int = TILE_BYTES) -> dict[str, int]:
    """Bytes a Falkon fit holds, from the sizes alone (Python integers: no overflow).

    Parameters
    ----------
    n_centers, n_features, n_targets : int
        M, d and t.
    factor_itemsize : int
        4 (float32 factors) or 8 (float64).
    tile_bytes : int
        The kernel sub-tile's target size.

    Returns
    -------
    dict
        ``driver``: the two M × M factors (``2 M² s``) plus the centres, the
        right-hand side and the five CG vectors (``8 M (d + 6 t)``) and one
        K_MM tile (the regulariser's product); ``task_fixed``: what one task
        holds besides its rows — the centres and their two augmented copies
        (``8 M (3 d + 4)``), V and the M × t result (``16 M t``), the
        sub-tile (``8 r M``, r = :func:`tile_rows_for`) and the sub-tile's
        augmented rows, norms and ``K v`` (``8 r (2 d + 6 + t)``); ``task_per_row``: a block row as
        read (up to float64), the read's decode buffer, its float64 copy and
        its targets (``8 (3 d + t)``; the decode buffer measured with
        ``benchmarks/bench_falkon_regime.py``).
    """
    M, d, t, s = int(n_centers), int(n_features), int(n_targets), int(factor_itemsize)
    r = tile_rows_for(M, tile_bytes)
    driver = 2 * M * M * s + 8 * M * (d + 6 * t) + 8 * r * M
    return {"driver": driver, "factors": 2 * M * M * s,
            "task_fixed": 8 * M * (3 * d + 4) + 16 * M * t + 8 * r * M + 8 * r * (2 * d + 6 + t),
            "task_per_row": 8 * (3 * d + t), "tile_rows": r}


def falkon_pass_footprint(memory: dict[str, int], n_centers: int, n_columns: int) -> Footprint:
    """Memory of one task of a Falkon pass (:func:`gram_times` over a block) and of its state.

    Parameters
    ----------
    memory : dict
        The fit's :func:`falkon_memory` (its ``task_per_row`` and
        ``task_fixed``, planned for the M centres asked for before they were
        chosen).
    n_centers : int
        The centres chosen (at most that M: repeated rows are dropped).
    n_columns : int
        t, the columns of the pass's M × t state (``K_nMᵀ Y`` or ``H V``).

    Returns
    -------
    Footprint
        Per row and fixed from ``memory``; state: the M × t float64 product.
    """
    return Footprint(per_row=memory["task_per_row"], fixed=memory["task_fixed"],
                     state=8.0 * n_centers * n_columns)


def falkon_pass_flops(n_rows: int, n_centers: int, n_features: int, n_targets: int) -> dict:
    """Work of one CG pass over n rows: kernel-tile GEMM flops, exponentials, product flops.

    ``gemm``: ``2 n M (d + 2)`` (the augmented-row product that makes every
    RBF tile); ``exp``: ``n M``; ``apply``: ``4 n M t`` (``K v`` and
    ``Kᵀ (K v)``).
    """
    n, M, d, t = int(n_rows), int(n_centers), int(n_features), int(n_targets)
    return {"gemm": 2 * n * M * (d + 2), "exp": n * M, "apply": 4 * n * M * t}


def kernel_matrix(centers: np.ndarray, kernel: Any, params: dict, dtype: Any = np.float64,
                  tile_rows: int | None = None) -> np.ndarray:
    """``K(C, C)`` made in row tiles straight into one M × M array of ``dtype``, Fortran order.

    The result is what :func:`falkon_factors` factors in place: no other
    M × M array is made (a float32 K_MM never exists in float64).  Only its
    upper triangle is read there, so tiles need not agree bitwise across the
    diagonal.
    """
    C = np.asarray(centers, dtype=np.float64)
    M = C.shape[0]
    r = tile_rows_for(M) if tile_rows is None else max(1, int(tile_rows))
    K = np.empty((M, M), dtype=np.dtype(dtype))
    for r0 in range(0, M, r):
        K[r0:r0 + r] = pairwise_kernel(C[r0:r0 + r], C, kernel, **params)
    return K.T  # K is symmetric: its transpose is the same matrix, Fortran-ordered, no copy


class CholeskyFailed(ConfigError):
    """A Cholesky factor of the preconditioner failed (K_MM not positive definite at this precision)."""


def falkon_factors(kmm: np.ndarray, lam: float, dtype: Any = np.float64,
                   jitter: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Falkon's upper factors ``T = chol(K_MM + εI)`` and ``A = chol(T Tᵀ/M + λI)``.

    Parameters
    ----------
    kmm : ndarray of shape (M, M)
        K_MM (its upper triangle is read); overwritten when it already has
        ``dtype`` in Fortran order (:func:`kernel_matrix` makes it so).
    lam : float
        λ > 0.
    dtype : float32 or float64
        Precision of the factors (module docstring).
    jitter : float, optional
        ε / (M · mean diagonal); default :data:`FACTOR_JITTER` of ``dtype``.

    Returns
    -------
    T, A : ndarray of shape (M, M), upper triangular, of ``dtype``

    Raises
    ------
    CholeskyFailed
        K_MM + εI is not positive definite at this precision.

    Notes
    -----
    Memory: the two factors (``2 M² s`` bytes), nothing else of size M²:
    ``T`` is factored in place and ``T Tᵀ`` is made by one SYRK into A's
    array.  Cost ``2 M³/3`` flops (two Choleskys and a SYRK).
    """
    dt = np.dtype(dtype)
    if dt not in FACTOR_JITTER:
        raise ConfigError(f"falkon_factors: dtype must be float32 or float64, got {dt}.")
    M = int(kmm.shape[0])
    K = np.asarray(kmm, dtype=dt, order="F")
    eps = (FACTOR_JITTER[dt] if jitter is None else float(jitter)) * M
    scale = max(float(np.mean(np.diag(K))), 1e-300)
    K[np.diag_indices(M)] += eps * scale
    T, info = lapack.get_lapack_funcs("potrf", (K,))(K, lower=0, overwrite_a=1, clean=1)
    if info != 0:
        raise CholeskyFailed(
            f"Falkon preconditioner: the Cholesky factor of the centres' kernel K_MM ({M} x {M}, "
            f"{dt}, jitter {eps:.3g} x mean diagonal) failed at pivot {info}: K_MM is not "
            "positive definite at this precision.")
    syrk = blas.get_blas_funcs("syrk", (T,))
    S = syrk(alpha=1.0 / M, a=T, trans=0, lower=0)  # T Tᵀ / M, upper triangle
    S[np.diag_indices(M)] += float(lam)
    A, info = lapack.get_lapack_funcs("potrf", (S,))(S, lower=0, overwrite_a=1, clean=1)
    if info != 0:  # pragma: no cover - T Tᵀ/M + λI is positive definite for λ > 0
        raise CholeskyFailed(f"Falkon preconditioner: chol(T Tᵀ/M + λI) failed at pivot {info}.")
    return T, A


#: Jitter growth per retry of :func:`falkon_preconditioner`, and the most retries.
JITTER_GROWTH, MAX_RETRIES = 100.0, 5


def falkon_preconditioner(centers: np.ndarray, kernel: Any, params: dict, lam: float,
                          dtype: Any = np.float64) -> tuple[np.ndarray, np.ndarray, float]:
    """:func:`falkon_factors` of ``K(C, C)``, the jitter raised ×100 until the Cholesky succeeds.

    The jitter only perturbs the preconditioner (the CG operator uses the
    exact K_MM), so a larger one costs iterations, not accuracy; it stays
    harmless while ``jitter · mean diagonal ≪ λ``.

    Returns
    -------
    T, A : ndarray of shape (M, M)
    jitter : float
        The relative jitter per centre that succeeded.

    Raises
    ------
    ConfigError
        No jitter up to ``FACTOR_JITTER · 100⁵`` made K_MM factorable.
    """
    dt = np.dtype(dtype)
    jitter = FACTOR_JITTER.get(dt, 1e-14)
    for attempt in range(MAX_RETRIES + 1):
        try:
            # K_MM is made in the factors' dtype and becomes T in place: 2 M² values at most
            T, A = falkon_factors(kernel_matrix(centers, kernel, params, dt), lam, dt, jitter)
            return T, A, jitter
        except CholeskyFailed as exc:
            if attempt == MAX_RETRIES:
                raise ConfigError(f"{exc} Use factor_dtype='float64', fewer or more distinct "
                                  "centres, or a wider kernel.") from exc
            jitter *= JITTER_GROWTH
    raise AssertionError("unreachable")  # pragma: no cover


def falkon_apply(T: np.ndarray, A: np.ndarray, R: np.ndarray, n: int) -> np.ndarray:
    """``P⁻¹ R = T⁻¹ A⁻¹ A⁻ᵀ T⁻ᵀ R / n`` (four triangular solves in the factors' dtype).

    Parameters
    ----------
    T, A : ndarray of shape (M, M)
        From :func:`falkon_factors`.
    R : ndarray of shape (M, t)
    n : int
        Rows of the data.

    Returns
    -------
    ndarray of shape (M, t), float64
    """
    V = np.asarray(R, dtype=T.dtype)
    V = sla.solve_triangular(T, V, trans="T", lower=False, check_finite=False)
    V = sla.solve_triangular(A, V, trans="T", lower=False, check_finite=False)
    V = sla.solve_triangular(A, V, lower=False, check_finite=False)
    V = sla.solve_triangular(T, V, lower=False, check_finite=False)
    return np.asarray(V, dtype=np.float64) / float(n)


def gram_times(block: np.ndarray, centers: np.ndarray, V: np.ndarray | None,
               Y: np.ndarray | None, kernel: Any, params: dict,
               tile_rows: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``K_bMᵀ (K_bM V)`` and ``K_bMᵀ Y`` for one row block b, tile by tile.

    Parameters
    ----------
    block : ndarray of shape (b, d)
    centers : ndarray of shape (M, d)
    V : ndarray of shape (M, t) or None
    Y : ndarray of shape (b, t_y) or None
        The block's targets.
    kernel, params
        As :func:`~distsketch.ops.kernels.pairwise_kernel`.
    tile_rows : int
        Rows of the ``tile_rows × M`` kernel sub-tile made at a time.

    Returns
    -------
    (ndarray of shape (M, t) or None, ndarray of shape (M, t_y) or None)

    Notes
    -----
    Each sub-tile is made once and used for both products, so a pass costs
    ``2 b M (d + 2)`` GEMM flops and ``b M`` exponentials for the RBF kernel
    (augmented rows: one GEMM and an in-place ``exp`` per sub-tile) plus
    ``4 b M t``.  Memory: one sub-tile buffer, the centres' augmented
    copies and a sub-tile's augmented rows.

    A block of another array namespace (CuPy on a GPU) is computed there in
    float64: the centres, V and Y move to its device once per call, and the
    results stay on it (the pass's tree reduce sums them there).
    """
    xp = namespace(block)
    X = asarray(block, like=block, dtype=np.float64)
    C = asarray(centers, like=X, dtype=np.float64)
    Vd = None if V is None else asarray(V, like=X, dtype=np.float64)
    Yd = None if Y is None else asarray(Y, like=X, dtype=np.float64)
    M = C.shape[0]
    out = None if Vd is None else zeros((M, Vd.shape[1]), like=X)
    outy = None if Yd is None else zeros((M, Yd.shape[1]), like=X)
    name = kernel if callable(kernel) else KERNEL_ALIASES.get(str(kernel), str(kernel))
    tr = max(1, int(tile_rows))
    if name == "rbf":
        gamma = float(params["gamma"])
        right_t = xp.matrix_transpose(augmented_rbf_rows(C, gamma)[1])
        # one sub-tile buffer reused by every sub-tile on NumPy (None elsewhere)
        buf = buffer(xp, min(tr, X.shape[0]) * M)
    for r0 in range(0, X.shape[0], tr):
        r1 = min(r0 + tr, X.shape[0])
        if name == "rbf":
            # the block's augmented rows by sub-tile: O(r d) memory, not a copy of the block
            left, _ = augmented_rbf_rows(X[r0:r1, ...], gamma)
            K = into(xp, "matmul", left, right_t, out=buffer(xp, (r1 - r0, M), out=buf))
            K = inplace(xp, "exp", K)
        else:
            K = pairwise_kernel(X[r0:r1, ...], C, kernel, **params)
        Kt = xp.matrix_transpose(K)
        if out is not None:
            out = inplace(xp, "add", out, Kt @ (K @ Vd))
        if outy is not None and Yd is not None:
            outy = inplace(xp, "add", outy, Kt @ Yd[r0:r1, ...])
    return out, outy


@dataclass
class FalkonCG:
    """Preconditioned CG on ``H α = b`` advanced one operator product (one data pass) at a time.

    The state is everything the next step needs (iterate, residual, search
    direction, ``rᵀz``, columns still active, residual history), so a run
    saved after any step and restored continues exactly as it would have.
    Columns of b are independent systems sharing each pass; a converged
    column takes zero steps.

    Attributes
    ----------
    x, r, p : ndarray of shape (M, t)
    rz : ndarray of shape (t,)
    scale : ndarray of shape (t,)
        ``‖b‖`` per column (1 for a zero column).
    active : ndarray of bool, shape (t,)
    n_iter : int
    residuals : list of float
        Largest relative residual ``‖b − Hx‖/‖b‖`` (the recurrence's) per iteration.
    """

    x: np.ndarray
    r: np.ndarray
    p: np.ndarray
    rz: np.ndarray
    scale: np.ndarray
    active: np.ndarray
    n_iter: int = 0
    residuals: list = field(default_factory=list)

    @classmethod
    def start(cls, b: np.ndarray, precond: Callable[[np.ndarray], np.ndarray],
              tol: float) -> FalkonCG:
        """The state at α = 0: ``r = b``, ``p = P⁻¹ b``."""
        b = np.asarray(b, dtype=np.float64)
        norm = np.linalg.norm(b, axis=0)
        scale = np.where(norm > 0, norm, 1.0)
        z = precond(b)
        rel = norm / scale
        return cls(x=np.zeros_like(b), r=b.copy(), p=z, rz=np.einsum("ij,ij->j", b, z),
                   scale=scale, active=rel > tol, residuals=[float(rel.max(initial=0.0))])

    @property
    def done(self) -> bool:
        return not bool(self.active.any())

    def step(self, Hp: np.ndarray, precond: Callable[[np.ndarray], np.ndarray],
             tol: float, label: str) -> None:
        """Advance by one iteration given ``Hp = H p`` (the pass just made)."""
        pap = np.einsum("ij,ij->j", self.p, Hp)
        if bool((self.active & (pap <= 0)).any()):
            raise ConfigError(
                f"{label}: the system is not positive definite at iteration {self.n_iter + 1} "
                f"(pᵀHp = {float(pap.min()):.3g}); raise alpha or use factor_dtype='float64'.")
        step = np.where(self.active, self.rz / np.where(pap > 0, pap, 1.0), 0.0)
        self.x += self.p * step
        self.r -= Hp * step
        self.n_iter += 1
        rel = np.linalg.norm(self.r, axis=0) / self.scale
        self.residuals.append(float(rel.max(initial=0.0)))
        self.active = self.active & (rel > tol)
        if self.done:
            return
        z = precond(self.r)
        rz_new = np.einsum("ij,ij->j", self.r, z)
        beta = np.where(self.active, rz_new / np.where(self.rz != 0, self.rz, 1.0), 0.0)
        self.p = z + self.p * beta
        self.rz = rz_new
