"""The default map's gamma search widens its grid when the best gamma is an edge, and says so.

References: exact Gaussian kernel ridge of scikit-learn (5-fold CV over
alpha for each gamma) for where the best gamma lies, and the exact
leave-one-out path scored at every factor the widening may reach
(:func:`loo_kernel_path`, itself checked against refits in
``test_ridge_defaults.py``) for what the search must pick.
"""

from __future__ import annotations

import logging

import numpy as np
from sklearn.kernel_ridge import KernelRidge
from sklearn.model_selection import GridSearchCV

from distsketch import RandomFourierFeatures, SketchedKernelRidge
from distsketch.estimators.ridge.gamma_search import (
    GAMMA_FACTORS,
    GAMMA_LADDER,
    loo_kernel_path,
    search_gamma,
)

LADDER = list(GAMMA_LADDER)


def _wiggly(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    # a target that oscillates along one of two columns: a narrow kernel (gamma well
    # above 2 / n_features) fits it, the grid's widest gammas smooth it away
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    return X, np.sin(5.0 * X[:, 0]) + 0.05 * rng.normal(size=n)


def test_best_gamma_above_the_grid_widens_it_and_says_so(caplog):
    X, y = _wiggly(300, 0)
    with caplog.at_level(logging.INFO, logger="distsketch"):
        model = SketchedKernelRidge(random_state=0).fit(X, y)
    d = X.shape[1]
    search = model.gamma_search_
    chosen = model.gamma_ * d
    assert search["chosen"] == chosen > GAMMA_FACTORS[-1]
    assert search["widened"] and max(search["factors"]) > GAMMA_FACTORS[-1]
    assert search["note"] is not None and f"up to {chosen:g}" in search["note"]
    assert search["note"] in caplog.text
    # exact kernel ridge (scikit-learn, 5-fold CV over alpha) puts the best gamma above the
    # initial grid too, within one factor-2 step of the choice
    Xs = (X - X.mean(axis=0)) / X.std(axis=0)
    cv_mse = []
    for f in LADDER:
        gs = GridSearchCV(KernelRidge(kernel="rbf", gamma=f / d),
                          {"alpha": np.logspace(-8, 1, 10)}, cv=5,
                          scoring="neg_mean_squared_error").fit(Xs, y)
        cv_mse.append(-gs.best_score_)
    ref = LADDER[int(np.argmin(cv_mse))]
    assert ref > GAMMA_FACTORS[-1]
    assert abs(np.log2(chosen) - np.log2(ref)) <= 1
    # and the widened choice predicts new rows better than the grid's edge did
    Xt, yt = _wiggly(2000, 1)
    edge = SketchedKernelRidge(random_state=0, features=RandomFourierFeatures(
        gamma=GAMMA_FACTORS[-1] / d), standardize=True).fit(X, y)
    assert model.score(Xt, yt) > edge.score(Xt, yt) + 0.1


def test_search_picks_the_best_factor_of_the_whole_ladder(caplog):
    rng = np.random.default_rng(2)
    # a linear target: the leave-one-out error keeps falling as gamma shrinks, past the
    # grid and the widening's last step
    X = rng.normal(size=(200, 4))
    S = (X - X.mean(axis=0)) / X.std(axis=0)
    y = (S @ np.array([1.0, -2.0, 0.5, 1.0]) + 0.1 * rng.normal(size=200))[:, None]
    full = loo_kernel_path(S, y, np.asarray(LADDER) / 4, True)
    best = LADDER[int(np.argmin(full["mse"].min(axis=1)))]
    path = search_gamma(S, y, True)
    picked = path["factors"][int(np.argmin(path["mse"].min(axis=1)))]
    assert picked == best == LADDER[0]
    assert path["at_limit"] and path["widened"]
    assert len(path["factors"]) < len(LADDER)
    # the scored rows are the exact path's rows for those factors
    rows = [LADDER.index(f) for f in path["factors"]]
    np.testing.assert_allclose(path["mse"], full["mse"][rows], rtol=1e-12)
    # the fit warns that the choice sits on the widening's limit
    with caplog.at_level(logging.INFO, logger="distsketch"):
        model = SketchedKernelRidge(random_state=0).fit(X, y[:, 0])
    assert model.gamma_search_["at_limit"]
    assert any(r.levelno == logging.WARNING and "still best there" in r.getMessage()
               for r in caplog.records)
