"""Randomized rounding of fitted kernel expansions (fewer kernel evaluations per point)."""

from __future__ import annotations

from typing import Any

import numpy as np

from distsketch.errors import ConfigError, InputError
from distsketch.estimators.base import DistsketchEstimator, TransformerMixin, fit_context, to_numpy
from distsketch.estimators.kernel_params import GAMMA_CONSTRAINT, resolve_gamma
from distsketch.graph import map_blocks
from distsketch.ops.expansion import expansion_footprint, expansion_rows
from distsketch.ops.kernels import KERNEL_NAMES, kernel_diagonal, resolve_kernel_params
from distsketch.ops.rounding import (
    expected_nonzeros,
    hoeffding_bound,
    keep_probabilities,
    round_coefficients,
    round_shared,
    shared_keep_probabilities,
    shared_rounded_counts,
    threshold_for_budget,
    threshold_for_total_budget,
)
from distsketch.ops.sparsify import kernel_bound
from distsketch.validation import Interval, Options
from distsketch.validation.finite import FiniteRows

__all__ = ["RoundedExpansion", "expansion_from_model"]


def expansion_from_model(model: Any) -> dict[str, Any]:
    """Support points, coefficients, intercept and kernel of a fitted kernel expansion.

    Understands

    * models with ``dual_coef_`` and ``X_fit_`` (scikit-learn ``KernelRidge``,
      distsketch ``KernelSolver``, :class:`~distsketch.SparsifiedKernelPCA`),
      with an optional ``intercept_``;
    * scikit-learn ``KernelPCA``: coefficients ``eigenvectors_ / √eigenvalues_``
      and the centring constant as intercept (the row-mean term of the
      centring is dropped: it multiplies 1ᵀ·coef ≈ 0).

    Returns ``support`` (n, d), ``coef`` (n,) or (n, n_outputs), ``intercept``, and
    ``kernel``, ``gamma``, ``degree``, ``coef0`` where the model has them.
    """
    info: dict[str, Any] = {k: getattr(model, k) for k in ("kernel", "gamma", "degree", "coef0")
                            if hasattr(model, k)}
    if isinstance(getattr(model, "gamma_", None), float):
        # the scale the model used ("median" or None resolved on its training rows)
        info["gamma"] = model.gamma_
    if info.get("kernel") == "precomputed":
        raise InputError(f"{type(model).__name__} was fitted on a precomputed kernel; its support "
                         "points are unknown. Fit it with a named kernel.")
    if hasattr(model, "dual_coef_") and hasattr(model, "X_fit_"):
        coef = np.asarray(model.dual_coef_, dtype=np.float64)
        info.update(support=np.asarray(model.X_fit_, dtype=np.float64), coef=coef,
                    intercept=np.asarray(getattr(model, "intercept_", 0.0), dtype=np.float64))
        return info
    if hasattr(model, "eigenvectors_") and hasattr(model, "eigenvalues_") and hasattr(model, "X_fit_"):
        vals = np.asarray(model.eigenvalues_, dtype=np.float64)
        coef = np.asarray(model.eigenvectors_, dtype=np.float64) / np.sqrt(np.maximum(vals, 1e-300))
        centerer = getattr(model, "_centerer", None)
        rows = getattr(centerer, "K_fit_rows_", None)
        intercept = np.zeros(coef.shape[1])
        if rows is not None:
            intercept = -np.asarray(rows) @ coef + float(centerer.K_fit_all_) * coef.sum(axis=0)  # type: ignore[union-attr]
        info.update(support=np.asarray(model.X_fit_, dtype=np.float64), coef=coef,
                    intercept=intercept)
        return info
    raise InputError(
        f"{type(model).__name__} exposes no kernel expansion: expected dual_coef_ and X_fit_ "
        "(kernel ridge) or eigenvectors_, eigenvalues_ and X_fit_ (kernel PCA). Pass the support "
        "points and coefficients explicitly: fit(support, coef)."
    )


class RoundedExpansion(TransformerMixin, DistsketchEstimator):
    """A kernel expansion f(x) = Σᵢ αᵢ k(xᵢ, x) + b with randomly rounded coefficients.

    Coefficients with |αᵢ| >= c are kept; each smaller one becomes
    sign(αᵢ)·c with probability |αᵢ|/c, else 0 (unbiased).  Support points
    whose rounded coefficients are all zero are dropped, so ``predict`` needs
    fewer kernel evaluations per point.  With probability >= 1 − δ,
    |f̂(x) − f(x)| <= c·B·sqrt(m·ln(2/δ)/2) for each output (m the number of
    rounded coefficients, B >= |k(xᵢ, x)|), by Hoeffding's inequality.

    With several outputs (e.g. the components of a kernel PCA) the budget is
    per output by default: each output rounds with its own coins, so q
    outputs at budget b evaluate the kernel at up to q·b distinct points per
    query.  ``budget_scope="total"`` shares the sampled points instead: one
    coin per support point, kept with probability pᵢ = min(1, maxⱼ |αᵢⱼ|/cⱼ),
    and a kept point's coefficients become αᵢⱼ/pᵢ for every output.  Every
    output stays unbiased (E[α̂ᵢⱼ] = pᵢ·αᵢⱼ/pᵢ = αᵢⱼ), the expected number of
    distinct kernel evaluations per query is Σᵢ pᵢ = ``budget`` for all
    outputs together, and since |α̂ᵢⱼ| <= cⱼ the same Hoeffding bound holds
    per output.  This is the sampling paper's "randomized kernel" reading of
    rounding (k(xᵢ, x) replaced by k(xᵢ, x)/pᵢ with probability pᵢ, else 0),
    with one draw per point; the paper itself rounds each expansion (each
    unit eigenvector) separately, i.e. the "per_output" scope.

    Parameters
    ----------
    kernel : str or callable, default "rbf"
        Kernel of the expansion; a model passed to ``fit`` that has a
        ``kernel`` attribute overrides it (and ``gamma``, ``degree``,
        ``coef0`` likewise).
    gamma : float, "median" or None, default None
        Kernel scale; None means 1 / n_features, "median" the median
        heuristic on a 1000-row sample (one more pass over X of the support points);
        the value used is ``gamma_``.
    degree : int, default 3
        Degree q of the polynomial kernel (γ⟨x, y⟩ + c)^q.
    coef0 : float, default 1.0
        Offset c of the polynomial kernel.
    threshold : float, optional
        The rounding level c (one for all outputs).
    budget : float, optional
        Target expected number of kernel evaluations: per output
        (``budget_scope="per_output"``, c chosen per output to meet it
        exactly) or distinct evaluations per query for all outputs together
        (``"total"``, cⱼ = τ·‖α_·ⱼ‖₁ with one τ meeting it exactly).  Give
        ``threshold`` or ``budget`` (default: budget = 10 % of the support).
    budget_scope : {"per_output", "total"}, default "per_output"
        "per_output": independent rounding of each output (the paper's
        scheme).  "total": one shared coin per support point (see above);
        with one output both scopes round the same way.
    delta : float in (0, 1), default 0.05
        Failure probability of the reported Hoeffding bound.
    kernel_bound : float, optional
        B >= |k(x, xᵢ)|.  Default 1 for bounded kernels, else
        ``max_i k(xᵢ, xᵢ)`` over the support (valid for positive-definite
        kernels and test points no larger than the support).
    random_state : int, Generator or None

    Attributes
    ----------
    seed_ : int
    support_vectors_ : ndarray of shape (n_kept, n_features)
        Support points with a non-zero rounded coefficient.
    support_ : ndarray of shape (n_kept,)
        Their indices in the original support.
    coef_ : ndarray of shape (n_kept, n_outputs)
        Rounded coefficients.
    intercept_ : ndarray of shape (n_outputs,)
    threshold_ : ndarray of shape (n_outputs,)
    n_support_full_ : int
        Size of the original support (kernel evaluations of the full expansion).
    n_evaluations_ : int
        Kernel evaluations per point of the rounded expansion (= n_kept).
    expected_evaluations_ : float
        Their expectation over the rounding: ``Σᵢ (1 − Πⱼ (1 − P(α̂ᵢⱼ ≠ 0)))``
        per output scope, ``Σᵢ pᵢ`` (= budget) for the total scope.
    expected_evaluations_per_output_ : ndarray of shape (n_outputs,)
        Expected non-zero coefficients of each output, ``Σᵢ P(α̂ᵢⱼ ≠ 0)``.
    hoeffding_bound_ : ndarray of shape (n_outputs,)
        The error bound at ``delta``.
    n_rounded_ : ndarray of shape (n_outputs,)
        Coefficients subject to rounding per output: 0 < |αᵢⱼ| < cⱼ, or for
        the total scope αᵢⱼ ≠ 0 with pᵢ < 1.
    coef_ndim_ : int
        1 if the coefficients were a vector (``predict`` then returns 1-D).
    kernel_bound_ : float
    kernel_name_, kernel_params_ :
        Resolved kernel.
    n_samples_seen_ : int
        Support points of the expansion given to ``fit``.

    Notes
    -----
    ``fit`` is O(n log n) per output (O(n·q + n log n) for the total
    scope) and holds the support.  ``predict``
    costs n_kept kernel evaluations per point (instead of n); per task a
    ``256 × n_kept`` kernel block, and the support travels once per worker.

    References
    ----------
    Achlioptas, McSherry, Schölkopf. Sampling techniques for kernel methods. NIPS 2001, §4.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.kernel_ridge import KernelRidge
    >>> from distsketch import RoundedExpansion
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.normal(size=(500, 3)), rng.normal(size=500)
    >>> krr = KernelRidge(kernel="rbf", gamma=0.5, alpha=1.0).fit(X, y)
    >>> r = RoundedExpansion(budget=100, random_state=0).fit(krr)
    >>> r.predict(X[:4]).shape
    (4,)
    """

    _array_api_support = True

    _parameter_constraints = {
        "kernel": [Options(KERNEL_NAMES), "callable"],
        "gamma": GAMMA_CONSTRAINT,
        "degree": [Interval(int, 1, None)],
        "coef0": [Interval(float, None, None)],
        "threshold": [Interval(float, 0, None, closed="neither"), None],
        "budget": [Interval(float, 0, None, closed="neither"), None],
        "budget_scope": [Options({"per_output", "total"})],
        "delta": [Interval(float, 0, 1, closed="neither")],
        "kernel_bound": [Interval(float, 0, None, closed="neither"), None],
        "random_state": ["random_state"],
    }

    def __init__(self, *, kernel: Any = "rbf", gamma: float | str | None = None, degree: int = 3,
                 coef0: float = 1.0, threshold: float | None = None, budget: float | None = None,
                 delta: float = 0.05, kernel_bound: float | None = None, random_state: Any = None,
                 budget_scope: str = "per_output"):
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.threshold = threshold
        self.budget = budget
        self.delta = delta
        self.kernel_bound = kernel_bound
        self.random_state = random_state
        self.budget_scope = budget_scope

    @fit_context
    def fit(self, X: Any, y: Any = None, *, coef: Any = None,
            intercept: Any = 0.0) -> RoundedExpansion:
        """Round the coefficients of an expansion.

        Parameters
        ----------
        X : ndarray of shape (n_support, n_features), or a fitted model
            Support points xᵢ, or a model exposing an expansion (see
            :func:`expansion_from_model`).
        y : ndarray of shape (n_support,) or (n_support, n_outputs)
            Coefficients αᵢ (required with support points; named ``y`` as
            scikit-learn names fit's second argument).
        coef : ndarray, optional
            The same coefficients by keyword (give ``y`` or ``coef``).
        intercept : float or ndarray of shape (n_outputs,)
            Constant added to f (ignored for a model, which supplies its own).

        Returns
        -------
        self
        """
        if y is not None and coef is not None:
            raise ConfigError("RoundedExpansion.fit: give the coefficients once, as y or as coef.")
        coef = y if coef is None else coef
        if self.threshold is not None and self.budget is not None:
            raise ConfigError("RoundedExpansion: give threshold or budget, not both.")
        kernel_args = {"kernel": self.kernel, "gamma": self.gamma, "degree": self.degree,
                       "coef0": self.coef0}
        if hasattr(X, "fit") and not hasattr(X, "shape"):
            info = expansion_from_model(X)
            kernel_args.update({k: info[k] for k in kernel_args if k in info})
            support, coef, intercept = info["support"], info["coef"], info["intercept"]
        else:
            if coef is None:
                raise InputError(
                    "RoundedExpansion requires y to be passed, but the target y is None: "
                    "fit(support, coef) needs one coefficient (row) per support point.")
            support = X
        support = self._check_input(support, reset=True, dtype=np.float64)
        # the expansion is rounded on the host: its support points and coefficients become
        # learned attributes (host NumPy whatever the input's namespace)
        support = np.asarray(to_numpy(support))
        coef = np.asarray(to_numpy(coef), dtype=np.float64)
        if coef.ndim not in (1, 2) or coef.shape[0] != support.shape[0]:
            raise InputError(
                f"coef has shape {coef.shape} but there are {support.shape[0]} support points; "
                "pass one coefficient (row) per support point.")
        if not np.all(np.isfinite(coef)):
            raise InputError("coef contains NaN or Inf; check the fitted model.")
        seed = self._init_seed()
        self.gamma_ = resolve_gamma(kernel_args["gamma"], support)
        name, params = resolve_kernel_params(kernel_args["kernel"], support.shape[1],
                                             self.gamma_, int(kernel_args["degree"]),
                                             float(kernel_args["coef0"]))
        self.kernel_name_ = name if isinstance(name, str) else "callable"
        self._kernel_obj = name
        self.kernel_params_ = params
        self.n_samples_seen_ = int(support.shape[0])
        C = coef[:, None] if coef.ndim == 1 else coef
        n_out = C.shape[1]
        total = self.budget_scope == "total"
        if self.threshold is not None:
            thr = np.full(n_out, float(self.threshold))
        else:
            budget = float(self.budget if self.budget is not None else max(1.0, 0.1 * C.shape[0]))
            thr = threshold_for_total_budget(C, budget) if total else threshold_for_budget(C, budget)
        rounded = round_shared(C, thr, seed) if total else round_coefficients(C, thr, seed)
        keep = np.any(rounded != 0, axis=1)
        B = self.kernel_bound or kernel_bound(name)
        if B is None:
            B = float(np.abs(kernel_diagonal(support, name, **params)).max())
        if total:
            point = shared_keep_probabilities(C, thr)
            probs = np.where(C != 0, point[:, None], 0.0)
            expected = float(point.sum())
            n_rounded = shared_rounded_counts(C, thr)
        else:
            probs = keep_probabilities(C, thr)
            expected = float((1.0 - np.prod(1.0 - probs, axis=1)).sum())
            n_rounded = ((np.abs(C) > 0) & (np.abs(C) < thr[None, :])).sum(axis=0)
        self.threshold_ = thr
        self.support_ = np.flatnonzero(keep)
        self.support_vectors_ = support[keep]
        self.coef_ = rounded[keep]
        self.intercept_ = np.broadcast_to(np.asarray(intercept, dtype=np.float64), (n_out,)).copy()
        self.n_support_full_ = int(support.shape[0])
        self.n_evaluations_ = int(keep.sum())
        self.expected_evaluations_per_output_ = (probs.sum(axis=0) if total
                                                 else expected_nonzeros(C, thr))
        self.expected_evaluations_ = expected
        self.kernel_bound_ = float(B)
        self.n_outputs_ = int(n_out)
        self.n_rounded_ = n_rounded
        self.hoeffding_bound_ = (self._bound(float(self.delta)) if total else
                                 hoeffding_bound(C, thr, float(B), float(self.delta)))
        self.coef_ndim_ = int(coef.ndim)
        return self

    def error_bound(self, delta: float) -> np.ndarray:
        """The Hoeffding bound on |f̂(x) − f(x)| at failure probability ``delta``, per output."""
        self._check_is_fitted("hoeffding_bound_")
        if not 0 < delta < 1:
            raise ConfigError(f"delta={delta} must be in (0, 1).")
        return self._bound(delta)

    def _bound(self, delta: float) -> np.ndarray:
        return self.threshold_ * self.kernel_bound_ * np.sqrt(self.n_rounded_ * np.log(2.0 / delta) / 2.0)

    def predict(self, X: Any) -> Any:
        """Evaluate the rounded expansion.

        Parameters
        ----------
        X : ndarray or dask array of shape (n_samples, n_features)

        Returns
        -------
        ndarray or dask array of shape (n_samples,) or (n_samples, n_outputs)
            1-D when the coefficients were 1-D.
        """
        self._check_is_fitted("coef_")
        X = self._check_input(X, reset=False)
        kernel = self.kernel_name_ if self.kernel_name_ != "callable" else self._kernel_obj
        out = map_blocks(X, FiniteRows(expansion_rows, "kernel expansion predict"),
                         self.support_vectors_, self.coef_, self.intercept_,
                         n_out=self.n_outputs_, dtype=np.float64,
                         kwargs={"kernel": kernel, "params": self.kernel_params_},
                         footprint=expansion_footprint(self.n_features_in_, self.n_outputs_,
                                                       self.n_evaluations_),
                         name="rounded-expansion")
        if self.coef_ndim_ == 1:
            return out[:, 0]
        return out

    transform = predict

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # fit(support, coef): the coefficients play the part of y
        tags.target_tags.required = True
        return tags
