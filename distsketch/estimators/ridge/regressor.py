"""Kernel ridge regression on sketched features, out of core (the classifier is in
:mod:`distsketch.estimators.ridge.classifier`).

Over 500 lines because the class docstring is the reference of every parameter,
attribute and cost the classifier shares.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin, clone

from distsketch.errors import ConfigError, InputError
from distsketch.estimators.base import DistsketchEstimator, fit_context, to_numpy
from distsketch.estimators.features.rff import RandomFourierFeatures
from distsketch.estimators.kernel_params import sample_median_gamma, strip_median_gamma
from distsketch.estimators.ridge.cv import fit_cv
from distsketch.estimators.ridge.defaults import (
    PredictBlock,
    auto_alpha,
    default_n_features,
    feature_block_function,
    feature_block_functions,
    features_fitted,
    loo_default_kernel,
    loo_results,
    map_kernel,
    positive_values,
    rows_at,
    standardize_rows,
    standardizes,
    wants_median_gamma,
)
from distsketch.estimators.ridge.fold import RidgeFolding
from distsketch.estimators.ridge.scaling import default_sample, loo_sample, sample_scale
from distsketch.estimators.ridge.system import (
    RidgeSystem,
    alpha_tolerates_float32,
    first_features,
)
from distsketch.estimators.ridge.weights import check_sample_weight, stack_xy, with_weights
from distsketch.graph import map_blocks, reduce_blocks
from distsketch.metrics import REGRESSION_METRICS, regression_scores
from distsketch.ops.namespace import host_dtype, namespace, to_host
from distsketch.ops.sketch_solve import summary_sse
from distsketch.summaries.ridge import RidgeSummary, add_ridge_states, float32_products
from distsketch.validation import Interval, StrOptions, check_targets, is_dask
from distsketch.validation.finite import FiniteRows

logger = logging.getLogger("distsketch")

__all__ = ["RidgeSummary", "SketchedKernelRidge", "feature_block_function"]


class SketchedKernelRidge(RegressorMixin, RidgeFolding, DistsketchEstimator):
    """Kernel ridge regression on a kernel feature map, with tree-reduced normal equations.

    Solves ``min_w ‖Z w + b − y‖² + λ‖w‖²`` with ``Z = z(X)`` exactly from the
    one-pass summary ``ZᵀZ, Zᵀy``.  With features whose inner products equal
    the kernel this is exact kernel ridge regression (``(K + λI)α = y``).

    Parameters
    ----------
    features : feature map, default None
        Any distsketch feature map (``RandomFourierFeatures``, ``PolySketch``,
        ``NystromFeatures``, ``MEKA``, ``StatisticalDimensionSketch``...) or
        any transformer with ``fit``/``transform``.  Unfitted maps are cloned
        and fitted on X (standardised when ``standardize``); fitted ones are
        used as they are.  None means Gaussian ``RandomFourierFeatures``
        seeded from ``random_state`` with ``min(2048, max(1024, 2 n_samples))``
        features (2048 in ``partial_fit``) and gamma chosen among
        {1/8, 1/4, 1/2, 1, 2} / n_features by exact leave-one-out of kernel
        ridge on ≤ 1000 rows of the standardisation's sample (no pass of
        its own; 1 / n_features without ``standardize`` or with ``cv``, whose
        ``gammas`` choose); where the best is an end of that grid the search
        goes on past it, by at most 3 factor-2 steps (``gamma_search_``).
        Nested parameters: ``set_params(features__gamma="median")``.
    alpha : "auto", float or array-like of floats > 0, default "auto"
        Regularisation λ.  "auto": with the default map on at most 1000
        unweighted rows, the leave-one-out choice made with gamma; else
        generalised cross-validation (GCV) over a 21-point log grid (10⁻³ … 10²
        times the mean eigenvalue) from the summary's eigendecomposition (see
        :func:`~distsketch.estimators.ridge.defaults.auto_alpha`); the grid
        and scores are in ``cv_results_``.  An array gives the whole path:
        ``coef_`` then has a leading axis of length ``len(alpha)`` and
        ``predict`` returns one column per λ (one eigendecomposition serves
        every λ).
    fit_intercept : bool, default True
        Fit an unpenalised intercept (features and targets are centred through
        the summary sums).
    standardize : "auto" or bool, default "auto"
        Centre and scale every input column to unit variance before the
        feature map (``x_mean_``, ``x_scale_``; constant columns are centred
        only).  The means and scales are estimated on a row sample read
        before the only pass (a few per cent of the rows in whole strips,
        every row of an input of at most 8192 rows;
        :mod:`~distsketch.estimators.ridge.scaling`); random Fourier features
        fold them into their operator, other maps standardise each block.
        ``partial_fit`` takes them from its first batch.  "auto"
        standardises unless the caller fixed the kernel's scale: for the
        default map (``features=None``) and for a map whose ``gamma`` is
        chosen from the data (None or "median"), not for a map given a number
        for ``gamma`` (chosen for the columns as they are) or one without a
        ``gamma`` (a polynomial sketch's scale is its caller's too).
    cv : int or None, default None
        k-fold cross-validation over ``alphas`` (and ``gammas``) from per-fold
        summaries computed in the same single pass (several passes, each
        with as many candidate maps as a merge task's budget holds, when
        all of them do not fit; see :mod:`~distsketch.estimators.ridge.cv`).
    alphas : array-like, default None
        λ grid for ``cv``; None uses ``alpha`` if it is an array, else
        ``logspace(-4, 3, 8)``.
    gammas : array-like, default None
        Kernel-scale grid for ``cv`` (the feature map must have a ``gamma``
        parameter); every candidate map is evaluated in the same pass.
    split_every : int, default 8
        Merge fan-in of the fit's tree reductions: states are merged
        ``split_every`` at a time, more where a tree would be over three merges
        deep (more than ``split_every³`` blocks), fewer where a merge task
        would exceed the memory budget (:func:`~distsketch.graph.choose_fan_in`).
    random_state : int, Generator or None
        Seed of the default feature map and of the fold assignment.

    Attributes
    ----------
    features_ : feature map
        The fitted feature map used by ``predict``.
    coef_ : ndarray of shape (m,), (t, m), (p, m) or (p, t, m)
        Weights (p = path length, t = targets when y is 2-D).
    intercept_ : float or ndarray of shape (t,), (p,) or (p, t)
    alpha_ : float or ndarray
        The λ used (chosen by CV when ``cv`` is set, else as "auto" says).
    x_mean_, x_scale_ : ndarray of shape (n_features,) or None
        The standardisation (None when ``standardize=False``): sample
        estimates of the column means and standard deviations (exact when
        the sample is every row, as on at most 8192 rows).
    gamma_ : float or None
        The kernel scale: chosen by CV among ``gammas``, else the one the feature map
        used (its ``gamma_``; the leave-one-out choice for the default map); None without one.
    kernel_params_ : dict
        ``features_.kernel_params_`` (empty for a map without a kernel).
    cv_results_ : dict or None
        With ``alpha="auto"`` and no ``cv``: ``alphas`` and ``gcv`` (GCV per
        candidate, None where the fit interpolates; no ``gcv`` when the
        leave-one-out chose), and for the default map ``gammas``,
        ``loo_alphas``, ``loo_mse`` (n_gammas × n_alphas) and ``loo_rows``.
        With ``cv``: ``alphas``,
        ``gammas`` and ``mse`` (nested lists, n_gammas × n_alphas: mean
        squared validation error per row and target); the classifier
        adds ``accuracy``, by which it chooses.
    gamma_search_ : dict or None
        The default map's gamma search (None for other maps): ``factors``
        scored (× 1 / n_features), ``chosen``, ``widened`` (factors scored
        outside {1/8 … 2}), ``at_limit`` (the choice is the widening's last
        step) and ``note`` (a sentence when the choice is outside the grid,
        else None; also logged).
    gram_precision_ : {"float32", "float64"}
        The precision of the products forming ``ZᵀZ`` in ``fit`` (or the first
        ``partial_fit``; see Notes).
    gram_, zty_, zsum_, ysum_, yty_ : ndarray
        The merged summary (``ZᵀZ``, ``Zᵀy``, ``Σz``, ``Σy``, ``yᵀy``), kept for
        ``partial_fit``.
    n_samples_seen_ : int
        Rows seen so far (``fit`` plus every ``partial_fit``).
    n_features_in_ : int
    seed_ : int

    Notes
    -----
    One pass over X for ``ZᵀZ``.  With ``standardize``, the chunks of the
    row sample are read first (the statistics, and for the default map one
    O(k³) eigendecomposition of the kernel of k ≤ 1000 of its rows per gamma
    scored, 3 to 8).  Per task: the block, its ``rows × m`` features
    and an m × m + m × t state (× k folds × n_gammas with CV); merges hold
    ``split_every`` states, one state per block is communicated.  The solve
    is one O(m³) eigendecomposition for the λ path (and GCV; it also gives
    the solution at GCV's choice and the classifier's calibration leverages),
    or a Cholesky at one λ; nothing depends on n.
    ``predict`` is a blockwise map (dask in -> dask out).

    Precision: float32 rows (without ``sample_weight`` or ``cv``) form ``ZᵀZ``
    from float32 products, summed in float64, when every λ of the solve is
    at least 10⁻³ × the mean eigenvalue ``tr(Z_cᵀZ_c) / m``: GCV's candidates,
    or a given ``alpha`` that large, judged before the pass from the
    features of the first 512 rows (``n · mean ‖zᵢ − z̄‖² / m``).  The
    float32 Gram's rounding, about ``u·‖Z‖²`` (u = 2⁻²⁴), moves the solution
    by at most ``‖ΔA‖₂‖w‖ / (λ_min(ZᵀZ) + α)``; above that floor the
    predictions move by under 5 % of the spread between two draws of the
    random features (docs/architecture.md, "Precision").  A smaller α, the
    exact leave-one-out alpha and float64 rows use float64 products.

    References
    ----------
    Song, Woodruff, Yu, Zhang. Fast sketching of polynomial kernels of
    polynomial degree. ICML 2021, section 6.4 and Appendix E.
    Rahimi, Recht. Random features for large-scale kernel machines. NIPS 2007.

    Examples
    --------
    >>> import numpy as np
    >>> from distsketch import RandomFourierFeatures, SketchedKernelRidge
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 3)); y = np.sin(X[:, 0])
    >>> feats = RandomFourierFeatures(gamma=0.5, n_components=200, random_state=0)
    >>> model = SketchedKernelRidge(features=feats, alpha=1e-2).fit(X, y)
    >>> bool(model.score(X, y) > 0.9)
    True
    """

    _array_api_support = True

    _parameter_constraints = {
        "features": [None, "estimator"],
        "alpha": [StrOptions({"auto"}), Interval(float, 0, None, closed="neither"),
                  "array-like"],
        "fit_intercept": ["boolean"],
        "standardize": [StrOptions({"auto"}), "boolean"],
        "cv": [None, Interval(int, 2, None)],
        "alphas": [None, "array-like"],
        "gammas": [None, "array-like"],
        "split_every": [Interval(int, 2, None)],
        "random_state": ["random_state"],
    }

    def __init__(self, *, features: Any = None, alpha: Any = "auto", fit_intercept: bool = True,
                 standardize: bool | str = "auto", cv: int | None = None, alphas: Any = None,
                 gammas: Any = None, split_every: int = 8, random_state: Any = None):
        self.features = features
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.standardize = standardize
        self.cv = cv
        self.alphas = alphas
        self.gammas = gammas
        self.split_every = split_every
        self.random_state = random_state

    # ---------------------------------------------------------------- helpers
    def _auto_alpha(self) -> bool:
        return isinstance(self.alpha, str) and self.alpha == "auto"

    def _start_fit(self, X: Any, y: Any) -> tuple[Any, Any]:
        # what fit and a first partial_fit check and set before anything is read
        if not self._auto_alpha():
            positive_values(self.alpha, "alpha")
        X = self._check_input(X, reset=True)
        Y, self.single_output_ = self._prepare_targets(y, X.shape[0])
        Y = self._device_targets(X, Y)
        self.n_targets_ = int(Y.shape[1])
        self._init_seed()
        return X, Y

    def _fit_scaler(self, X: Any, Y: Any = None) -> Any:
        """Learn the standardisation (or none) and return X as the feature map sees it.

        The statistics, the default map's gamma (given Y) and a map's
        ``gamma="median"`` all come from the row sample read before the only pass.
        """
        self.x_mean_ = self.x_scale_ = None
        self._median_gamma = self._loo = None
        if not standardizes(self.standardize, self.features):
            if wants_median_gamma(self.features):
                # gamma is needed before the only pass: a few strips of rows, not a pass
                self._median_gamma = strip_median_gamma(
                    X, where=f"the {X.shape[0]} x {X.shape[1]} input of {type(self).__name__}")
            return X
        index, rows = default_sample(X)
        self.x_mean_, self.x_scale_ = sample_scale(rows)
        loo = self.features is None and Y is not None and self.cv is None
        if loo or wants_median_gamma(self.features):
            at, loo_rows = loo_sample(index, rows)
            S = standardize_rows(loo_rows, self.x_mean_, self.x_scale_)
            if loo:
                self._loo = loo_default_kernel(S, rows_at(Y, at), int(X.shape[0]),
                                               self.fit_intercept, type(self).__name__)
            else:
                self._median_gamma = sample_median_gamma(
                    S, f"the standardised {X.shape[0]} x {X.shape[1]} input")
        # lazy: a map fitted on it reads what it needs, and the pass maps the raw rows
        return standardize_rows(X, self.x_mean_, self.x_scale_)

    def _scaler(self) -> tuple | None:
        mean = getattr(self, "x_mean_", None)
        return None if mean is None else (mean, self.x_scale_)

    def _make_features(self, X: Any, gamma: float | None = None,
                       n_rows: int | None = None) -> Any:
        base = self.features
        if base is None:
            base = RandomFourierFeatures(n_components=default_n_features(n_rows),
                                         random_state=self.seed_)
        if gamma is None and features_fitted(base):
            return base
        median = getattr(self, "_median_gamma", None) if gamma is None else None
        loo = getattr(self, "_loo", None)
        if gamma is None:
            gamma = median if loo is None else loo["gamma"]
        f = clone(base)
        params = f.get_params(deep=False)
        if gamma is not None:
            if "gamma" not in params:
                raise ConfigError(
                    f"gammas was given but features={type(f).__name__} has no gamma parameter; "
                    "drop gammas or use a feature map with a kernel scale."
                )
            f.set_params(gamma=float(gamma))
        if "random_state" in params and params["random_state"] is None:
            # a reproducible operator: derived from this model's seed
            f.set_params(random_state=self.seed_)
        f.fit(X)
        if median is not None:
            # fitted on the value the moments' pass sampled; gamma_ holds it, gamma says how
            f.set_params(gamma="median")
        return f

    def _prepare_targets(self, y: Any, n_rows: int) -> tuple[Any, bool]:
        y = check_targets(y, n_rows, where=f"{type(self).__name__}: y")
        if not is_dask(y) and not np.issubdtype(host_dtype(y.dtype), np.number):
            raise InputError(f"{type(self).__name__}: y must be numeric, got dtype {y.dtype}.")
        one_d = y.ndim == 1
        Y = (y.reshape(-1, 1) if isinstance(y, np.ndarray) or is_dask(y)
             else namespace(y).reshape(y, (-1, 1))) if one_d else y
        return Y, one_d

    def _reduce(self, X: Any, Y: Any, maps: list[Any], n_folds: int,
                w: np.ndarray | None = None, sample: bool = False) -> list:
        products = self._products(X, maps, n_folds, w)
        self.gram_precision_ = products
        states, rows = self._pass(X, Y, maps, n_folds, 0, w, sample, products)
        self._keep_sample(rows)
        return states

    def _products(self, X: Any, maps: list[Any], n_folds: int, w: np.ndarray | None) -> str:
        """The precision of the pass's ZᵀZ products (the class Notes, "Precision")."""
        if n_folds or w is not None or len(maps) != 1 or host_dtype(X.dtype) != np.float32:
            return "float64"
        if self._auto_alpha():
            loo = getattr(self, "_loo", None) or {}
            return float32_products(X.dtype, not loo.get("every_row"))
        return float32_products(X.dtype, self._given_alpha_tolerates_float32(X, maps[0]))

    def _given_alpha_tolerates_float32(self, X: Any, features: Any) -> bool:
        fn, ops = feature_block_function(features, self._scaler())
        # a later partial_fit batch joins the rows already summed: the solve's spectrum
        # (and the rounding of every batch's Gram) grows with all of them
        n = int(X.shape[0]) + (int(self.n_samples_seen_) if "coef_" in self.__dict__ else 0)
        return alpha_tolerates_float32(first_features(X, fn, ops), n, self.alpha,
                                       self.fit_intercept)

    def _pass(self, X: Any, Y: Any, maps: list[Any], n_folds: int, row_start: int = 0,
              w: np.ndarray | None = None, sample: bool = False,
              products: str | None = None) -> tuple[list, Any]:
        # the maps' states and sampled rows (the classifier's calibration; None unless sample)
        fns, ops, counts = feature_block_functions(maps, self._scaler())
        sampler = self._row_sampler() if sample else None
        if products is None:
            products = self._products(X, maps, n_folds, w)
        summary = RidgeSummary(fns, counts, X.shape[1], Y.shape[1], host_dtype(X.dtype).str,
                               n_folds=n_folds, seed=self.seed_, weighted=w is not None,
                               sampler=sampler, products=products)
        XY = stack_xy(X, with_weights(Y, w))
        out = reduce_blocks(summary, XY, *ops, split_every=self.split_every, row_start=row_start,
                            name="ridge-summary", footprint=summary.memory(maps, XY),
                            where=f"{type(self).__name__} input X and targets y"
                                  + (" (with the row weights as a last column)" if w is not None
                                     else ""))
        rows = None if sampler is None else self._sampled_rows(
            sampler, out["sample"], w is not None, host_dtype(X.dtype).str)
        return out["maps"], rows

    def _store_state(self, state: dict, rows: int | None = None) -> None:
        # n is the total weight of the rows (their number without sample_weight)
        self.n_samples_seen_ = int(state["n"]) if rows is None else int(rows)
        self.weight_sum_ = float(state["n"])
        self.zsum_ = np.asarray(to_host(state["sum"]), dtype=np.float64)
        self.gram_ = np.asarray(to_host(state["ztz"]), dtype=np.float64)
        self.zty_ = np.asarray(to_host(state["zty"]), dtype=np.float64)
        self.ysum_ = np.asarray(to_host(state["ysum"]), dtype=np.float64)
        self.yty_ = np.asarray(to_host(state["yty"]), dtype=np.float64)

    def _state(self) -> dict:
        return {"n": getattr(self, "weight_sum_", self.n_samples_seen_), "sum": self.zsum_,
                "ztz": self.gram_, "zty": self.zty_, "ysum": self.ysum_, "yty": self.yty_}

    def _choose_alpha(self, state: dict, system: RidgeSystem | None = None) -> None:
        """``alpha_`` of ``alpha="auto"`` (:func:`~distsketch.estimators.ridge.defaults.auto_alpha`)."""
        scaled = "standardised" if self._scaler() is not None else "not standardised"
        self.alpha_, results = auto_alpha(
            state, self.fit_intercept, self.n_samples_seen_, self.__dict__.pop("_loo", None),
            f"{type(self).__name__}: gamma={getattr(self, 'gamma_', None)}, {scaled}", system)
        self.cv_results_: dict[str, Any] | None = results

    def _set_solution(self, state: dict, choose: bool = True) -> None:
        # one RidgeSystem: GCV's factorisation also gives the solution and calibration leverages
        system = RidgeSystem(state, self.fit_intercept)
        if choose and self._auto_alpha():
            self._choose_alpha(state, system)
        alphas = np.atleast_1d(np.asarray(self.alpha_, dtype=np.float64))
        W, c = system.solve(alphas)
        path = np.ndim(self.alpha_) > 0
        coef = np.transpose(W, (0, 2, 1))                            # (p, t, m)
        if self.single_output_:
            coef, c = coef[:, 0, :], c[:, 0]
        if not path:
            coef, c = coef[0], c[0]
        self.coef_ = coef
        self.intercept_ = c if isinstance(c, np.ndarray) else float(c)
        self._W = W
        self._calibrate(system)

    def _calibrate(self, system: RidgeSystem) -> None:
        """After a solve: nothing for the regressor (the classifier fits ``proba_scale_``)."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = not isinstance(self, ClassifierMixin)
        return tags

    # ---------------------------------------------------------------- fitting
    @fit_context
    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> SketchedKernelRidge:
        """Standardise, fit the feature map (if unfitted), reduce ZᵀZ and Zᵀy in one pass, solve.

        Parameters
        ----------
        X : ndarray, dask array, Zarr array or path of shape (n_samples, n_features)
        y : array-like or dask array of shape (n_samples,) or (n_samples, n_targets)
        sample_weight : array-like of shape (n_samples,), optional
            Row weights of the squared errors (as scikit-learn's ``Ridge``):
            the summary sums ``w zzᵀ``, ``w z yᵀ`` ...; not with ``cv``.  The
            standardisation and the default feature count use the rows
            unweighted.  Finite, non-negative, and totalling at most
            ``ridge_summary.MAX_WEIGHT_SUM`` (about 5.8e76; weights are
            relative, so divide larger ones by a constant).

        Returns
        -------
        self
        """
        if y is None:
            raise InputError(f"{type(self).__name__} requires y to be passed, but the target y is None.")
        self.__dict__.pop("_W", None)
        X, Y = self._start_fit(X, y)
        if self.cv is None and self.gammas is not None:
            raise ConfigError(f"{type(self).__name__}: gammas needs cv (k folds) to choose one; "
                              "set cv=5 or drop gammas.")
        w = self._weights_of(sample_weight, X.shape[0])
        self._check_params_for_shape(*X.shape)  # sizes of the map before the scaling pass
        Xs = self._fit_scaler(X, Y)
        self.gamma_search_ = None if self._loo is None else self._loo["search"]
        if w is not None and self._loo is not None:
            self._loo["every_row"] = False  # the leave-one-out is unweighted: alpha by GCV
        if self.cv is None:
            self.features_ = self._make_features(Xs, n_rows=X.shape[0])
            state = self._reduce(X, Y, [self.features_], 0, w=w, sample=True)[0]
            self.alpha_ = self._fixed_alpha()
            self.gamma_, self.kernel_params_ = map_kernel(self.features_)
            self.cv_results_ = None
        else:
            state = fit_cv(self, X, Xs, Y)
        self._store_state(state, rows=X.shape[0])
        self._set_solution(state, choose=self.cv is None)
        loo = self.__dict__.pop("_loo", None)
        if loo is not None:  # a given alpha: the default map's gamma choice alone
            self.cv_results_ = loo_results(loo)
        return self

    def _weights_of(self, sample_weight: Any, n_rows: int) -> np.ndarray | None:
        if sample_weight is None:
            return None
        if self.cv is not None:
            raise ConfigError(f"{type(self).__name__}: sample_weight with cv is not supported (the "
                              "folds score rows unweighted); drop one of them.")
        return check_sample_weight(sample_weight, n_rows, f"{type(self).__name__}.fit")

    def _fixed_alpha(self) -> Any:
        # "auto": a placeholder until _set_solution chooses alpha_ from the summary
        if self._auto_alpha():
            return float("nan")
        return np.asarray(self.alpha, dtype=np.float64) if np.ndim(self.alpha) else \
            float(self.alpha)

    def _fold_solutions(self, folds: list, totals: list,
                        alphas: np.ndarray) -> Iterator[tuple[int, int, dict, Any, Any]]:
        """``(g, f, state, W, c)`` for every map g and non-empty fold f, trained without f."""
        for g, fold_states in enumerate(folds):
            for f, s in enumerate(fold_states):
                if s["n"] == 0:
                    continue
                system = RidgeSystem(add_ridge_states(totals[g], s, -1.0), self.fit_intercept)
                W, c = system.solve(alphas)
                yield g, f, s, W, c

    def _cv_scores(self, X: Any, Y: Any, maps: list, folds: list, totals: list,
                   alphas: np.ndarray) -> dict[str, np.ndarray]:
        """Validation scores of shape (n_gammas, n_alphas) from the fold summaries: the MSE."""
        mse = np.zeros((len(maps), len(alphas)))
        for g, _, s, W, c in self._fold_solutions(folds, totals, alphas):
            mse[g] += summary_sse(s, W, c).sum(axis=1)
        mse /= max(1, totals[0]["n"]) * Y.shape[1]
        return {"mse": mse}

    @staticmethod
    def _cv_best(scores: dict[str, np.ndarray]) -> tuple[int, int]:
        """(gamma index, alpha index) of the best candidate: the lowest MSE."""
        mse = scores["mse"]
        g, a = np.unravel_index(int(np.argmin(mse)), mse.shape)
        return int(g), int(a)

    @fit_context
    def partial_fit(self, X: Any, y: Any, *, sample_weight: Any = None) -> SketchedKernelRidge:
        """Merge the summary of new rows into the model and re-solve.

        The first call fits the feature map on its rows (choose a data-independent
        map, e.g. random features, or pass a fitted one).  ``cv`` is not used.

        Parameters
        ----------
        X : array of shape (n_rows, n_features)
        y : array of shape (n_rows,) or (n_rows, n_targets)
        sample_weight : array of shape (n_rows,), optional
            Row weights, as in :meth:`fit`.

        Returns
        -------
        self
        """
        if hasattr(self, "coef_"):
            # new rows are numbered after those already seen, as in fit on all rows
            return self.fold(self.summarize(X, y, row_offset=self.n_samples_seen_,
                                            sample_weight=sample_weight))
        X, Y = self._start_fit(X, y)
        self._check_params_for_shape(*X.shape)
        self.features_ = self._make_features(self._fit_scaler(X, Y))
        self.gamma_search_ = None if self._loo is None else self._loo["search"]
        self.alpha_ = self._fixed_alpha()
        self.gamma_, self.kernel_params_ = map_kernel(self.features_)
        self.cv_results_ = None
        w = None if sample_weight is None else check_sample_weight(
            sample_weight, X.shape[0], f"{type(self).__name__}.partial_fit")
        if w is not None and self._loo is not None:
            self._loo["every_row"] = False
        state = self._reduce(X, Y, [self.features_], 0, w=w, sample=True)[0]
        self._store_state(state, rows=X.shape[0])
        self._set_solution(state)
        self.__dict__.pop("_loo", None)
        return self

    # ---------------------------------------------------------------- prediction
    def _weights(self) -> tuple[np.ndarray, np.ndarray]:
        if getattr(self, "_W", None) is None:
            # a loaded model: the weights it was saved with (no new factorisation, and the
            # same bits as before saving whichever factorisation solved them)
            self._W = self._weights_of_coef()
        alphas = np.atleast_1d(np.asarray(self.alpha_, dtype=np.float64))
        W = self._W                                                      # (p, m, t)
        Wm = np.transpose(W, (1, 0, 2)).reshape(W.shape[1], -1)          # (m, p*t)
        c = np.atleast_1d(np.asarray(self.intercept_, dtype=np.float64))
        c = c.reshape(len(alphas), -1).reshape(-1)
        return Wm, c

    def _weights_of_coef(self) -> np.ndarray:
        """``coef_`` as the solve's ``W`` of shape (p, m, t) (see :meth:`_set_solution`)."""
        coef = np.asarray(self.coef_, dtype=np.float64)
        if np.ndim(self.alpha_) == 0:
            coef = coef[None]
        if self.single_output_:
            coef = coef[:, None, :]
        return np.transpose(coef, (0, 2, 1))

    def _decision(self, X: Any) -> Any:
        self._check_is_fitted("coef_")
        X = self._check_input(X, reset=False)
        fn, ops = feature_block_function(self.features_, self._scaler())
        Wm, c = self._weights()
        m = Wm.shape[0]
        return map_blocks(X, FiniteRows(PredictBlock(fn, len(ops)), "ridge predict"),
                          *ops, Wm, c, n_out=Wm.shape[1],
                          dtype=np.float64,
                          footprint=PredictBlock.footprint(X.shape[1], m, Wm.shape[1]),
                          name="ridge-predict")

    def _shape_output(self, out: Any) -> Any:
        p = np.atleast_1d(self.alpha_).size
        path = np.ndim(self.alpha_) > 0
        if self.single_output_:
            return out if path else out[:, 0]
        if path:
            return out.reshape(out.shape[0], p, self.n_targets_)
        return out

    def predict(self, X: Any) -> Any:
        """Predict ``z(x)ᵀw + b`` blockwise.

        Parameters
        ----------
        X : ndarray or dask array of shape (n_samples, n_features)

        Returns
        -------
        ndarray or dask array of shape (n_samples,), (n_samples, n_targets),
        (n_samples, n_alphas) or (n_samples, n_alphas, n_targets)
            Same kind as X.
        """
        return self._shape_output(self._decision(X))

    def score(self, X: Any, y: Any, sample_weight: Any = None, metric: str = "r2") -> Any:
        """R² (default), RMSE or MAE of ``predict(X)``; one value per λ on a path.

        Parameters
        ----------
        X : array of shape (n_samples, n_features)
        y : array of shape (n_samples,) or (n_samples, n_targets)
        sample_weight : array of shape (n_samples,), optional
            Row weights of the means (weighted R² as scikit-learn's ``r2_score``).
        metric : {"r2", "rmse", "mae"}, default "r2"
            Averaged over targets (:func:`distsketch.metrics.regression_scores`).
            RMSE and MAE are errors: lower is better.

        Returns
        -------
        float, or ndarray of shape (n_alphas,) on a path
        """
        if metric not in REGRESSION_METRICS:
            raise ConfigError(f"{type(self).__name__}.score: metric={metric!r} is not one of "
                              f"{', '.join(REGRESSION_METRICS)}.")
        pred = to_numpy(self._decision(X))
        Y = to_numpy(y).astype(np.float64)
        if Y.shape[0] != pred.shape[0]:
            raise InputError(f"y has {Y.shape[0]} rows but X has {pred.shape[0]}.")
        P = pred.reshape(pred.shape[0], np.atleast_1d(self.alpha_).size, -1)
        out = np.array([regression_scores(Y, Pk, sample_weight)[metric] for Pk in P.transpose(1, 0, 2)])
        return out if np.ndim(self.alpha_) > 0 else float(out[0])

    def kernel_approx(self, A: np.ndarray, B: np.ndarray | None = None) -> np.ndarray:
        """The kernel block ``z(A) z(B)ᵀ`` of the fitted feature map."""
        self._check_is_fitted("features_")
        sc = self._scaler()

        def z(M: np.ndarray) -> np.ndarray:
            M = np.asarray(M) if sc is None else standardize_rows(np.asarray(M), *sc)
            return np.asarray(to_numpy(self.features_.transform(M)), dtype=np.float64)

        return z(A) @ (z(A) if B is None else z(B)).T
