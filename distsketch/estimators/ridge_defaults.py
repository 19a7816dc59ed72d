"""What :class:`~distsketch.estimators.ridge.SketchedKernelRidge` chooses by itself.

* **Standardisation** (``standardize=True``): column means and standard
  deviations from one tree-reduced pass (:class:`~distsketch.summaries.moments.ColumnMoments`,
  a 2·d + 1 state per block), applied to every block before the feature map.
  A feature map such as random Fourier features needs standardised rows
  *before* it maps them, so the moments cannot come from the same pass as
  ``ZᵀZ``; the extra pass reads X once and does no other work.
* **Feature count** of the default random Fourier features:
  ``min(DEFAULT_MAX_FEATURES, n_rows)``.
* **alpha** (``alpha="auto"``): the minimiser of generalised cross-validation
  over a log grid, from the eigendecomposition of the centred ``ZᵀZ`` that
  the solve needs anyway.

Also the per-block feature and prediction functions (:func:`feature_block_function`),
shared with the classifier and the statistical-dimension sketch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distsketch.blas import single_threaded_blas
from distsketch.errors import ConfigError
from distsketch.estimators.base import RowMapTransformer
from distsketch.estimators.ridge_summary import dense_float64
from distsketch.graph import reduce_blocks
from distsketch.ops.linalg import row_stable_matmul
from distsketch.ops.namespace import asarray, host_dtype, namespace, to_host, xp_dtype
from distsketch.ops.sketch_solve import centered_normal_equations
from distsketch.summaries.moments import ColumnMoments, MomentsAndSample, column_scale
from distsketch.validation import is_dask
from distsketch.validation.finite import is_array_api

__all__ = [
    "DEFAULT_MAX_FEATURES",
    "GCV_GRID",
    "FeatureBlock",
    "default_n_features",
    "feature_block_function",
    "feature_block_functions",
    "fit_scaler",
    "gcv_path",
    "positive_values",
    "standardize_rows",
    "standardizes",
]

#: largest width of the default random Fourier features (an m × m float64 state: 32 MiB)
DEFAULT_MAX_FEATURES = 2048

#: alpha candidates of ``alpha="auto"``, relative to the mean eigenvalue of the centred ZᵀZ
GCV_GRID = np.logspace(-8, 2, 41)


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
    """Width of the default feature map: ``min(DEFAULT_MAX_FEATURES, n_rows)``, at least 1.

    More features than rows add kernel accuracy at a cost that grows as m³
    while the rank of ``ZᵀZ`` stays at most n; ``n_rows=None`` (unknown)
    gives ``DEFAULT_MAX_FEATURES``.
    """
    if n_rows is None:
        return DEFAULT_MAX_FEATURES
    return int(max(1, min(DEFAULT_MAX_FEATURES, int(n_rows))))


# --------------------------------------------------------------------------- feature maps

class _TransformCall:
    """Per-block call of a feature map that is not a RowMapTransformer (pickled whole)."""

    def __init__(self, features: Any):
        self.features = features

    def __call__(self, block: np.ndarray, offset: int) -> np.ndarray:
        return np.asarray(self.features.transform(block))


class _Standardized:
    """``fn((block − mean) / scale, offset, *operands)``; mean and scale are the last two operands."""

    def __init__(self, fn: Any, n_ops: int):
        self.fn = fn
        self.n_ops = n_ops

    def __call__(self, block: np.ndarray, offset: int, *operands: Any) -> Any:
        mean, scale = operands[self.n_ops], operands[self.n_ops + 1]
        return self.fn(standardize_rows(block, mean, scale), offset, *operands[: self.n_ops])


def feature_block_function(features: Any, scaler: tuple | None = None) -> tuple[Any, tuple]:
    """``(fn, operands)`` with ``fn(block, row_offset, *operands)`` = rows of z(X).

    Distsketch row maps ship their operators once as graph operands; any other
    fitted transformer (with ``transform``) is called per block.  With
    ``scaler = (mean, scale)`` rows are standardised first (the two vectors
    travel as operands too).
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
    return _Standardized(fn, len(ops)), (*ops, scaler[0], scaler[1])


def feature_block_functions(maps: list[Any], scaler: tuple | None = None
                            ) -> tuple[list[Any], list[Any], list[int]]:
    """:func:`feature_block_function` of several maps, for one pass computing them all.

    Returns the functions, the operands of every map in turn and each map's
    number of operands (the ``functions``, operands and ``n_operands`` of
    :func:`~distsketch.estimators.ridge_summary.map_features`).
    """
    fns: list[Any] = []
    ops: list[Any] = []
    counts: list[int] = []
    for f in maps:
        fn, o = feature_block_function(f, scaler)
        fns.append(fn)
        ops.extend(o)
        counts.append(len(o))
    return fns, ops, counts


def _map_gamma(features: Any) -> float | None:
    """The kernel scale a fitted feature map used (None when it has none)."""
    g = getattr(features, "gamma_", None)
    if g is None:
        g = getattr(features, "gamma", None)
    return float(g) if isinstance(g, (int, float)) and not isinstance(g, bool) else None


def _map_kernel(features: Any) -> tuple[float | None, dict[str, Any]]:
    """The kernel scale and parameters a fitted feature map used (None and {} without a kernel)."""
    g = _map_gamma(features)
    params = getattr(features, "kernel_params_", None)
    if isinstance(params, dict):
        return g, dict(params)
    return g, {} if g is None else {"gamma": g}


def _is_fitted(features: Any) -> bool:
    if hasattr(features, "n_output_features_"):
        return True
    return not isinstance(features, RowMapTransformer) and any(
        k.endswith("_") and not k.startswith("_") for k in vars(features))


class FeatureBlock:
    """A feature map's block function and how many operands it takes (picklable).

    :meth:`features` gives a block's dense float64 features; subclasses use
    them (the prediction task, a composed sketch).
    """

    def __init__(self, fn: Any, n_ops: int):
        self.fn = fn
        self.n_ops = n_ops

    def features(self, block: np.ndarray, offset: int, operands: tuple) -> np.ndarray:
        return dense_float64(self.fn(block, offset, *operands[: self.n_ops]))


class _PredictBlock(FeatureBlock):
    """Rows of ``z(x)ᵀW + c`` for a block (the prediction task)."""

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


def fit_scaler(X: Any, where: str, sampler: Any = None) -> tuple[np.ndarray, np.ndarray, Any]:
    """Column ``(mean, scale)`` of X in one tree-reduced pass (constant columns: scale 1).

    With a ``sampler`` (a bottom-k row sample such as
    :func:`~distsketch.estimators.kernel_params.median_sampler`) the same pass
    also draws its rows: the third item is ``(index, rows)`` of the sample
    (raw, not standardised), else None.
    """
    d = int(X.shape[1])
    if sampler is None:
        state = reduce_blocks(ColumnMoments(), X, bytes_per_row=16.0 * d, fixed_bytes=24.0 * d,
                              name="ridge-standardize", where=where)
        return (*_host_scale(state), None)
    k = int(sampler.n_samples)
    state = reduce_blocks(MomentsAndSample(sampler), X, bytes_per_row=8.0 * (3 * d + 2),
                          fixed_bytes=24.0 * d + 16.0 * k * (d + 2), name="ridge-standardize",
                          where=where)
    return (*_host_scale(state["moments"]), sampler.finalize(state["sample"]))


def _host_scale(state: dict) -> tuple[np.ndarray, np.ndarray]:
    # the d column statistics are learned attributes: host NumPy whatever the input's namespace
    mean, scale = column_scale(state)
    return to_host(mean), to_host(scale)


def wants_median_gamma(features: Any) -> bool:
    """Whether an unfitted feature map will resolve ``gamma="median"`` on the rows it is fitted on."""
    if features is None or _is_fitted(features) or not hasattr(features, "get_params"):
        return False
    return features.get_params(deep=False).get("gamma") == "median"


# --------------------------------------------------------------------------- alpha by GCV

@single_threaded_blas
def gcv_path(state: dict, fit_intercept: bool, grid: np.ndarray = GCV_GRID,
             n_rows: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Generalised cross-validation of the ridge path of a summary.

    ``GCV(λ) = n · RSS(λ) / (n − df(λ))²`` with ``df(λ) = Σ eᵢ / (eᵢ + λ)``
    (+1 for the intercept) over the eigenvalues e of the centred ``ZᵀZ``,
    ``RSS`` summed over targets (Golub, Heath, Wahba 1979).

    Parameters
    ----------
    state : dict
        Ridge summary (``n``, ``sum``, ``ztz``, ``zty``, ``ysum``, ``yty``).
    fit_intercept : bool
    grid : ndarray, default :data:`GCV_GRID`
        Candidates relative to the mean eigenvalue ``trace / m``.
    n_rows : int, optional
        Number of rows n of the GCV formula when the state's ``n`` is a
        total of row weights (default: the state's ``n``).

    Returns
    -------
    alphas : ndarray of shape (p,)
    gcv : ndarray of shape (p,)
        ``inf`` where ``df > n − 1`` (less than one residual degree of
        freedom: the fit interpolates).

    Notes
    -----
    One O(m³) eigendecomposition, then O(p · m · t): with ``q = Vᵀ b``,
    ``RSS(λ) = ‖y_c‖² − Σᵢ qᵢ² (eᵢ + 2λ) / (eᵢ + λ)²``, from the summary
    alone (no pass over X).
    """
    A, b, _, ym = centered_normal_equations(state, fit_intercept)
    n = float(state["n"])
    evals, evecs = np.linalg.eigh(A)
    evals = np.clip(evals, 0.0, None)
    q2 = ((evecs.T @ b) ** 2).sum(axis=1)                       # (m,)
    yty = np.diag(np.atleast_2d(np.asarray(to_host(state["yty"]), dtype=np.float64)))
    yy = float(np.sum(yty - n * ym ** 2)) if fit_intercept else float(np.sum(yty))
    scale = max(float(evals.sum()) / max(evals.size, 1), np.finfo(np.float64).tiny)
    alphas = scale * np.asarray(grid, dtype=np.float64)
    den = evals[None, :] + alphas[:, None]
    rss = np.maximum(yy - (q2[None, :] * (evals[None, :] + 2 * alphas[:, None]) / den ** 2)
                     .sum(axis=1), 0.0)
    df = (evals[None, :] / den).sum(axis=1) + (1.0 if fit_intercept else 0.0)
    if n_rows is not None:
        n = float(n_rows)
    resid_df = n - df
    # fewer than one residual degree of freedom: the fit interpolates and GCV's 0/0 says
    # nothing (it can favour λ → 0 on noisy data)
    with np.errstate(divide="ignore", invalid="ignore"):
        gcv = np.where(resid_df >= 1.0, n * rss / resid_df ** 2, np.inf)
    return alphas, gcv


def standardizes(setting: Any, features: Any) -> bool:
    """Whether a ridge model with ``standardize=setting`` and ``features`` scales its columns.

    ``"auto"``: yes for the default map (None) and for a map whose ``gamma`` is
    chosen from the data (None or "median"); no for a map given a number for
    ``gamma``, or one without a ``gamma``: its scale is the caller's choice.
    """
    if not isinstance(setting, str):
        return bool(setting)
    if features is None:
        return True
    params = features.get_params(deep=False) if hasattr(features, "get_params") else {}
    return "gamma" in params and (params["gamma"] is None or params["gamma"] == "median")
