"""gamma of the default feature map by exact leave-one-out on a row sample, widened at its edges
(:func:`search_gamma`; :func:`loo_kernel_path` scores given gammas)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import dask
import numpy as np

from distsketch.blas import pin_blas_for_tasks, single_threaded_blas

logger = logging.getLogger("distsketch")

__all__ = ["GAMMA_FACTORS", "GAMMA_LADDER", "GCV_GRID", "MAX_GAMMA_WIDENING", "PILOT_ABOVE",
           "PILOT_ROWS", "loo_kernel_path", "search_gamma"]

#: alpha candidates of the exact leave-one-out path, relative to the mean eigenvalue of the
#: centred kernel of the sample
GCV_GRID = np.logspace(-8, 2, 41)

#: gamma candidates of the default map, times 1 / n_features of the standardised columns
GAMMA_FACTORS = (0.125, 0.25, 0.5, 1.0, 2.0)

#: factor-of-2 steps the search may take beyond either end of :data:`GAMMA_FACTORS`
#: (1/64 … 16 in all)
MAX_GAMMA_WIDENING = 3

#: every factor the search may score, ascending: :data:`GAMMA_FACTORS` and the widening
#: steps on either side (exact powers of two)
GAMMA_LADDER = tuple(GAMMA_FACTORS[0] * 2.0 ** i
                     for i in range(-MAX_GAMMA_WIDENING, len(GAMMA_FACTORS) + MAX_GAMMA_WIDENING))

#: sample rows above which the search starts from a pilot's choice (:func:`search_gamma`)
PILOT_ABOVE = 400

#: rows of that pilot: evenly spaced rows of the sample
PILOT_ROWS = 200


def _sq_distances(S: np.ndarray) -> np.ndarray:
    sq = np.einsum("ij,ij->i", S, S)
    return np.maximum(sq[:, None] + sq[None, :] - 2.0 * (S @ S.T), 0.0)


def _loo_at(D2: np.ndarray, Yc: np.ndarray, gamma: float, fit_intercept: bool,
            grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # (alphas, mse) of one gamma: one eigendecomposition of the centred kernel serves every λ
    n, t = Yc.shape
    K = np.exp(-float(gamma) * D2)
    if fit_intercept:
        r = K.mean(axis=0)
        K = K - r[None, :] - r[:, None] + r.mean()
    e, U = np.linalg.eigh(K)
    e = np.clip(e, 0.0, None)
    alphas = max(float(e.sum()) / n, np.finfo(np.float64).tiny) * grid
    F = e[:, None] / (e[:, None] + alphas[None, :])                     # (n, p)
    H = (U * U) @ F + (1.0 / n if fit_intercept else 0.0)                # leverages (n, p)
    fit = (U @ (F[:, :, None] * (U.T @ Yc)[:, None, :]).reshape(n, -1)).reshape(n, -1, t)
    with np.errstate(divide="ignore", invalid="ignore"):
        R = (Yc[:, None, :] - fit) / (1.0 - H)[:, :, None]              # (n, p, t)
    mse = (R ** 2).sum(axis=(0, 2)) / n
    ok = np.all(H < 1.0 - 1e-10, axis=0) & np.isfinite(mse)
    return alphas, np.where(ok, mse, np.inf)


def _prepare(S: Any, Y: Any, fit_intercept: bool) -> tuple[np.ndarray, np.ndarray]:
    S = np.asarray(S, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64).reshape(S.shape[0], -1)
    return _sq_distances(S), (Y - Y.mean(axis=0) if fit_intercept else Y)


@single_threaded_blas
def loo_kernel_path(S: Any, Y: Any, gammas: Any, fit_intercept: bool,
                    grid: np.ndarray = GCV_GRID) -> dict[str, np.ndarray]:
    """Exact leave-one-out of Gaussian kernel ridge on rows S, for every gamma and alpha.

    For each ``gamma`` the centred kernel ``K_c = C K C`` of the rows is
    decomposed once, ``K_c = U diag(e) Uᵀ``; the hat matrix of ridge with an
    unpenalised intercept is ``H(λ) = 11ᵀ/n + U diag(e / (e + λ)) Uᵀ``, and
    the leave-one-out residuals are ``(yᵢ − ŷᵢ(λ)) / (1 − Hᵢᵢ(λ))`` for the whole
    λ path from that one decomposition (no refit).

    ``S`` (n, d) are standardised rows, ``Y`` (n, t) their targets (±1 columns for a
    classifier); ``grid`` holds λ candidates relative to the mean eigenvalue
    ``trace(K_c) / n``.  Returns ``alphas`` (g, p) and ``mse`` (g, p): the mean over
    rows of the squared leave-one-out residuals summed over targets (inf where a
    leverage reaches 1).

    Notes
    -----
    Per gamma: one O(n³) eigendecomposition and O(n² · p · t) for the path;
    memory O(n² + n · p · t).  The rows (:mod:`~distsketch.estimators.ridge.scaling`)
    do not depend on the chunking, so neither does the choice.

    References
    ----------
    Golub, Heath, Wahba. Generalized cross-validation as a method for
    choosing a good ridge parameter. Technometrics 21(2), 1979 (the
    leave-one-out identity of linear smoothers).
    """
    D2, Yc = _prepare(S, Y, fit_intercept)
    grid = np.asarray(grid, dtype=np.float64)
    shape = (len(gammas), grid.size)
    out = {"alphas": np.empty(shape), "mse": np.empty(shape)}
    for g, gamma in enumerate(gammas):
        out["alphas"][g], out["mse"][g] = _loo_at(D2, Yc, float(gamma), fit_intercept, grid)
    return out


@single_threaded_blas
def search_gamma(S: Any, Y: Any, fit_intercept: bool,
                 grid: np.ndarray = GCV_GRID) -> dict[str, Any]:
    """The leave-one-out path at the gammas the choice needs, widened past an edge.

    Gammas are ``factor / d`` (d: columns of S).  Three neighbouring factors
    are scored first: the middle ones of :data:`GAMMA_FACTORS` or, on more
    than :data:`PILOT_ABOVE` rows, the best of a pilot and its neighbours
    (:func:`_pilot_factor`); while the lowest error (over the λ grid) is at
    the smallest or largest factor scored, the next factor that way (× 2 or
    ÷ 2) is scored too, at most :data:`MAX_GAMMA_WIDENING` steps past either
    end of :data:`GAMMA_FACTORS`.  For an error that is unimodal in log gamma
    near its minimum this picks what scoring every factor would; the pilot
    saves the k-row eigendecompositions of the steps from the middle of the
    grid to the choice (1000 rows, 28 tables: 3.6 on average instead of
    5.7, the same choice on each; ``benchmarks/RESULTS.md``).

    Parameters as :func:`loo_kernel_path`, without ``gammas``.  Returns ``factors``
    (ascending), ``gammas``, ``alphas`` and ``mse`` (as :func:`loo_kernel_path`, one
    row per factor), ``widened`` (the factors scored outside :data:`GAMMA_FACTORS`)
    and ``at_limit`` (whether the choice is the last factor the widening allows).
    """
    D2, Yc = _prepare(S, Y, fit_intercept)
    d = max(1, int(np.shape(S)[1]))
    grid = np.asarray(grid, dtype=np.float64)
    lo, hi = GAMMA_LADDER[0], GAMMA_LADDER[-1]
    centre = _pilot_factor(D2, Yc, d, fit_intercept, grid, lo, hi)
    scored = _walk(lambda f: _loo_at(D2, Yc, f / d, fit_intercept, grid), centre, lo, hi)
    factors = sorted(scored)
    best = _best(scored)
    widened = [f for f in factors if f not in GAMMA_FACTORS]
    return {"factors": factors, "gammas": np.asarray(factors) / d,
            "alphas": np.stack([scored[f][0] for f in factors]),
            "mse": np.stack([scored[f][1] for f in factors]),
            "widened": widened, "at_limit": best in (lo, hi)}


def _best(scored: dict[float, tuple[np.ndarray, np.ndarray]]) -> float:
    # the factor of the lowest error; ties go to the smaller gamma
    return min(sorted(scored), key=lambda f: float(np.min(scored[f][1])))


def _score_all(score: Callable[[float], tuple[np.ndarray, np.ndarray]],
               factors: Sequence[float]) -> dict[float, tuple[np.ndarray, np.ndarray]]:
    """``{factor: score(factor)}``, the factors scored side by side on the local cores.

    Each score is single-threaded BLAS (pinned in every pool thread), so the results are
    bitwise the serial ones; the cores are dask's ``num_workers`` where set.
    """
    cores = int(dask.config.get("num_workers", None) or os.cpu_count() or 1)
    workers = min(len(factors), cores)
    if workers <= 1:
        return {f: score(f) for f in factors}
    with ThreadPoolExecutor(workers, initializer=pin_blas_for_tasks) as pool:
        return dict(zip(factors, pool.map(score, factors)))


def _walk(score: Callable[[float], tuple[np.ndarray, np.ndarray]], centre: float,
          lo: float, hi: float) -> dict[float, tuple[np.ndarray, np.ndarray]]:
    """Score ``centre`` and its two factor-2 neighbours, then step outward while the best
    is the smallest or largest factor scored, never past ``lo`` or ``hi``."""
    scored = _score_all(score, (centre / 2.0, centre, centre * 2.0))
    while True:
        factors = sorted(scored)
        best = _best(scored)
        if not np.isfinite(np.min(scored[best][1])):
            break  # no finite score: nothing to follow
        step = 0.5 if best == factors[0] else 2.0 if best == factors[-1] else None
        nxt = None if step is None else best * step
        if nxt is None or not lo <= nxt <= hi:
            break
        scored[nxt] = score(nxt)
    return scored


def _pilot_factor(D2: np.ndarray, Yc: np.ndarray, d: int, fit_intercept: bool,
                  grid: np.ndarray, lo: float, hi: float) -> float:
    """Where the search starts: the middle of :data:`GAMMA_FACTORS`, or, above
    :data:`PILOT_ABOVE` rows, the best of every factor in ``lo`` … ``hi`` on
    :data:`PILOT_ROWS` evenly spaced rows, kept one step inside ``lo`` … ``hi``.

    The pilot scores every factor rather than walking: its error need not be unimodal in
    gamma (a target that a narrow kernel fits and a wide one smooths to a constant has a
    second, shallow minimum among the smallest gammas).
    """
    mid = GAMMA_FACTORS[len(GAMMA_FACTORS) // 2]
    n = Yc.shape[0]
    if n <= PILOT_ABOVE:
        return mid
    idx = np.unique(np.linspace(0, n - 1, PILOT_ROWS).round().astype(np.int64))
    D2p, Yp = D2[np.ix_(idx, idx)], Yc[idx]
    if fit_intercept:
        Yp = Yp - Yp.mean(axis=0)
    scored = _score_all(lambda f: _loo_at(D2p, Yp, f / d, fit_intercept, grid), GAMMA_LADDER)
    return float(min(max(_best(scored), 2.0 * lo), hi / 2.0))
