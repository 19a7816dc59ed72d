"""How Nyström landmarks are chosen: uniform, k-means, ridge leverage, RPCholesky, given.

:func:`choose_landmarks` is the one entry point (``NystromFeatures`` and the
Nyström ridge estimators call it); every choice reads X in passes of
tree-reduced, mergeable summaries (uniform 1, k-means 1 + ``full_iter``, leverage 3,
RPCholesky ``rounds``, given rows 0), so n is unbounded.

Uniform, leverage and RPCholesky samples are races of keys hashed from
(seed, global row), so they depend only on (seed, n) and the rows' weights —
not on the chunking, the merge order or the number of workers.  (The
leverage weights use ZᵀZ, a float64 sum whose last bits follow the merge
order; a different chunking changes a key by a few ulps and the sample only
if two keys tie to that precision.)
"""

from __future__ import annotations

import functools
import os
from typing import Any

import numpy as np

from distsketch.blas import blas_single_thread
from distsketch.errors import ConfigError, InputError
from distsketch.estimators.base import OperatorSize, to_numpy
from distsketch.footprint import Footprint
from distsketch.graph import declared_footprint, reduce_blocks, resources_scope
from distsketch.graph.row_cache import cached_rows
from distsketch.ops.kernels import pairwise_kernel
from distsketch.ops.namespace import densify, to_host
from distsketch.ops.nystrom import inv_sqrt_map, nystrom_gram_footprint, nystrom_map
from distsketch.ops.rpcholesky import residual_diagonal, residual_diagonal_footprint, round_sizes
from distsketch.summaries.covariance import Covariance
from distsketch.summaries.kmeans import KMeansStats, kmeans_on_sample, lloyd_update
from distsketch.summaries.landmarks import UniformLandmarks
from distsketch.summaries.leverage import (
    WeightedLandmarks,
    ridge_from_spectrum,
    ridge_leverage,
    ridge_leverage_footprint,
)
from distsketch.validation import is_dask
from distsketch.validation.finite import check_finite_result, is_array_api

__all__ = ["LANDMARK_CHOICES", "choose_landmarks", "fit_kmeans", "landmark_choice_sizes",
           "leverage_landmarks", "rpcholesky_landmarks", "sample_landmarks"]

LANDMARK_CHOICES = frozenset({"uniform", "kmeans", "leverage", "rpcholesky"})

# pilot features of leverage landmarks: PILOT_FACTOR · M uniform-Nyström features, at most
# PILOT_MAX (the p × p ZᵀZ and its eigendecomposition live on the driver)
PILOT_FACTOR = 2
PILOT_MAX = 4096


def sample_landmarks(X: Any, n_samples: int, seed: int, purpose: str = "landmarks",
                     progress: bool | None = None, *, row_start: int = 0,
                     previous: tuple[np.ndarray, np.ndarray] | None = None,
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Uniform landmarks: the bottom-``n_samples`` rows by priority hash(seed, row).

    ``row_start`` numbers the rows of X from there (rows appended to earlier
    data); ``previous`` = (index, rows) of the earlier sample is merged in, so
    the result equals one pass over all rows.

    Returns
    -------
    index : ndarray of int64 (global rows, sorted), rows : ndarray (s, d) float64
    """
    summary = UniformLandmarks(n_samples, seed, purpose)
    state = reduce_blocks(summary, X, row_start=row_start, progress=progress, name="landmarks")
    if previous is not None:
        state = summary.merge([summary.state_of(*previous), state])
    return summary.finalize(state)


def fit_kmeans(X: Any, n_clusters: int, seed: int, *, sample_size: int = 20000, max_iter: int = 100,
               full_iter: int = 0, progress: bool | None = None) -> tuple[np.ndarray, float]:
    """k-means centres of X: k-means++ and Lloyd on a uniform row sample, then
    ``full_iter`` Lloyd iterations over all rows as tree-reduced statistics.

    Returns
    -------
    centres : ndarray of shape (n_clusters, d), inertia : float
        The inertia is over all rows when ``full_iter > 0``, else on the sample.

    Notes
    -----
    One pass for the sample (skipped for in-memory X of at most ``sample_size``
    rows, where the sample is X itself) plus one pass per full iteration; state
    O(c·d) per task.
    """
    n = X.shape[0]
    if n <= sample_size and not is_dask(X) and not is_array_api(X):
        sample = np.asarray(densify(X), dtype=np.float64)
    else:
        # (another namespace: sampled on its device, k-means on the host sample, as for NumPy)
        _, sample = sample_landmarks(X, sample_size, seed, "kmeans.sample", progress)
    # small dense work on the driver: multi-threaded BLAS is much slower here
    with blas_single_thread():
        centres, inertia = kmeans_on_sample(sample, n_clusters, seed, max_iter=max_iter)
    stats = KMeansStats(n_clusters)
    for _ in range(int(full_iter)):
        state = reduce_blocks(stats, X, centres, progress=progress, name="kmeans")
        centres, inertia = lloyd_update(state, centres), float(state["inertia"])
    return centres, inertia


def read_landmarks(value: Any, n_features: int) -> np.ndarray:
    """Given landmarks (array-like or Zarr path) as a checked (m, n_features) float64 array."""
    if isinstance(value, (str, os.PathLike)):
        from distsketch.io import open_array

        value = open_array(value)
    arr = np.asarray(to_numpy(value), dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != n_features or arr.shape[0] < 1:
        raise InputError(
            f"landmarks must be a 2-D array with {n_features} columns (one row per landmark); "
            f"got shape {arr.shape}. Pass landmarks in the same feature space as X."
        )
    if not np.all(np.isfinite(arr)):
        raise InputError("landmarks contain NaN or Inf; clean them first.")
    return arr


def _weighted_sample(X: Any, summary: WeightedLandmarks, operands: tuple, weight: Footprint,
                     progress: bool | None, name: str) -> tuple[np.ndarray, np.ndarray]:
    # the race's own memory and that of its weight function, evaluated in the same task
    footprint = declared_footprint(summary, X) + weight
    state = reduce_blocks(summary, X, *operands, footprint=footprint, progress=progress,
                          name=name)
    return summary.finalize(state)


def _pivot_map(rows: Any, kernel: Any, params: dict) -> np.ndarray:
    W = pairwise_kernel(rows, None, kernel, **params)
    check_finite_result(W, stage="landmark kernel matrix")
    with blas_single_thread():
        M, _ = inv_sqrt_map(W)
    return np.asarray(to_host(M))


def leverage_landmarks(X: Any, n_landmarks: int, seed: int, *, kernel: Any = "rbf",
                       kernel_params: dict | None = None, pilot_width: int | None = None,
                       ridge: float | None = None, progress: bool | None = None,
                       ) -> tuple[np.ndarray, np.ndarray, float]:
    """Landmarks drawn by approximate λ-ridge leverage scores (a weighted bottom-M race).

    Pass 1 samples p uniform pilot landmarks (p = ``pilot_width``, default
    min(2M, 4096)); pass 2 tree-reduces ZᵀZ of their Nyström features;
    pass 3 scores every row (:func:`~distsketch.summaries.leverage.ridge_leverage`)
    and keeps the M smallest race keys.

    Returns
    -------
    index : ndarray of int64 (sorted global rows), rows : ndarray (M, d), ridge : float
        ``ridge`` is the λ used (:func:`~distsketch.summaries.leverage.ridge_from_spectrum`
        when not given).
    """
    params = kernel_params or {}
    n = X.shape[0]
    p = int(pilot_width) if pilot_width is not None else min(PILOT_FACTOR * n_landmarks, PILOT_MAX)
    _, pilot = sample_landmarks(X, min(p, n), seed, "leverage.pilot", progress)
    pilot = np.asarray(to_host(pilot), dtype=np.float64)
    Mp = _pivot_map(pilot, kernel, params)
    r = Mp.shape[1]
    cov = Covariance(transform=functools.partial(nystrom_map, kernel=kernel, params=params,
                                                 dtype=np.float64), n_columns=r)
    footprint = declared_footprint(cov, X) + nystrom_gram_footprint(X.shape[1], pilot.shape[0], r)
    state = reduce_blocks(cov, X, pilot, Mp, footprint=footprint, progress=progress,
                          name="leverage-gram")
    G = np.asarray(to_host(state["ztz"]), dtype=np.float64)
    check_finite_result(G, stage="leverage landmarks: pilot Gram matrix ZᵀZ")
    with blas_single_thread():
        vals, vecs = np.linalg.eigh(0.5 * (G + G.T))
    vals = np.maximum(vals, 0.0)
    lam = ridge_from_spectrum(vals, n_landmarks) if ridge is None else float(ridge)
    if not lam > 0:
        raise ConfigError(f"leverage landmarks: ridge={lam!r} must be positive.")
    A = (vecs / (vals + lam)) @ vecs.T
    summary = WeightedLandmarks(n_landmarks, seed, "leverage", functools.partial(
        ridge_leverage, kernel=kernel, params=params))
    idx, rows = _weighted_sample(X, summary, (pilot, Mp, A, lam),
                                 ridge_leverage_footprint(X.shape[1], pilot.shape[0], r),
                                 progress, "leverage-sample")
    return idx, rows, lam


def rpcholesky_landmarks(X: Any, n_landmarks: int, seed: int, *, kernel: Any = "rbf",
                         kernel_params: dict | None = None, rounds: int = 6,
                         progress: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Landmarks by block randomly pivoted Cholesky: ``rounds`` passes over X.

    Round t computes the residual diagonal d of the Nyström approximation on
    the pivots so far (:func:`~distsketch.ops.rpcholesky.residual_diagonal`)
    and draws its block of new pivots ∝ d without replacement by the race
    of purpose ``"rpcholesky.t"`` (:class:`~distsketch.summaries.leverage.WeightedLandmarks`).
    With one pivot per round (``rounds = M``) this is RPCholesky itself.

    Returns
    -------
    index : ndarray of int64 (sorted global rows), rows : ndarray (≤ M, d)
        Fewer than M rows when the residual vanishes first (K has lower rank).

    References
    ----------
    Chen, Epperly, Tropp, Webber. Randomly pivoted Cholesky: practical
    approximation of a kernel matrix with few entry evaluations. CPAM 2024.
    """
    params = kernel_params or {}
    d = X.shape[1]
    index = np.zeros(0, dtype=np.int64)
    rows = np.zeros((0, d))
    M = np.zeros((0, 0))
    weight = functools.partial(residual_diagonal, kernel=kernel, params=params)
    # one BLAS pin and one resources look-up for all rounds (up to one pass per pivot)
    with blas_single_thread(), resources_scope():
        for t, size in enumerate(round_sizes(min(n_landmarks, X.shape[0]), rounds)):
            summary = WeightedLandmarks(size, seed, f"rpcholesky.{t}", weight)
            new_idx, new_rows = _weighted_sample(
                X, summary, (rows, M, index), residual_diagonal_footprint(d, len(index), M.shape[1]),
                progress, "rpcholesky")
            if len(new_idx) == 0:
                break
            order = np.argsort(np.concatenate([index, new_idx]), kind="stable")
            index = np.concatenate([index, new_idx])[order]
            rows = np.concatenate([rows, np.asarray(to_host(new_rows), dtype=np.float64)])[order]
            M = _pivot_map(rows, kernel, params)
    return index, rows


def choose_landmarks(X: Any, how: Any, n_landmarks: int, seed: int, *, kernel: Any = "rbf",
                     kernel_params: dict | None = None, kmeans_sample: int = 20000,
                     rounds: int = 6, pilot_width: int | None = None, ridge: float | None = None,
                     progress: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The landmarks of a Nyström approximation of ``kernel`` on X.

    Parameters
    ----------
    X : ndarray, sparse, dask array or array of another namespace, shape (n, d)
    how : {"uniform", "kmeans", "leverage", "rpcholesky"}, array of shape (m, d) or Zarr path
        "uniform": bottom-M rows by hash(seed, row); "kmeans": k-means centres
        on a uniform sample of ``kmeans_sample`` rows (Zhang & Kwok);
        "leverage": approximate ridge leverage scores on ``pilot_width``
        uniform-Nyström features, ridge λ from the pilot spectrum unless
        ``ridge`` is given; "rpcholesky": block randomly pivoted Cholesky in
        ``rounds`` passes; else the landmarks themselves.  The passes of
        "leverage" and "rpcholesky" read a lazy X once where its rows fit
        the row cache (:func:`~distsketch.graph.row_cache.cached_rows`).
    n_landmarks : int
        M (ignored for given landmarks).
    seed : int
    kernel, kernel_params
        Resolved kernel name (or callable) and its parameters.

    Returns
    -------
    rows : ndarray of shape (M', d)
        M' ≤ M: fewer when X has fewer rows (or RPCholesky exhausts K's rank).
    indices : ndarray of int64
        Sorted global rows of sampled landmarks; empty for k-means centres
        and given landmarks.

    Notes
    -----
    Driver memory: M × d landmarks and their M × M kernel matrix; "leverage"
    also the p × p pilot ZᵀZ and its eigenvectors (p ≤ 4096 by default).
    Per task O(block × (M + p)).  Flops per pass: O(n·M·d) ("rpcholesky"
    round t: O(n·M_t·(d + M_t)) with M_t pivots so far).
    """
    if isinstance(how, str) and how == "uniform":
        idx, rows = sample_landmarks(X, n_landmarks, seed, "landmarks", progress)
        return rows, idx
    none = np.zeros(0, dtype=np.int64)
    if isinstance(how, str) and how == "kmeans":
        centres, _ = fit_kmeans(X, min(n_landmarks, X.shape[0]), seed, sample_size=kmeans_sample,
                                progress=progress)
        return centres, none
    if isinstance(how, str) and how == "leverage":
        with cached_rows(X, "leverage-rows") as held:  # three passes: X read once if it fits
            idx, rows, _ = leverage_landmarks(held, n_landmarks, seed, kernel=kernel,
                                              kernel_params=kernel_params,
                                              pilot_width=pilot_width, ridge=ridge,
                                              progress=progress)
        return rows, idx
    if isinstance(how, str) and how == "rpcholesky":
        with cached_rows(X, "rpcholesky-rows") as held:  # a pass a round: X read once if it fits
            idx, rows = rpcholesky_landmarks(held, n_landmarks, seed, kernel=kernel,
                                             kernel_params=kernel_params, rounds=rounds,
                                             progress=progress)
        return rows, idx
    return read_landmarks(how, X.shape[1]), none


def landmark_choice_sizes(owner: str, how: Any, m: int, d: int) -> list[OperatorSize]:
    """The driver-side operators a landmark choice adds to the landmarks' own (leverage's pilot)."""
    if isinstance(how, str) and how == "leverage":
        p = min(PILOT_FACTOR * m, PILOT_MAX)
        return [(f"{owner}: landmarks='leverage' with n_landmarks={m}: the {p} pilot landmarks "
                 f"({p} x {d}), their Gram matrix ZᵀZ and its eigenvectors ({p} x {p} each, float64) "
                 "that", 8 * p * (d + 3 * p), "lower n_landmarks or use landmarks='rpcholesky'")]
    return []
