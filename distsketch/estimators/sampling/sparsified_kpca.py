"""Kernel PCA on a sparsified / quantised Gram matrix (Achlioptas, McSherry, Schölkopf)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh

from distsketch.blas import blas_single_thread
from distsketch.errors import ConfigError
from distsketch.estimators.base import (
    DistsketchEstimator,
    OperatorSize,
    TransformerMixin,
    fit_context,
    to_numpy,
)
from distsketch.estimators.kernel_params import fit_gamma
from distsketch.estimators.sampling.sparsified import SparsifiedGram, strip_sizes
from distsketch.graph import KERNEL_TILE_ROWS, map_blocks
from distsketch.ops.expansion import centred_expansion_rows, expansion_footprint
from distsketch.ops.linalg import fix_signs
from distsketch.ops.random import random_rows
from distsketch.ops.sparsify import orthogonal_iteration
from distsketch.validation import Interval, Options
from distsketch.validation.finite import FiniteRows, check_finite_result

__all__ = ["SparsifiedKernelPCA"]


class SparsifiedKernelPCA(TransformerMixin, DistsketchEstimator):
    """Kernel PCA on the sparsified/quantised Gram matrix.

    The top eigenvectors of the centred simplified matrix H K̂ H are found by
    Lanczos (``scipy.sparse.linalg.eigsh``) or by orthogonal iteration (the
    paper's method) on a blockwise ``LinearOperator``.  K̂ is indefinite
    (sparsification and quantisation add a symmetric noise matrix whose
    spectrum reaches ±4σ√n), so both solvers return the largest *algebraic*
    eigenpairs, never the most negative ones.
    Conventions follow scikit-learn's ``KernelPCA``: ``eigenvalues_`` are
    those of the centred matrix and ``transform`` centres new kernel rows
    with the training statistics; ``fit_transform(X)`` is
    ``fit(X).transform(X)`` (the training embedding of the sparsified
    matrix, V·√λ, is ``eigenvectors_ * sqrt(eigenvalues_)``).

    Parameters
    ----------
    n_components : int, default 10
        Number of components k.
    kernel, gamma, degree, coef0, p, quantize, quantize_bound, tile_rows, store
        As in :class:`SparsifiedGram`.
    solver : {"lanczos", "orthogonal_iteration"}, default "lanczos"
        Lanczos needs far fewer products with K̂ when the top eigenvalues sit
        at the edge of the noise spectrum (digits, γ = 1/64, p = 0.05: 0.5 s
        against 5.2 s for orthogonal iteration, which stops at ``max_iter``).
    max_iter : int, default 500
        Iteration cap: iterations of orthogonal iteration (reaching it warns
        with ``sklearn.exceptions.ConvergenceWarning`` and keeps the last Ritz
        pairs) or Lanczos restarts (reaching it with fewer than k converged
        pairs raises ConfigError).
    tol : float, default 1e-9
        Residual tolerance relative to the largest Ritz value (orthogonal
        iteration) or relative eigenvalue accuracy (Lanczos).
    random_state : int, Generator or None

    Attributes
    ----------
    seed_ : int
    gram_ : SparsifiedGram
        The fitted simplified matrix.
    eigenvalues_ : ndarray of shape (n_components,)
        The largest algebraic eigenvalues of H K̂ H, descending.
    eigenvectors_ : ndarray of shape (n_samples, n_components)
    X_fit_ : ndarray of shape (n_samples, n_features)
        Training points (the expansion's support).
    dual_coef_ : ndarray of shape (n_samples, n_components)
        V / √λ: feature j of x is Σᵢ dual_coef_[i, j] k̃(xᵢ, x).
    components_ : ndarray of shape (n_components, n_samples)
        ``dual_coef_.T`` (a read-only view): the principal directions as
        expansions over the training points, so that ``transform(X)`` is
        the centred kernel rows k̃(X, X_fit_) @ components_.T.
    intercept_ : ndarray of shape (n_components,)
        The centring constant, so that (up to the row-mean term, which is
        ≈ 0 because Vᵀ1 = 0) feature = k(x, X_fit_) @ dual_coef_ + intercept_.
    K_fit_rows_ : ndarray of shape (n_samples,)
        Column means of K̂ (estimates of those of K).
    n_iter_ : int
        Iterations of orthogonal iteration, or Lanczos's products K̂·v.
    n_samples_seen_ : int
        Rows the model was fitted on (= n_samples).
    kernel_params_ : dict
        The kernel's parameters (``gram_.kernel_params_``).

    Notes
    -----
    Cost: building K̂ (see :class:`SparsifiedGram`) plus per iteration one
    product K̂·Q, O(nnz(K̂)·(k + 8)) flops and one pass over the strips;
    O(n·(k + 8)) memory besides the stored matrix.  ``transform`` evaluates
    the exact kernel against all n training points (memory per task:
    ``256 × n`` floats, plus X_fit_ shipped once per worker); use
    :class:`~distsketch.RoundedExpansion` to cut those evaluations.
    By Davis–Kahan, the top-k subspace moves by at most
    ‖K̂ − K‖₂ / (λ_k − λ_{k+1}) in sin-angle.

    References
    ----------
    Achlioptas, McSherry, Schölkopf. Sampling techniques for kernel methods. NIPS 2001.
    Schölkopf, Smola, Müller. Nonlinear component analysis as a kernel eigenvalue
    problem. Neural Computation 1998.

    Examples
    --------
    >>> import numpy as np
    >>> from distsketch import SparsifiedKernelPCA
    >>> X = np.random.default_rng(0).normal(size=(400, 3))
    >>> kpca = SparsifiedKernelPCA(n_components=2, gamma=0.5, p=0.3, random_state=0).fit(X)
    >>> kpca.transform(X[:5]).shape
    (5, 2)
    """

    _parameter_constraints = {
        **SparsifiedGram._parameter_constraints,
        "n_components": [Interval(int, 1, None)],
        "solver": [Options({"orthogonal_iteration", "lanczos"})],
        "max_iter": [Interval(int, 1, None)],
        "tol": [Interval(float, 0, None)],
    }

    def __init__(self, *, n_components: int = 10, kernel: Any = "rbf", gamma: float | str | None = None,
                 degree: int = 3, coef0: float = 1.0, p: float = 0.1, quantize: bool = False,
                 quantize_bound: float | None = None, solver: str = "lanczos",
                 tile_rows: int = KERNEL_TILE_ROWS, store: str | os.PathLike | None = None,
                 max_iter: int = 500, tol: float = 1e-9, random_state: Any = None):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.p = p
        self.quantize = quantize
        self.quantize_bound = quantize_bound
        self.solver = solver
        self.tile_rows = tile_rows
        self.store = store
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    @fit_context
    def fit(self, X: Any, y: Any = None) -> SparsifiedKernelPCA:
        """Build K̂ and its top eigenvectors.

        Parameters
        ----------
        X : ndarray, dask array or Zarr path of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self
        """
        X = self._check_input(X, reset=True)
        self._check_params_for_shape(*X.shape)
        seed = self._init_seed()
        n = X.shape[0]
        k = int(self.n_components)
        gram = SparsifiedGram(kernel=self.kernel, gamma=fit_gamma(self, X), degree=self.degree,
                              coef0=self.coef0, p=self.p, quantize=self.quantize,
                              quantize_bound=self.quantize_bound, tile_rows=self.tile_rows,
                              store=self.store, random_state=seed).fit(X)
        op = gram.as_linear_operator(center=True)
        with blas_single_thread():  # n × (k + 8) blocks: BLAS threads only add contention
            vals, vecs, n_iter = self._solve(op, n, k, seed)
        check_finite_result(vals, vecs, stage="sparsified Gram eigendecomposition")
        # sign convention: the largest-magnitude entry of each vector is positive
        vecs = fix_signs(vecs, axis=0)
        self.gram_ = gram
        self.eigenvalues_ = vals
        self.eigenvectors_ = vecs
        self.n_iter_ = int(n_iter)
        self.X_fit_ = to_numpy(X).astype(np.float64, copy=False)
        self.K_fit_rows_ = gram.tiles_.matmat(np.ones(n)) / n
        K_fit_all = float(self.K_fit_rows_.mean())
        with np.errstate(divide="ignore"):
            inv = np.where(vals > 0, 1.0 / np.sqrt(np.where(vals > 0, vals, 1.0)), 0.0)
        self.dual_coef_ = vecs * inv[None, :]
        self.intercept_ = -self.K_fit_rows_ @ self.dual_coef_ + K_fit_all * self.dual_coef_.sum(0)
        self.n_output_features_ = k
        self.n_samples_seen_ = int(n)
        self.kernel_params_ = dict(gram.kernel_params_)
        return self

    def _check_params_for_shape(self, n_samples: int, n_features: int) -> None:
        """Refuse parameters that X's shape cannot satisfy (before any pass over X)."""
        k = int(self.n_components)
        if k >= n_samples:
            raise ConfigError(
                f"SparsifiedKernelPCA: n_components={k} must be smaller than the number of "
                f"samples (n_samples={n_samples}); reduce n_components.")
        super()._check_params_for_shape(n_samples, n_features)

    def _operator_sizes(self, n_samples: int, n_features: int) -> list[OperatorSize]:
        n, k = int(n_samples), int(self.n_components)
        return [*strip_sizes("SparsifiedKernelPCA", self.tile_rows, self.p, n, n_features),
                (f"SparsifiedKernelPCA: n_components={k} on {n} rows: the eigensolver's "
                 f"{n} x {k + 8} block of vectors (float64) that", 8 * n * (k + 8),
                 "lower n_components")]

    @property
    def components_(self) -> np.ndarray:
        # derived from dual_coef_ (which RoundedExpansion reads), not stored twice
        return self.dual_coef_.T

    def _solve(self, op: LinearOperator, n: int, k: int, seed: int) -> tuple:
        if self.solver == "orthogonal_iteration":
            return orthogonal_iteration(op.matmat, n, k, seed=seed, max_iter=self.max_iter,
                                        tol=self.tol)
        v0 = random_rows(seed, "kpca.lanczos.v0", 0, n, 1)[:, 0]
        products = [0]

        def matvec(v: np.ndarray) -> np.ndarray:
            products[0] += 1
            return op.matvec(v)

        counted = LinearOperator(op.shape, matvec=matvec, dtype=np.float64)
        try:
            # "LA": the largest algebraic eigenvalues (K̂ is indefinite)
            vals, vecs = eigsh(counted, k=k, which="LA", v0=v0, tol=self.tol,
                               maxiter=self.max_iter)
        except ArpackNoConvergence as exc:
            raise ConfigError(
                f"{type(self).__name__}: Lanczos found {len(exc.eigenvalues)} of the {k} "
                f"eigenpairs to tol={self.tol:.1e} in max_iter={self.max_iter} restarts. "
                "Increase max_iter or tol, or reduce n_components.") from exc
        order = np.argsort(-vals, kind="stable")
        return vals[order], vecs[:, order], products[0]

    def fit_transform(self, X: Any, y: Any = None) -> Any:
        """``fit(X).transform(X)``: the same map for training and new rows.

        The embedding of the sparsified matrix itself, V·√λ (free after
        ``fit``, no kernel evaluations), is
        ``eigenvectors_ * np.sqrt(eigenvalues_)``; it differs from
        ``transform`` of the training rows, which uses the exact kernel, by
        the sparsification error.
        """
        return self.fit(X).transform(X)

    def transform(self, X: Any) -> Any:
        """Kernel PCA features of new points.

        Parameters
        ----------
        X : ndarray or dask array of shape (n_samples, n_features)

        Returns
        -------
        ndarray or dask array of shape (n_samples, n_components)
            ``(k̃(x, X_fit_)) @ dual_coef_`` with k̃ the kernel centred by the
            training statistics.
        """
        self._check_is_fitted("dual_coef_")
        X = self._check_input(X, reset=False)
        return map_blocks(X, FiniteRows(centred_expansion_rows, "SparsifiedKernelPCA transform"),
                          self.X_fit_, self.dual_coef_, self.intercept_,
                          n_out=self.n_output_features_, dtype=np.float64,
                          kwargs={"kernel": self.gram_.kernel_name_ if isinstance(self.kernel, str)
                                  else self.kernel, "params": self.gram_.kernel_params_},
                          footprint=expansion_footprint(self.n_features_in_,
                                                        self.n_output_features_,
                                                        self.X_fit_.shape[0]),
                          name="sparsified-kpca-transform")
