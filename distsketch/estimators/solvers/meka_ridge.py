"""Kernel ridge regression on MEKA's approximation ``G̃ = W L Wᵀ`` (Si, Hsieh, Dhillon 2014)."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from sklearn.base import MultiOutputMixin, RegressorMixin, clone

from distsketch.errors import ConfigError, InputError
from distsketch.estimators.base import DistsketchEstimator, fit_context, to_numpy
from distsketch.estimators.solvers.solver import (
    r_squared,
    record_cg,
    solver_targets,
    stack_operands,
)
from distsketch.graph import map_blocks, reduce_blocks
from distsketch.graph.arrays import as_dask
from distsketch.ops.cg import pcg
from distsketch.ops.meka import psd_core, rows_times
from distsketch.summaries.cross_product import CrossProduct
from distsketch.validation import Interval, Options
from distsketch.validation.finite import FiniteRows

__all__ = ["MEKAKernelRidge"]

logger = logging.getLogger("distsketch")


class MEKAKernelRidge(MultiOutputMixin, RegressorMixin, DistsketchEstimator):
    """Kernel ridge regression on a MEKA approximation ``G̃ = W L Wᵀ``.

    MEKA's link matrix L is not positive semi-definite in general (its blocks
    are fitted independently by least squares), so ``G̃ + λI`` can be
    indefinite at the regularisation values the MEKA paper uses.  The default
    solver works in MEKA's factored form: from ``WᵀW`` (one pass) it writes
    ``G̃ = Q C Qᵀ`` with Q orthonormal and a small core C, clips C's negative
    eigenvalues (the nearest PSD matrix to G̃) and solves exactly,

        ``(Q C₊ Qᵀ + λI)⁻¹ y = Q ((C₊ + λI)⁻¹ − λ⁻¹ I) Qᵀ y + y / λ``.

    New points are predicted with ``G̃₊(x, X) α = w(x)ᵀ (L₊ Wᵀ α)``, L₊ the
    clipped link in W's coordinates.

    Parameters
    ----------
    meka : MEKA, default None
        Unfitted MEKA parameters (cloned and fitted on X) or a MEKA fitted on
        the same X.  None means ``MEKA()`` seeded from ``random_state``.
    alpha : float, default 1.0
        λ > 0.
    solver : {"factored", "cg"}, default "factored"
        ``"factored"``: exact solve on the PSD-clipped approximation.
        ``"cg"``: conjugate gradient on ``G̃ + λI`` as it is (no clipping),
        through MEKA's blockwise ``matmat``; it raises ConfigError (with the
        negative curvature relative to the operator's scale) when G̃ + λI is
        indefinite.
    tol : float, default 1e-6
        Relative residual for ``solver="cg"``.
    max_iter : int, default 500
        Iterations for ``solver="cg"``.
    verbose : int, default 0
        Progress of the solve on the ``"distsketch"`` logger (INFO level
        when > 0; see :func:`distsketch.ops.cg.pcg`).
    random_state : int, Generator or None

    Attributes
    ----------
    meka_ : MEKA
    dual_coef_ : ndarray of shape (n_samples,) or (n_samples, n_targets)
    coef_ : ndarray of shape (Σ k_s, t)
        ``L₊ Wᵀ α`` (``L Wᵀ α`` with ``solver="cg"``): prediction weights on
        the MEKA basis of new points.
    core_eigenvalues_ : ndarray of shape (r,)
        Eigenvalues of G̃ on the span of the training basis before clipping
        (factored solver; r ≤ Σ k_s).
    n_clipped_ : int
        How many of them were negative and set to zero.
    clipped_mass_ : float
        ``‖min(e, 0)‖ / ‖e‖``: the relative Frobenius-norm change made by
        clipping (0 for a PSD approximation).
    n_iter_, residuals_, converged_
        CG's iterations and residual history (for the factored solver:
        ``n_iter_ = 1``, one direct solve, and residuals ``[1, 0]``).
    n_samples_seen_ : int
        Rows fitted on.
    gamma_ : float
    kernel_params_ : dict
        The kernel of ``meka_`` (its ``gamma_`` and ``kernel_params_``).

    Notes
    -----
    Factored solver: one pass over the basis for ``Wᵀ [W | y]`` (per task a
    ``k × (k + t)`` state, k = Σ k_s), O(k³) for two eigendecompositions,
    one more pass to expand α (n × t).  With ``solver="cg"``, each iteration
    is one MEKA ``matmat`` (two passes over the n × k basis).  Prediction: one
    pass of MEKA's basis over the new rows and an O(k) dot product per row.

    References
    ----------
    Si, Hsieh, Dhillon. Memory efficient kernel approximation. ICML 2014,
    section 5.2.
    Higham. Computing a nearest symmetric positive semidefinite matrix.
    Linear Algebra Appl. 1988 (clipping eigenvalues).
    """

    _parameter_constraints = {
        "meka": [None, "estimator"],
        "alpha": [Interval(float, 0, None, closed="neither")],
        "solver": [Options({"factored", "cg"})],
        "tol": [Interval(float, 0, None, closed="neither")],
        "max_iter": [Interval(int, 0, None)],
        "verbose": [Interval(int, 0, None)],
        "random_state": ["random_state"],
    }

    def __init__(self, *, meka: Any = None, alpha: float = 1.0, solver: str = "factored",
                 tol: float = 1e-6, max_iter: int = 500, verbose: int = 0,
                 random_state: Any = None):
        self.meka = meka
        self.alpha = alpha
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.verbose = verbose
        self.random_state = random_state

    def _fitted_meka(self, X: Any, seed: Any) -> Any:
        meka = self.meka
        if meka is None:
            from distsketch.estimators.nystrom.meka import MEKA

            meka = MEKA(random_state=seed)
        if not hasattr(meka, "link_"):
            meka = clone(meka)
            if meka.get_params(deep=False).get("random_state", 0) is None:
                meka.set_params(random_state=seed)
            meka.fit(X)
        elif int(getattr(meka, "n_samples_seen_", X.shape[0])) != X.shape[0]:
            raise InputError(
                f"MEKAKernelRidge: the fitted MEKA covers {meka.n_samples_seen_} rows but X has "
                f"{X.shape[0]}; pass the MEKA fitted on this X or an unfitted one."
            )
        return meka

    @fit_context
    def fit(self, X: Any, y: Any) -> MEKAKernelRidge:
        """Fit (or reuse) MEKA on X and solve ``(G̃ + λI) α = y``.

        Parameters
        ----------
        X : ndarray, dask array, Zarr array or path of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_targets)

        Returns
        -------
        self
        """
        X = self._check_input(X, reset=True)
        self._check_params_for_shape(*X.shape)  # a meka= given here, before y is read
        Y, one_d = solver_targets(self, y, X.shape[0])
        seed = self._init_seed()
        meka = self._fitted_meka(X, seed)
        self.meka_ = meka
        if self.solver == "cg":
            alpha = self._fit_cg(meka, X, Y)
        else:
            alpha = self._fit_factored(meka, X, Y)
        self.dual_coef_ = alpha[:, 0] if one_d else alpha
        self.n_samples_seen_ = int(X.shape[0])
        self.gamma_, self.kernel_params_ = meka.gamma_, dict(meka.kernel_params_)
        return self

    def _fit_factored(self, meka: Any, X: Any, Y: np.ndarray) -> np.ndarray:
        lam = float(self.alpha)
        W = as_dask(meka.transform(X))
        k = int(W.shape[1])
        # Wᵀ[W | Y] in one tree-reduced pass: the Gram that orthonormalises W, and Wᵀy
        stacked = stack_operands(W, as_dask(Y, block_rows=int(W.chunks[0][0])), W_twice=True)
        wt = reduce_blocks(CrossProduct(k + Y.shape[1]), stacked, name="meka-krr-gram")["atb"]
        B, e = psd_core(wt[:, :k], meka.link_)
        e_plus = np.clip(e, 0.0, None)
        c = B.T @ wt[:, k:]
        # α = W B ((E₊ + λ)⁻¹ − λ⁻¹) Bᵀ Wᵀ y + y / λ
        shrink = (1.0 / (e_plus + lam) - 1.0 / lam)[:, None] * c
        Wa = map_blocks(W, rows_times, B @ shrink, n_out=Y.shape[1], dtype=np.float64,
                        name="meka-krr-expand")
        alpha = np.asarray(to_numpy(Wa), dtype=np.float64) + Y / lam
        # Bᵀ Wᵀ α = c / (e₊ + λ) since Bᵀ WᵀW B = I, so L₊ Wᵀ α needs no further pass
        self.coef_ = B @ ((e_plus / (e_plus + lam))[:, None] * c)
        self.core_eigenvalues_ = e
        self.n_clipped_ = int(np.count_nonzero(e < 0))
        norm = float(np.linalg.norm(e))
        self.clipped_mass_ = float(np.linalg.norm(np.minimum(e, 0.0)) / norm) if norm > 0 else 0.0
        self.n_iter_ = 1
        self.converged_ = True
        self.residuals_ = np.array([1.0, 0.0])
        level = logging.INFO if int(self.verbose) > 0 else logging.DEBUG
        logger.log(level, "MEKAKernelRidge: factored solve, core of rank %d, %d negative "
                   "eigenvalue(s) clipped (min %.3g, relative mass %.3g), alpha=%.3g",
                   e.shape[0], self.n_clipped_, float(e.min(initial=0.0)), self.clipped_mass_,
                   lam)
        return alpha

    def _fit_cg(self, meka: Any, X: Any, Y: np.ndarray) -> np.ndarray:
        lam = float(self.alpha)

        def matvec(V: np.ndarray) -> np.ndarray:
            return np.asarray(meka.matmat(V), dtype=np.float64).reshape(V.shape) + lam * V

        try:
            res = pcg(matvec, Y, tol=float(self.tol), max_iter=int(self.max_iter),
                      verbose=int(self.verbose), label="MEKAKernelRidge")
        except ConfigError as exc:
            raise ConfigError(f"{exc} MEKA's approximation is indefinite: use "
                              "solver='factored' (clips its negative eigenvalues).") from None
        alpha = res.x
        record_cg(self, res, "raise max_iter or alpha, or use solver='factored'.", stacklevel=4)
        # Wᵀα in one tree-reduced pass over the training basis
        W = as_dask(meka.transform(X))
        stacked = stack_operands(W, as_dask(alpha, block_rows=int(W.chunks[0][0])))
        wta = reduce_blocks(CrossProduct(alpha.shape[1]), stacked, name="meka-krr-wta")["atb"]
        self.coef_ = meka.link_ @ wta
        return alpha

    def predict(self, X: Any) -> Any:
        """``w(x)ᵀ L Wᵀ α`` for new rows (dask in -> dask out).

        Parameters
        ----------
        X : ndarray or dask array of shape (n_new, n_features)

        Returns
        -------
        ndarray or dask array of shape (n_new,) or (n_new, n_targets)
        """
        self._check_is_fitted("coef_")
        X = self._check_input(X, reset=False)
        W = self.meka_.transform(X)
        out = map_blocks(W, FiniteRows(rows_times, "MEKA ridge predict"), self.coef_,
                         n_out=self.coef_.shape[1], dtype=np.float64, name="meka-krr-predict")
        return out[:, 0] if np.ndim(self.dual_coef_) == 1 else out

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """R² of ``predict(X)``."""
        return r_squared(np.asarray(to_numpy(self.predict(X))), y)
