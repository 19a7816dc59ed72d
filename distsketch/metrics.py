"""Kernel approximation error metrics, exact for small n and on a row sample
for large n, computed blockwise.

Both functions take an *approximation*: any object with
``kernel_approx(A, B=None)`` returning the approximate kernel block G̃(A, B),
or a scikit-learn ``Pipeline`` whose last step has it (the earlier steps then
map the sampled rows first).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.linalg
import scipy.sparse.linalg

from distsketch.blas import single_threaded_blas
from distsketch.errors import ConfigError, InputError
from distsketch.ops.kernels import pairwise_kernel, resolve_kernel_params
from distsketch.ops.namespace import densify
from distsketch.ops.random import resolve_seed
from distsketch.summaries.landmarks import UniformLandmarks
from distsketch.validation import check_input, is_dask

__all__ = ["REGRESSION_METRICS", "kernel_errors", "model_kernel",
           "regression_scores", "relative_kernel_error", "sample_rows", "split_pipeline"]

#: what :func:`regression_scores` returns (and ``SketchedKernelRidge.score(metric=...)`` takes)
REGRESSION_METRICS = ("r2", "rmse", "mae")

_DENSE_LIMIT = 4096


def regression_scores(y_true: Any, y_pred: Any, sample_weight: Any = None) -> dict[str, float]:
    """R², root mean squared error and mean absolute error of predictions.

    Parameters
    ----------
    y_true, y_pred : array_like of shape (n,) or (n, t)
    sample_weight : array_like of shape (n,), optional
        Non-negative row weights (weighted means and weighted R², as
        scikit-learn's ``r2_score``, ``root_mean_squared_error`` and
        ``mean_absolute_error`` with ``sample_weight``).

    Returns
    -------
    dict
        ``{"r2", "rmse", "mae"}``, each the mean over the t targets of the
        per-target value (scikit-learn's ``multioutput="uniform_average"``).
        A target with no variance has R² 1 when predicted exactly, else 0.

    Raises
    ------
    InputError
        Shapes or the weights do not match, or weights are negative or all zero.
    """
    Y = np.asarray(y_true, dtype=np.float64)
    P = np.asarray(y_pred, dtype=np.float64)
    Y = Y.reshape(Y.shape[0], -1)
    if P.size != Y.size or P.shape[0] != Y.shape[0]:
        raise InputError(f"regression_scores: y_true has shape {Y.shape} but y_pred "
                         f"{P.shape}; pass predictions of the same rows and targets.")
    P = P.reshape(Y.shape)
    w = np.ones(Y.shape[0]) if sample_weight is None else \
        np.asarray(sample_weight, dtype=np.float64).ravel()
    if w.shape != (Y.shape[0],) or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise InputError(f"sample_weight must be {Y.shape[0]} finite non-negative numbers, not "
                         "all zero (one per row of y).")
    w = w / w.sum()
    R = Y - P
    ss_res = w @ R ** 2
    ss_tot = w @ (Y - w @ Y) ** 2
    r2 = np.where(ss_tot > 0, 1.0 - ss_res / np.where(ss_tot > 0, ss_tot, 1.0),
                  np.where(ss_res == 0, 1.0, 0.0))
    return {"r2": float(r2.mean()), "rmse": float(np.sqrt(ss_res).mean()),
            "mae": float((w @ np.abs(R)).mean())}


def _is_pipeline(model: Any) -> bool:
    from sklearn.pipeline import Pipeline

    return isinstance(model, Pipeline)


def split_pipeline(model: Any) -> tuple[Callable[[np.ndarray], np.ndarray] | None, Any]:
    """A model's row preprocessing and the step that approximates the kernel.

    Parameters
    ----------
    model : estimator or sklearn.pipeline.Pipeline
        A fitted approximation, or a fitted Pipeline whose last step is one
        (e.g. ``Pipeline([("scale", Standardizer), ("model", estimator)])``,
        what a workflow with ``standardize: true`` saves).

    Returns
    -------
    prep : callable or None
        Maps in-memory rows (ndarray of shape (s, d)) through the pipeline's
        earlier steps to float64 rows of the last step's input; None for a
        model that is not a Pipeline (or whose earlier steps are all
        ``"passthrough"``).
    approx : estimator
        The last step (the model itself when it is not a Pipeline).

    Raises
    ------
    ConfigError
        The last step has no ``kernel_approx`` (it approximates no kernel).
    """
    if not _is_pipeline(model):
        approx, prep = model, None
    else:
        approx = model.steps[-1][1]
        head = [step for _, step in model.steps[:-1] if step not in (None, "passthrough")]
        prep = None
        if head:
            def prep(rows: np.ndarray) -> np.ndarray:
                for step in head:
                    rows = step.transform(rows)
                return np.asarray(densify(rows), dtype=np.float64)
    if not hasattr(approx, "kernel_approx"):
        where = (f"the last step {model.steps[-1][0]!r} ({type(approx).__name__}) of the Pipeline"
                 if _is_pipeline(model) else type(approx).__name__)
        raise ConfigError(f"{where} cannot approximate a kernel (no kernel_approx); evaluate a "
                          "kernel approximation (a feature map, kernel PCA, ridge or MEKA model).")
    return prep, approx


def sample_rows(X: Any, n_sample: int | None, random_state: Any = 0, split_every: int = 8
                ) -> tuple[np.ndarray, np.ndarray]:
    """Rows of X chosen uniformly without replacement (all rows if n is small).

    The choice keeps the ``n_sample`` rows of smallest priority
    ``hash(seed, row)`` (:class:`~distsketch.summaries.landmarks.UniformLandmarks`,
    one pass over X): deterministic and independent of chunking.  ``split_every``
    is the merge fan-in of that pass (an estimator passes its own).

    Returns
    -------
    index : ndarray of int64, sorted
    rows : ndarray of shape (len(index), d), float64
    """
    n = X.shape[0]
    if n_sample is not None and n_sample < n:
        sampler = UniformLandmarks(n_sample, resolve_seed(random_state), "metrics.sample")
        if is_dask(X):
            from distsketch.graph import compute, tree_reduce

            state = compute(tree_reduce(sampler, X, split_every=split_every,
                                        name="metrics-sample"), progress=False)[0]
        else:
            state = sampler.chunk(X, 0)
        return sampler.finalize(state)
    rows = X
    if is_dask(rows):
        from distsketch.graph import compute

        rows = compute(rows, progress=False)[0]
    rows = np.asarray(densify(rows))
    return np.arange(n), rows.astype(np.float64)


def _tiles(n: int, step: int):
    for a in range(0, n, step):
        yield a, min(n, a + step)


def _diff_block(S: np.ndarray, kfun: Callable, approx: Any, a: slice, b: slice) -> np.ndarray:
    return kfun(S[a], S[b]) - np.asarray(approx.kernel_approx(S[a], S[b]), dtype=np.float64)


class _Sums:
    """Squared entries of a sampled s × s block, diagonal and off-diagonal apart.

    The s sampled rows are a uniform sample without replacement of n, so an
    off-diagonal pair (i, j) is in it with probability s(s−1)/(n(n−1)) and a
    diagonal entry with probability s/n: weighting the two sums by the inverse
    probabilities gives an unbiased estimate of the full-data ‖·‖_F².
    """

    def __init__(self) -> None:
        self.diag = 0.0
        self.off = 0.0

    def add(self, M: np.ndarray, on_diagonal: bool) -> None:
        total = float(np.sum(M * M))
        d = float(np.sum(np.diagonal(M) ** 2)) if on_diagonal else 0.0
        self.diag += d
        self.off += total - d

    def full_sq(self, n: int, s: int) -> float:
        """Estimate of the squared Frobenius norm of the full n × n matrix."""
        if s >= n:
            return self.diag + self.off
        return self.off * (n * (n - 1)) / (s * (s - 1)) + self.diag * n / s


def _tile_sums(S: np.ndarray, kfun: Callable, approx: Any, tile: int) -> tuple[_Sums, _Sums]:
    # squared entries of the error and of the Gram matrix of the sample, tile by tile
    err, gram = _Sums(), _Sums()
    for a0, a1 in _tiles(S.shape[0], tile):
        for b0, b1 in _tiles(S.shape[0], tile):
            G = kfun(S[a0:a1], S[b0:b1])
            E = G - np.asarray(approx.kernel_approx(S[a0:a1], S[b0:b1]), dtype=np.float64)
            err.add(E, a0 == b0)
            gram.add(G, a0 == b0)
    return err, gram


@single_threaded_blas
def _errors(S: np.ndarray, kfun: Callable, approx: Any, tile: int) -> tuple[float, _Sums, _Sums]:
    n = S.shape[0]
    err, gram = _Sums(), _Sums()
    if n <= _DENSE_LIMIT:
        G = kfun(S, S)
        E = G - np.asarray(approx.kernel_approx(S, S), dtype=np.float64)
        err.add(E, True)
        gram.add(G, True)
        E = 0.5 * (E + E.T)
        spec = float(np.max(np.abs(scipy.linalg.eigvalsh(E))))
        return spec, err, gram
    err, gram = _tile_sums(S, kfun, approx, tile)

    def matvec(v: np.ndarray) -> np.ndarray:
        out = np.zeros(n)
        for a0, a1 in _tiles(n, tile):
            for b0, b1 in _tiles(n, tile):
                out[a0:a1] += _diff_block(S, kfun, approx, slice(a0, a1), slice(b0, b1)) @ v[b0:b1]
        return out

    op = scipy.sparse.linalg.LinearOperator((n, n), matvec=matvec, dtype=np.float64)
    vals = scipy.sparse.linalg.eigsh(op, k=1, which="LM", return_eigenvectors=False, tol=1e-4)
    return float(abs(vals[0])), err, gram


def model_kernel(model: Any) -> dict[str, Any] | None:
    """The exact kernel a fitted approximation stands for.

    Nested approximations answer for their inner map (``features_`` of a
    ridge model or of streaming kernel PCA, ``kspace_`` of KernelPCR,
    ``meka_``), a Pipeline for its last step (the kernel of the rows its
    earlier steps produce); resolved parameters (``kernel_params_``,
    ``gamma_``) win over the constructor's.

    Parameters
    ----------
    model : estimator or sklearn.pipeline.Pipeline
        A fitted distsketch approximation (anything with ``get_params``).

    Returns
    -------
    dict or None
        ``{"kernel": name or callable, **params}`` with only the parameters the
        kernel takes (e.g. ``gamma`` for ``rbf``; ``gamma``, ``degree``,
        ``coef0`` for ``polynomial``); None for an object that names no kernel.
    """
    if _is_pipeline(model):
        return model_kernel(model.steps[-1][1])
    for attr in ("features_", "kspace_", "meka_"):
        inner = getattr(model, attr, None)
        if inner is not None and hasattr(inner, "get_params"):
            return model_kernel(inner)
    if not hasattr(model, "get_params"):
        return None
    params = model.get_params(deep=False)
    kernel = getattr(model, "kernel_name_", None)
    if not isinstance(kernel, str) or kernel == "callable":
        kernel = params.get("kernel")
    if kernel is None:
        # estimators that name no kernel parameter declare the kernel they approximate
        kernel = getattr(model, "_kernel_of_features", None)
    if kernel is None:
        if "degree" not in params or "coef0" not in params:
            return None
        kernel = "polynomial"  # TensorSketch, TensorSRHT, PolySketch, k-Space
    if callable(kernel):
        return {"kernel": kernel}
    values = {k: params.get(k) for k in ("gamma", "degree", "coef0")}
    gamma_ = getattr(model, "gamma_", None)
    if isinstance(gamma_, (int, float, np.number)) and not isinstance(gamma_, bool):
        values["gamma"] = float(gamma_)
    resolved = getattr(model, "kernel_params_", None)
    if isinstance(resolved, dict):
        values.update(resolved)
    d = int(getattr(model, "n_features_in_", 1))
    if not isinstance(values["gamma"], (int, float, np.number)):
        values["gamma"] = None  # a data-driven rule not resolved yet: 1 / n_features
    name, kw = resolve_kernel_params(kernel, d, values["gamma"],
                                     3 if values["degree"] is None else values["degree"],
                                     1.0 if values["coef0"] is None else values["coef0"])
    return {"kernel": name, **kw}


def _resolve_kernel(approx: Any, d: int, kernel: Any, gamma: float | None, degree: int | None,
                    coef0: float | None, where: str) -> tuple[Any, dict[str, Any]]:
    """The kernel to compare with: the model's, or the arguments where it names none."""
    own = model_kernel(approx)
    given = {"gamma": gamma, "degree": degree, "coef0": coef0}
    if own is None:
        return resolve_kernel_params("rbf" if kernel is None else kernel, d, gamma,
                                     3 if degree is None else degree,
                                     1.0 if coef0 is None else coef0)
    own_kernel = own.pop("kernel")
    model_name = type(approx).__name__
    if kernel is not None:
        same = (kernel is own_kernel) if callable(kernel) or callable(own_kernel) else \
            resolve_kernel_params(kernel, d)[0] == own_kernel
        if not same:
            raise ConfigError(
                f"{where}: kernel={kernel!r} contradicts the kernel {own_kernel!r} that "
                f"{model_name} approximates; leave kernel out to use the model's.")
    for key, value in given.items():
        if value is None or key not in own or isinstance(value, str):
            # not given, a parameter this kernel does not take, or a rule ("median")
            # that the model has already resolved to its own value
            continue
        if not np.isclose(float(value), float(own[key]), rtol=1e-9, atol=0.0):
            raise ConfigError(
                f"{where}: {key}={value!r} contradicts {model_name}'s {key}={own[key]!r}; "
                f"leave {key} out to use the model's.")
    return own_kernel, own


def _kernel_fn(name: Any, params: dict[str, Any], approx: Any = None) -> Callable:
    if callable(name):
        k = lambda A, B: np.asarray(name(A, B), dtype=np.float64)  # noqa: E731
    else:
        k = lambda A, B: pairwise_kernel(A, B, name, **params)  # noqa: E731
    mean = getattr(approx, "x_mean_", None)
    if mean is None:
        return k
    # a model that standardises its rows (SketchedKernelRidge) approximates the kernel
    # of the standardised rows; its kernel_approx takes raw rows
    scale = approx.x_scale_
    return lambda A, B: k((np.asarray(A, dtype=np.float64) - mean) / scale,
                          (np.asarray(B, dtype=np.float64) - mean) / scale)


def _check_finite_params(where: str, **values: Any) -> None:
    # checked before the model, so a bad argument is named whatever the model is
    for k, v in values.items():
        if v is not None and not isinstance(v, str) and not np.isfinite(v):
            raise ConfigError(f"{where}: {k} must be finite; got {v!r}.")


def _sample(X: Any, approx: Any, kernel: Any, gamma: float | None, degree: int | None,
            coef0: float | None, n_sample: int | None, random_state: Any, where: str,
            check_finite: bool = False) -> tuple[int, np.ndarray, Any, Any, dict[str, Any]]:
    # the rows, model and kernel both metrics compare: (n, sampled rows, approx, kernel)
    if n_sample is not None and n_sample < 2:
        raise ConfigError(f"n_sample must be >= 2 or None; got {n_sample}.")
    if check_finite:
        _check_finite_params(where, gamma=gamma, coef0=coef0)
    X = check_input(X, where=f"{where} X", allow_sparse=True)
    prep, approx = split_pipeline(approx)
    d = X.shape[1] if prep is None else int(getattr(approx, "n_features_in_", X.shape[1]))
    name, params = _resolve_kernel(approx, d, kernel, gamma, degree, coef0, where)
    _, S = sample_rows(X, n_sample, random_state)
    if prep is not None:
        S = prep(S)  # only the sampled rows go through the pipeline's earlier steps
    return int(X.shape[0]), S, approx, name, params


def kernel_errors(
    X: Any,
    approx: Any,
    kernel: Any = None,
    *,
    gamma: float | None = None,
    degree: int | None = None,
    coef0: float | None = None,
    n_sample: int | None = 2000,
    random_state: Any = 0,
    tile: int = 2048,
) -> dict[str, Any]:
    """Kernel spectral and Frobenius errors as normalised in Ghashami et al. (2016).

    The measures are those of the full n × n Gram matrix G of X; with
    ``n_sample < n`` they are estimated from the s × s block of s rows sampled
    uniformly without replacement, and the result says so (``sampled``).

    Parameters
    ----------
    X : array_like, dask array or Zarr path of shape (n, d)
        Data whose Gram matrix G is approximated.
    approx : object with ``kernel_approx``, or a Pipeline ending in one
        A fitted approximation (feature map, kernel PCA, ridge, MEKA, ...).
        For a Pipeline the sampled rows of X go through its earlier steps
        (``transform``) and G is the kernel of the transformed rows.
    kernel : str or callable, optional
        The exact kernel.  Default: the one ``approx`` approximates
        (:func:`model_kernel`), else ``"rbf"``.
    gamma, degree, coef0 : optional
        Kernel parameters; default the model's (else 1/d, 3, 1).  A value that
        contradicts the model's raises ConfigError.
    n_sample : int or None, default 2000
        Rows sampled uniformly (None: all rows, an exact evaluation).
    random_state : int
        Seed of the row sample.
    tile : int
        Tile size for blockwise evaluation when the sample exceeds 4096 rows.

    Returns
    -------
    dict
        ``spectral`` ≈ ‖G − G̃‖₂ / n, ``frobenius`` ≈ ‖G − G̃‖_F / n²,
        ``relative_frobenius`` ≈ ‖G − G̃‖_F / ‖G‖_F; ``n_sample`` = s,
        ``n_rows`` = n, ``sampled`` (True when these are estimates from s < n
        rows), ``kernel`` and ``kernel_params`` (what was compared with).

    Raises
    ------
    ConfigError
        ``n_sample < 2``, or a kernel argument contradicts the model's kernel.

    Notes
    -----
    Estimators, for a uniform sample S of s rows: the squared Frobenius norm
    weights the sampled off-diagonal entries by n(n−1)/(s(s−1)) and the
    diagonal ones by n/s (unbiased; relative standard error about
    √(ζ₁/s)/μ with μ the mean squared entry and ζ₁ the variance of the row
    means of squared entries); the spectral measure is ‖E_SS‖₂ / s, the
    plug-in estimate of ‖E‖₂ / n (eigenvalues of a uniform principal block
    scale by s/n, as for the Nyström method), which is biased up by noise of
    order max|E_ij| / √s when E has no low-rank structure.  Memory:
    O(s·d + tile²) beyond a dense s × s matrix when s ≤ 4096; the spectral
    norm of a larger sample comes from Lanczos on tile-wise products.

    References
    ----------
    Ghashami, Perry, Phillips. Streaming kernel principal component analysis.
    AISTATS 2016, section 4 (error measures).
    """
    n, S, approx, name, params = _sample(X, approx, kernel, gamma, degree, coef0, n_sample,
                                         random_state, "kernel_errors", check_finite=True)
    spec, err, gram = _errors(S, _kernel_fn(name, params, approx), approx, tile)
    s = int(S.shape[0])
    e2, g2 = err.full_sq(n, s), gram.full_sq(n, s)
    return {"spectral": spec / s, "frobenius": float(np.sqrt(e2)) / n**2,
            "relative_frobenius": float(np.sqrt(e2 / g2)) if g2 > 0 else 0.0,
            "n_sample": s, "n_rows": n, "sampled": s < n,
            "kernel": name if isinstance(name, str) else "callable",
            "kernel_params": {k: float(v) for k, v in params.items()}}


def relative_kernel_error(X: Any, approx: Any, kernel: Any = None, *,
                          gamma: float | None = None, degree: int | None = None,
                          coef0: float | None = None, n_sample: int | None = 20000,
                          random_state: Any = 0, tile: int = 2048) -> float:
    """‖G − G̃‖_F / ‖G‖_F, exact for small n, estimated on sampled rows for large n.

    This is the error measure of the MEKA paper (Si, Hsieh, Dhillon, ICML
    2014).  Parameters (the kernel defaults to the model's) and the sampled
    estimator as in :func:`kernel_errors`; computed tile by tile with
    O(tile²) memory.
    """
    n, S, approx, name, params = _sample(X, approx, kernel, gamma, degree, coef0, n_sample,
                                         random_state, "relative_kernel_error")
    s = S.shape[0]
    err, gram = _tile_sums(S, _kernel_fn(name, params, approx), approx, tile)
    den = gram.full_sq(n, s)
    return float(np.sqrt(err.full_sq(n, s) / den)) if den > 0 else 0.0
