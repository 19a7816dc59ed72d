"""The ridge solve of a summary: one factorisation shared by GCV, the solution and the
leverages (:class:`RidgeSystem`), and the rule deciding when a given α tolerates float32
products in ``ZᵀZ`` (:func:`alpha_tolerates_float32`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg as sla

from distsketch.blas import single_threaded_blas
from distsketch.graph import compute
from distsketch.ops.namespace import to_host
from distsketch.ops.sketch_solve import centered_normal_equations, solve_path_from_eigh
from distsketch.summaries.ridge import dense_float64
from distsketch.validation import is_dask
from distsketch.validation.finite import check_finite_result

__all__ = ["FLOAT32_ALPHA_FLOOR", "FLOAT32_PROBE_ROWS", "RidgeSystem", "Tridiagonal",
           "alpha_tolerates_float32", "first_features"]

#: smallest α, relative to the mean eigenvalue tr(Z_cᵀZ_c) / m, solved from float32 products
#: (the floor of GCV's candidates, ``defaults.GCV_FEATURE_GRID[0]``)
FLOAT32_ALPHA_FLOOR = 1e-3

#: first rows of the input whose features estimate the mean eigenvalue for that rule
FLOAT32_PROBE_ROWS = 512


class RidgeSystem:
    """Centred normal equations of a ridge summary ``state`` (``n``, ``sum``, ``ztz``,
    ``zty``, ``ysum``, ``yty``) and the factorisations solved from them.

    Notes
    -----
    At most one O(m³) factorisation per λ asked for, and none after
    :meth:`eigh`: its eigenpairs serve every λ (:meth:`solve`,
    :meth:`quadratic_forms`).  GCV reduces ``A`` to tridiagonal form
    instead (LAPACK ``sytrd``, 4m³/3 flops, about a third of the
    eigendecomposition, which also builds the m × m eigenvectors): each λ is
    then a tridiagonal solve, O(m·t), and the solution at the chosen λ
    ``Q (T + λI)⁻¹ Qᵀb``.  Otherwise one λ takes a Cholesky factor (about 10x
    cheaper than the eigendecomposition), kept for that λ.
    """

    def __init__(self, state: dict, fit_intercept: bool):
        A, b, zm, ym = centered_normal_equations(state, fit_intercept)
        check_finite_result(A, b, stage="ridge normal equations")
        self.A, self.b, self.zm, self.ym = A, b, zm, ym
        self.state = state
        self.fit_intercept = bool(fit_intercept)
        self._eig: tuple[np.ndarray, np.ndarray] | None = None
        self._chol: tuple[float, Any] | None = None
        self._tri: Tridiagonal | None = None

    @single_threaded_blas
    def eigh(self) -> tuple[np.ndarray, np.ndarray]:
        """``(e, V)`` with ``A = V diag(e) Vᵀ`` (computed once)."""
        if self._eig is None:
            self._eig = np.linalg.eigh(self.A)
        return self._eig

    @single_threaded_blas
    def tridiagonal(self) -> Tridiagonal:
        """``A = Q T Qᵀ`` with ``Qᵀb`` and the eigenvalues of ``T`` (computed once)."""
        if self._tri is None:
            self._tri = Tridiagonal(self.A, self.b)
        return self._tri

    def _cholesky(self, alpha: float) -> Any:
        # the upper factor of A + αI for one α (None where A + αI is not numerically PD)
        if self._chol is None or self._chol[0] != alpha:
            try:
                factor = sla.cho_factor(self.A + alpha * np.eye(self.A.shape[0]), lower=False)
            except np.linalg.LinAlgError:
                factor = None
            self._chol = (alpha, factor)
        return self._chol[1]

    @single_threaded_blas
    def solve(self, alphas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Weights ``W`` (p, m, t) and intercepts ``c`` (p, t) for each λ.

        From the eigenpairs when they exist (or for a path), else from
        GCV's tridiagonal form when it exists, else one Cholesky solve; a λ
        below the rounding of ``A`` (Cholesky fails) takes the eigenpath,
        which clips it.
        """
        alphas = np.atleast_1d(np.asarray(alphas, dtype=np.float64))
        W = None
        if self._eig is None and alphas.size == 1 and self._tri is not None:
            W = self._tri.solve(float(alphas[0]))[None]
        elif self._eig is None and alphas.size == 1:
            factor = self._cholesky(float(alphas[0]))
            if factor is not None:
                W = sla.cho_solve(factor, self.b)[None]
        if W is None:
            evals, evecs = self.eigh()
            W = solve_path_from_eigh(evals, evecs, self.b, alphas)   # (p, m, t)
        c = self.ym[None, :] - np.einsum("m,pmt->pt", self.zm, W)    # (p, t)
        return W, c

    @single_threaded_blas
    def quadratic_forms(self, Zc: np.ndarray, alpha: float) -> np.ndarray:
        """``zᵢᵀ(A + αI)⁻¹zᵢ`` of the rows of ``Zc`` (k, m): the leverages' main term.

        From the eigenpairs (one k × m × m product) when they exist, else
        from the Cholesky factor U of that α: ``‖U⁻ᵀzᵢ‖²`` (one triangular
        solve).
        """
        factor = None if self._eig is not None else self._cholesky(float(alpha))
        if factor is not None:
            S = sla.solve_triangular(factor[0], Zc.T, trans="T", lower=factor[1],
                                     check_finite=False)
            return np.einsum("mk,mk->k", S, S)
        evals, evecs = self.eigh()
        q = Zc @ evecs
        return (q ** 2 / (np.clip(evals, 0.0, None) + alpha)[None, :]).sum(axis=1)

    @single_threaded_blas
    def gcv(self, grid: np.ndarray, n_rows: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(alphas, gcv)`` of generalised cross-validation over ``grid`` × the mean eigenvalue.

        See :func:`~distsketch.estimators.ridge.defaults.gcv_path`.
        """
        n = float(self.state["n"])
        yty = np.diag(np.atleast_2d(np.asarray(to_host(self.state["yty"]), dtype=np.float64)))
        yy = float(np.sum(yty - n * self.ym ** 2)) if self.fit_intercept else float(np.sum(yty))
        if self._eig is not None:
            evals, evecs = self._eig
            evals = np.clip(evals, 0.0, None)
            q2 = ((evecs.T @ self.b) ** 2).sum(axis=1)                  # (m,)
        else:
            tri = self.tridiagonal()
            evals = tri.evals
        scale = max(float(evals.sum()) / max(evals.size, 1), np.finfo(np.float64).tiny)
        alphas = scale * np.asarray(grid, dtype=np.float64)
        den = evals[None, :] + alphas[:, None]
        if self._eig is not None:
            fit = (q2[None, :] * (evals[None, :] + 2 * alphas[:, None]) / den ** 2).sum(axis=1)
        else:
            fit = np.array([tri.explained(float(a)) for a in alphas])
        rss = np.maximum(yy - fit, 0.0)
        df = (evals[None, :] / den).sum(axis=1) + (1.0 if self.fit_intercept else 0.0)
        if n_rows is not None:
            n = float(n_rows)
        resid_df = n - df
        # fewer than one residual degree of freedom: the fit interpolates and GCV's 0/0 says
        # nothing (it can favour λ → 0 on noisy data)
        with np.errstate(divide="ignore", invalid="ignore"):
            gcv = np.where(resid_df >= 1.0, n * rss / resid_df ** 2, np.inf)
        return alphas, gcv


class Tridiagonal:
    """``A = Q T Qᵀ`` (LAPACK ``dsytrd``, lower) of a symmetric ``A`` (m, m), with ``Qᵀb``
    for ``b`` (m, t) and the eigenvalues of ``T``.

    Notes
    -----
    ``Q`` stays as its m − 1 Householder reflectors; applying it to an
    m × t block costs O(m²·t).  ``T + λI`` is solved by ``dgtsv`` (partial
    pivoting, O(m·t)).  Memory: one m × m float64 copy of ``A``.
    """

    def __init__(self, A: np.ndarray, b: np.ndarray):
        m = A.shape[0]
        lwork = int(sla.lapack.dsytrd_lwork(m, lower=1)[0]) if m > 1 else 1
        self.reflectors, self.d, self.e, self.tau, info = sla.lapack.dsytrd(
            A, lower=1, lwork=max(lwork, 1))
        if info != 0:
            raise np.linalg.LinAlgError(f"dsytrd returned info={info}")
        self.qtb = self._apply(np.array(b, dtype=np.float64, order="C"), transpose=True)
        # sterf: eigenvalues only, O(m²)
        evals = (sla.eigvalsh_tridiagonal(self.d, self.e, check_finite=False,
                                          lapack_driver="sterf") if m > 1 else self.d.copy())
        self.evals = np.clip(evals, 0.0, None)                      # ZᵀZ is PSD

    def _apply(self, x: np.ndarray, transpose: bool) -> np.ndarray:
        # Q = H(0) ... H(m-2), H(i) = I − τᵢ vᵢvᵢᵀ, vᵢ = (0…0, 1, reflectors[i+2:, i])
        order = range(len(self.tau)) if transpose else reversed(range(len(self.tau)))
        V = self.reflectors
        for i in order:
            v = V[i + 2:, i]                            # vᵢ below its leading 1
            w = self.tau[i] * (x[i + 1] + v @ x[i + 2:])
            x[i + 1] -= w
            x[i + 2:] -= v[:, None] * w[None, :]
        return x

    def _solve_t(self, alpha: float) -> np.ndarray:
        # (T + αI)⁻¹ Qᵀb
        if self.e.size == 0:
            return self.qtb / (self.d + alpha)[:, None]
        du = self.e.copy()
        *_, u, info = sla.lapack.dgtsv(du, self.d + alpha, du.copy(), self.qtb)
        if info != 0:
            raise np.linalg.LinAlgError(f"dgtsv returned info={info} at alpha={alpha}")
        return u

    def explained(self, alpha: float) -> float:
        """``2 bᵀw − wᵀAw`` at ``w = (A + αI)⁻¹b``: ``‖y_c‖²`` minus the residual sum of squares."""
        u = self._solve_t(alpha)
        tu = self.d[:, None] * u
        tu[:-1] += self.e[:, None] * u[1:]
        tu[1:] += self.e[:, None] * u[:-1]
        return float(2.0 * np.sum(self.qtb * u) - np.sum(u * tu))

    def solve(self, alpha: float) -> np.ndarray:
        """``(A + αI)⁻¹ b`` of shape (m, t)."""
        return self._apply(self._solve_t(alpha), transpose=False)


def alpha_tolerates_float32(Z: np.ndarray, n_rows: int, alpha: Any, fit_intercept: bool) -> bool:
    """Whether every λ in ``alpha`` is at least :data:`FLOAT32_ALPHA_FLOOR` × the mean eigenvalue.

    The mean eigenvalue of ``ZᵀZ`` (centred with ``fit_intercept``) over the
    ``n_rows`` rows of the input is estimated as ``n · mean ‖zᵢ − z̄‖² / m`` from
    ``Z`` (k, m), the features of its first rows.  Why the floor suffices: the
    Notes of :class:`~distsketch.estimators.ridge.regressor.SketchedKernelRidge`
    ("Precision"; measured ≤ 7e-4 of the spread between two random-feature draws).
    """
    Z = np.asarray(Z, dtype=np.float64)
    k, m = Z.shape
    if k == 0 or m == 0:
        return False
    Zc = Z - Z.mean(axis=0) if fit_intercept and k > 1 else Z
    mean_eig = float(n_rows) * float(np.einsum("km,km->", Zc, Zc)) / k / m
    smallest = float(np.min(np.asarray(alpha, dtype=np.float64)))
    return bool(mean_eig > 0 and smallest >= FLOAT32_ALPHA_FLOOR * mean_eig)


def first_features(X: Any, fn: Any, ops: tuple) -> np.ndarray:
    """Host float64 features ``fn(rows, 0, *ops)`` of the first :data:`FLOAT32_PROBE_ROWS` rows of X.

    For dask input the first block's rows are computed (read once more).
    """
    head = X[: min(int(X.shape[0]), FLOAT32_PROBE_ROWS)]
    if is_dask(head):
        head = compute(head, progress=False)[0]
    return np.asarray(to_host(dense_float64(fn(np.asarray(to_host(head)), 0, *ops))))
