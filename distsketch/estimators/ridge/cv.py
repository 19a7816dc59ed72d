"""k-fold cross-validation of the kernel ridge models within the per-task memory budget.

Every candidate feature map (one per ``gamma``) adds ``k`` fold states of
``m² + m(t + 1) + t² + t`` float64 to the one-pass summary, and a merge task
holds two of the whole states and their sum.  At m = 2048, k = 5, 26 classes
and 5 gammas that is 0.8 GiB per state, 2.4 GiB per merge.  :func:`map_groups`
splits the candidate maps into as few passes as keep a merge within the
per-task budget (all maps in one pass when they fit): the folds, the
scores and the chosen model do not depend on the split, because a row's fold is
``hash(seed, row) mod k`` and each map's state is its own sum.  Fold states
carry ``ZᵀZ`` packed (its upper triangle): half the m × m matrices per merge.
"""

from __future__ import annotations

import logging
from functools import reduce
from typing import Any

import numpy as np
from dask.utils import format_bytes

from distsketch.errors import MemoryBudgetError
from distsketch.estimators.ridge.defaults import map_gamma, map_kernel, positive_values
from distsketch.graph import task_memory_budget
from distsketch.summaries.ridge import add_ridge_states, ridge_memory, unpack_gram

logger = logging.getLogger("distsketch")

__all__ = ["fit_cv", "map_groups"]

#: a merge holds two states and their sum
MERGE_STATES = 3


def map_groups(maps: list[Any], n_features: int, n_targets: int, n_folds: int,
               budget: int | None = None, where: str = "cross-validation",
               first_extra: float = 0.0) -> list[list[int]]:
    """Indices of the maps reduced together, pass by pass.

    Consecutive maps share a pass while ``MERGE_STATES`` times their summed
    states fit ``budget`` (default: the per-task memory budget);
    ``first_extra`` bytes ride on the first pass's state (the classifier's
    calibration sample).  A MemoryBudgetError when the k fold states of one map alone
    do not fit a merge.
    """
    if not maps:
        return []
    sizes = [ridge_memory([f], n_features, n_targets, n_folds).state or 0.0 for f in maps]
    if not all(sizes):
        return [list(range(len(maps)))]      # widths unknown: one pass, the planner checks it
    budget = task_memory_budget() if budget is None else int(budget)
    groups: list[list[int]] = []
    total = 0.0
    for i, s in enumerate(sizes):
        s = s + (float(first_extra) if i == 0 else 0.0)
        if MERGE_STATES * s > budget:
            raise MemoryBudgetError(
                f"{where}: the {n_folds} fold states of one candidate map take "
                f"{format_bytes(int(s))} and a merge holds {MERGE_STATES} of them "
                f"({format_bytes(int(MERGE_STATES * s))}) but the per-task budget is "
                f"{format_bytes(budget)}. Fix: fewer folds (cv), fewer features, or more memory "
                "per task (distsketch.task-memory / DISTSKETCH_TASK_MEMORY).")
        if groups and MERGE_STATES * (total + s) <= budget:
            groups[-1].append(i)
            total += s
        else:
            groups.append([i])
            total = s
    return groups


def fit_cv(est: Any, X: Any, Xs: Any, Y: Any) -> dict:
    """Choose ``alpha_`` (and ``gamma_``) of ``est`` by k-fold CV; return the chosen map's total state.

    One pass per group of :func:`map_groups` (one pass when every candidate
    fits); then every score comes from the fold summaries (and, for the
    classifier, its accuracy pass).
    """
    if est.alphas is not None:
        alphas = positive_values(est.alphas, "alphas")
    elif np.ndim(est.alpha) > 0:
        alphas = positive_values(est.alpha, "alpha")
    else:
        alphas = np.logspace(-4, 3, 8)
    gammas = None if est.gammas is None else positive_values(est.gammas, "gammas")
    maps = [est._make_features(Xs, g, X.shape[0])
            for g in (gammas if gammas is not None else [None])]
    k = int(est.cv)
    where = f"{type(est).__name__} cv={k}"
    sampler = est._row_sampler()
    extra = 0.0 if sampler is None else 16.0 * sampler.n_samples * (X.shape[1] + Y.shape[1] + 3)
    groups = map_groups(maps, int(X.shape[1]), int(Y.shape[1]), k, where=where,
                        first_extra=extra)
    if len(groups) > 1:
        logger.info("%s: %d candidate maps in %d passes (their fold states do not fit one "
                    "merge task)", where, len(maps), len(groups))
    folds: list[Any] = [None] * len(maps)
    for group in groups:
        # the first pass also draws the rows that calibrate the classifier's probabilities
        for i, states in zip(group, est._reduce(X, Y, [maps[i] for i in group], k,
                                                sample=group is groups[0])):
            folds[i] = [unpack_gram(f) for f in states]
    totals = [reduce(add_ridge_states, fold_states) for fold_states in folds]
    scores = est._cv_scores(X, Y, maps, folds, totals, alphas)
    g_best, a_best = est._cv_best(scores)
    est.features_ = maps[g_best]
    est.alpha_ = float(alphas[a_best])
    est.gamma_ = map_gamma(est.features_) if gammas is None else float(gammas[g_best])
    est.kernel_params_ = map_kernel(est.features_)[1]
    # plain lists so the model saves as JSON attributes
    est.cv_results_ = {"alphas": alphas.tolist(),
                       "gammas": None if gammas is None else gammas.tolist(),
                       **{name: v.tolist() for name, v in scores.items()}}
    return totals[g_best]
