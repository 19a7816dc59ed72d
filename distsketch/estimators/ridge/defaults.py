"""What :class:`~distsketch.estimators.ridge.regressor.SketchedKernelRidge` chooses by itself
(standardisation, feature count, the default map's gamma, ``alpha="auto"``; see its
``features``, ``alpha`` and ``standardize`` parameters), and the per-block feature and
prediction functions shared with the classifier and the statistical-dimension sketch.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from distsketch.errors import ConfigError
from distsketch.estimators.base import RowMapTransformer
from distsketch.estimators.ridge.gamma_search import (
    GAMMA_FACTORS,
    GCV_GRID,
    loo_kernel_path,
    search_gamma,
)
from distsketch.estimators.ridge.system import RidgeSystem
from distsketch.footprint import Footprint
from distsketch.graph import compute
from distsketch.ops.linalg import row_stable_matmul
from distsketch.ops.namespace import asarray, host_dtype, namespace, to_host, xp_dtype
from distsketch.summaries.base import takes_out
from distsketch.summaries.ridge import dense_float64
from distsketch.validation import is_dask
from distsketch.validation.finite import is_array_api

logger = logging.getLogger("distsketch")

__all__ = [
    "DEFAULT_MAX_FEATURES",
    "GAMMA_FACTORS",
    "GCV_FEATURE_GRID",
    "GCV_GRID",
    "MIN_DEFAULT_FEATURES",
    "FeatureBlock",
    "PredictBlock",
    "StandardizedMap",
    "auto_alpha",
    "default_n_features",
    "feature_block_function",
    "feature_block_functions",
    "features_fitted",
    "gamma_search_note",
    "gcv_path",
    "loo_default_kernel",
    "loo_kernel_path",
    "loo_results",
    "map_gamma",
    "map_kernel",
    "positive_values",
    "rows_at",
    "search_gamma",
    "standardize_rows",
    "standardizes",
]

#: largest width of the default random Fourier features (an m × m float64 state: 32 MiB)
DEFAULT_MAX_FEATURES = 2048

#: smallest width of the default random Fourier features (tables of up to 512 rows)
MIN_DEFAULT_FEATURES = 1024

#: alpha candidates of GCV on a feature summary, relative to the mean eigenvalue of the
#: centred ZᵀZ.  The floor is 1e-3: with n ≫ m, GCV (seeing only the training rows) keeps
#: falling towards λ → 0 while ‖coef‖ grows without bound, and random features do not
#: decay away from the data, so one off-distribution row then predicts garbage (diamonds,
#: 40 000 rows, 2048 features: λ = 1e-8 · mean eigenvalue gave test R² 0.43 from a single
#: row; 1e-3 gives 0.989, train R² 0.9886 against 0.9910).
GCV_FEATURE_GRID = np.logspace(-3, 2, 21)


def positive_values(values: Any, name: str) -> np.ndarray:
    """``values`` as a non-empty 1-D float64 array of finite numbers > 0 (else a ConfigError)."""
    arr = np.atleast_1d(np.asarray(values, dtype=np.float64))
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ConfigError(
            f"{name} must be a positive number or a non-empty 1-D array of positive numbers "
            f"(the regularisation λ > 0); got {values!r}."
        )
    return arr


def default_n_features(n_rows: int | None) -> int:
    """Width of the default feature map: ``min(2048, max(1024, 2 · n_rows))``.

    Far fewer features than rows approximate the kernel too coarsely where
    rows are few (512 features cost breast cancer's 426 training rows 1.6
    points against 1024; ``benchmarks/RESULTS.md``), while each m³
    factorisation at m = 2048 costs ~1 s on a busy core, which a table of a
    few hundred rows does not repay.  ``n_rows=None`` (unknown, as in
    ``partial_fit``) gives :data:`DEFAULT_MAX_FEATURES`.
    """
    if n_rows is None:
        return DEFAULT_MAX_FEATURES
    return int(min(DEFAULT_MAX_FEATURES, max(MIN_DEFAULT_FEATURES, 2 * int(n_rows))))


# --------------------------------------------------------------------------- feature maps

class _TransformCall:
    """Per-block call of a feature map that is not a RowMapTransformer (pickled whole)."""

    def __init__(self, features: Any):
        self.features = features

    def __call__(self, block: np.ndarray, offset: int) -> np.ndarray:
        return np.asarray(self.features.transform(block))


class StandardizedMap:
    """``fn((block − mean) / scale, offset, *operands)``; mean and scale are the last two operands."""

    def __init__(self, fn: Any, n_ops: int):
        self.fn = fn
        self.n_ops = n_ops

    @property
    def accepts_out(self) -> bool:
        # out= passes through to the map (summaries.base.takes_out)
        return takes_out(self.fn)

    def __call__(self, block: np.ndarray, offset: int, *operands: Any, **out: Any) -> Any:
        mean, scale = operands[self.n_ops], operands[self.n_ops + 1]
        return self.fn(standardize_rows(block, mean, scale), offset, *operands[: self.n_ops],
                       **out)


def feature_block_function(features: Any, scaler: tuple | None = None) -> tuple[Any, tuple]:
    """``(fn, operands)`` with ``fn(block, row_offset, *operands)`` = rows of z(X).

    Distsketch row maps ship their operators once as graph operands; any other
    fitted transformer (with ``transform``) is called per block.  With
    ``scaler = (mean, scale)`` rows are standardised first (the two vectors
    travel as operands too), except by a map with ``scaled_operands``
    (random Fourier features, offset form), which takes the scaling into its
    operator and maps raw rows.
    """
    if isinstance(features, RowMapTransformer):
        fn, ops = features._map_block, tuple(features._operands())
    elif hasattr(features, "transform"):
        fn, ops = _TransformCall(features), ()
    else:
        raise ConfigError(
            f"features={type(features).__name__} has no transform method; pass a distsketch "
            "feature map such as RandomFourierFeatures or PolySketch."
        )
    if scaler is None:
        return fn, ops
    folds = getattr(features, "scaled_operands", None)
    folded = None if folds is None else folds(scaler[0], scaler[1])
    if folded is not None:
        return fn, tuple(folded)
    return StandardizedMap(fn, len(ops)), (*ops, scaler[0], scaler[1])


def feature_block_functions(maps: list[Any], scaler: tuple | None = None
                            ) -> tuple[list[Any], list[Any], list[int]]:
    """:func:`feature_block_function` of several maps, for one pass computing them all: the
    functions, every map's operands in turn and their counts (as
    :func:`~distsketch.summaries.ridge.map_features` takes them)."""
    fns: list[Any] = []
    ops: list[Any] = []
    counts: list[int] = []
    for f in maps:
        fn, o = feature_block_function(f, scaler)
        fns.append(fn)
        ops.extend(o)
        counts.append(len(o))
    return fns, ops, counts


def map_gamma(features: Any) -> float | None:
    """The kernel scale a fitted feature map used (None when it has none)."""
    g = getattr(features, "gamma_", None)
    if g is None:
        g = getattr(features, "gamma", None)
    return float(g) if isinstance(g, (int, float)) and not isinstance(g, bool) else None


def map_kernel(features: Any) -> tuple[float | None, dict[str, Any]]:
    """The kernel scale and parameters a fitted feature map used (None and {} without a kernel)."""
    g = map_gamma(features)
    params = getattr(features, "kernel_params_", None)
    if isinstance(params, dict):
        return g, dict(params)
    return g, {} if g is None else {"gamma": g}


def features_fitted(features: Any) -> bool:
    """Whether ``features`` (a feature map given as a parameter) was fitted before."""
    if hasattr(features, "n_output_features_"):
        return True
    return not isinstance(features, RowMapTransformer) and any(
        k.endswith("_") and not k.startswith("_") for k in vars(features))


class FeatureBlock:
    """A feature map's block function and its operand count (picklable), giving dense float64
    features to subclasses (the prediction task, a composed sketch)."""

    def __init__(self, fn: Any, n_ops: int):
        self.fn = fn
        self.n_ops = n_ops

    def features(self, block: np.ndarray, offset: int, operands: tuple) -> np.ndarray:
        return dense_float64(self.fn(block, offset, *operands[: self.n_ops]))


class PredictBlock(FeatureBlock):
    """Rows of ``z(x)ᵀW + c`` for a block (the prediction task)."""

    @staticmethod
    def footprint(n_features: int, n_components: int, n_targets: int) -> Footprint:
        """Per row: the input row, its features and their scaled copy, the predictions
        (float64); fixed: ``W``."""
        return Footprint(per_row=8.0 * (n_features + 2 * n_components + n_targets),
                         fixed=8.0 * n_components * n_targets)

    def __call__(self, block: np.ndarray, offset: int, *operands: Any) -> np.ndarray:
        Z = self.features(block, offset, operands)
        W, c = operands[self.n_ops], operands[self.n_ops + 1]
        if not isinstance(Z, np.ndarray):  # host W and c move to the features' device
            W, c = asarray(W, like=Z), asarray(c, like=Z)
        # chunking-invariant rows: the same GEMM shape whatever the block
        return row_stable_matmul(Z, W, offset) + c[None, :]


# --------------------------------------------------------------------------- standardisation

def standardize_rows(X: Any, mean: np.ndarray, scale: np.ndarray) -> Any:
    """``(X − mean) / scale`` in X's float type (float64 for integer input); lazy on dask."""
    dt = host_dtype(X.dtype) if host_dtype(X.dtype).kind == "f" else np.dtype(np.float64)
    mu = np.asarray(mean, dtype=np.float64).astype(dt)
    sd = np.asarray(scale, dtype=np.float64).astype(dt)
    if is_dask(X):
        return ((X.astype(dt) - mu) / sd).astype(dt)
    if not isinstance(X, np.ndarray) and is_array_api(X):
        xp = namespace(X)  # in X's namespace, on its device; the statistics move there once
        xdt = xp_dtype(xp, host_dtype(dt))
        return (xp.astype(X, xdt) - asarray(mu, like=X)) / asarray(sd, like=X)
    return ((np.asarray(X, dtype=dt) - mu) / sd).astype(dt, copy=False)


def rows_at(Y: Any, index: np.ndarray) -> np.ndarray:
    """Host float64 rows ``Y[index]`` of targets (sorted global row indices of a sample).

    Dask targets compute those rows alone; array-API ones are gathered on their device.
    """
    index = np.asarray(index, dtype=np.int64)
    if is_dask(Y):
        return np.asarray(to_host(compute(Y[index], progress=False)[0]),  # CuPy blocks too
                          dtype=np.float64)
    if not isinstance(Y, np.ndarray) and is_array_api(Y):
        Y = namespace(Y).take(Y, asarray(index, like=Y), axis=0)
        return np.asarray(to_host(Y), dtype=np.float64)
    return np.asarray(Y, dtype=np.float64)[index]


def wants_median_gamma(features: Any) -> bool:
    """Whether an unfitted feature map will resolve ``gamma="median"`` on the rows it is fitted on."""
    if features is None or features_fitted(features) or not hasattr(features, "get_params"):
        return False
    return features.get_params(deep=False).get("gamma") == "median"


# --------------------------------------------------------------------------- solve and alpha

def gcv_path(state: dict, fit_intercept: bool, grid: np.ndarray = GCV_FEATURE_GRID,
             n_rows: int | None = None, system: RidgeSystem | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
    """Generalised cross-validation of the ridge path of a summary.

    ``GCV(λ) = n · RSS(λ) / (n − df(λ))²`` with ``df(λ) = Σ eᵢ / (eᵢ + λ)``
    (+1 for the intercept) over the eigenvalues e of the centred ``ZᵀZ``,
    ``RSS`` summed over targets (Golub, Heath, Wahba 1979), at ``grid`` × the mean
    eigenvalue ``trace / m``.  ``n_rows`` is the n of the formula when the state's ``n``
    is a total of row weights; a given ``system`` lends its factorisation (kept for
    the solve at the chosen λ).  Returns ``(alphas, gcv)``, each (p,), ``gcv`` inf
    where ``df > n − 1`` (less than one residual degree of freedom: the fit interpolates).

    Notes
    -----
    One O(m³) reduction ``A = Q T Qᵀ`` (the eigendecomposition instead where
    the system already holds one), then O(p · m · t): with ``u = (T + λI)⁻¹Qᵀb``,
    ``RSS(λ) = ‖y_c‖² − (2 bᵀQu − uᵀTu)``, from the summary alone (no pass
    over X).
    """
    system = RidgeSystem(state, fit_intercept) if system is None else system
    return system.gcv(grid, n_rows)


def loo_default_kernel(S: np.ndarray, Y: np.ndarray, n_rows: int, fit_intercept: bool,
                       owner: str) -> dict[str, Any]:
    """gamma of the default map (and its alpha) by leave-one-out on sample rows (:func:`search_gamma`).

    ``S`` (k, d) are standardised sample rows of an input of ``n_rows`` rows (the alpha
    is the model's when k == n_rows).  Returns ``gamma``, ``alpha``, ``every_row``,
    ``search`` (what :func:`gamma_search_note` reports) and the ``cv_results_`` entries
    ``gammas``, ``loo_alphas``, ``loo_mse`` and ``loo_rows``.
    """
    path = search_gamma(S, Y, fit_intercept, GCV_GRID)
    gammas, factors = path["gammas"], path["factors"]
    # the lowest error, ties to the smaller gamma then alpha; a classifier too is scored by
    # the squared error of its ±1 targets (as RidgeClassifierCV): on a few hundred rows the
    # accuracy moves in steps of one row, and choosing by it picked worse gammas
    # (benchmarks/RESULTS.md)
    g, a = map(int, np.unravel_index(int(np.argmin(path["mse"])), path["mse"].shape))
    search = {"factors": [float(f) for f in factors], "chosen": float(factors[g]),
              "widened": [float(f) for f in path["widened"]],
              "at_limit": bool(path["at_limit"])}
    search["note"] = gamma_search_note(search)
    logger.info("%s: gamma=%.3g (%.3g / n_features) of the default features chosen by "
                "leave-one-out on %d sampled rows among %s / n_features", owner, gammas[g],
                factors[g], S.shape[0], ", ".join(f"{v:g}" for v in factors))
    if search["note"] is not None:
        (logger.warning if search["at_limit"] else logger.info)("%s: %s", owner, search["note"])
    return {"gamma": float(gammas[g]), "alpha": float(path["alphas"][g, a]),
            "every_row": S.shape[0] == n_rows, "gammas": gammas.tolist(),
            "loo_alphas": path["alphas"].tolist(),
            "loo_mse": [[float(v) if np.isfinite(v) else None for v in row]
                        for row in path["mse"]], "loo_rows": int(S.shape[0]), "search": search}


def gamma_search_note(search: dict[str, Any]) -> str | None:
    """A sentence on a gamma chosen beyond :data:`GAMMA_FACTORS` (None when it is inside)."""
    lo, hi = GAMMA_FACTORS[0], GAMMA_FACTORS[-1]
    chosen = search["chosen"]
    if lo <= chosen <= hi:
        return None
    edge = hi if chosen > hi else lo
    note = (f"gamma {chosen:g} / n_features: the best of the grid {lo:g} … {hi:g} / n_features "
            f"was its edge {edge:g}, so the search went on "
            f"{'up' if chosen > hi else 'down'} to {chosen:g}")
    if search["at_limit"]:
        note += (", the last step the widening allows, and is still best there: pass "
                 "features=RandomFourierFeatures(gamma=...) with cv and gammas to search further")
    return note + "."


def loo_results(loo: dict[str, Any]) -> dict[str, Any]:
    """The ``cv_results_`` entries of a :func:`loo_default_kernel` choice."""
    return {k: loo[k] for k in ("gammas", "loo_alphas", "loo_mse", "loo_rows")}


def auto_alpha(state: dict, fit_intercept: bool, n_rows: int, loo: dict | None,
               owner: str, system: RidgeSystem | None = None) -> tuple[float, dict[str, Any]]:
    """``(alpha_, cv_results_)`` of ``alpha="auto"``.

    The leave-one-out choice of :func:`loo_default_kernel` when its sample
    held every unweighted row (``loo["every_row"]``), else the GCV minimum of
    :func:`gcv_path` over the summary, whose factorisation of ``system`` then
    serves the solve at the choice.
    """
    m = int(state["ztz"].shape[0])
    results: dict[str, Any] = {"gammas": None}
    if loo is not None:
        results = loo_results(loo)
        if loo["every_row"]:
            g = results["gammas"].index(loo["gamma"])
            logger.info("%s: alpha=%.3g chosen with gamma by leave-one-out on every row; %d "
                        "features", owner, loo["alpha"], m)
            return loo["alpha"], {**results, "alphas": results["loo_alphas"][g]}
    alphas, gcv = gcv_path(state, fit_intercept, GCV_FEATURE_GRID, n_rows=n_rows, system=system)
    alpha = float(alphas[int(np.argmin(gcv))])
    # GCV is undefined (inf) where df = n: None
    results.update(alphas=alphas.tolist(),
                   gcv=[[float(v) if np.isfinite(v) else None for v in gcv]])
    logger.info("%s: alpha=%.3g chosen by GCV among %d values in [%.3g, %.3g]; %d features",
                owner, alpha, alphas.size, alphas[0], alphas[-1], m)
    return alpha, results


def standardizes(setting: Any, features: Any) -> bool:
    """Whether a ridge model with ``standardize=setting`` and ``features`` scales its columns
    (``"auto"``: as the ``standardize`` parameter of ``SketchedKernelRidge`` says)."""
    if not isinstance(setting, str):
        return bool(setting)
    if features is None:
        return True
    params = features.get_params(deep=False) if hasattr(features, "get_params") else {}
    return "gamma" in params and (params["gamma"] is None or params["gamma"] == "median")
