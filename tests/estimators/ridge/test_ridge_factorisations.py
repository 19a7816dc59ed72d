"""A default ridge fit factors the m × m normal equations once, whatever the grids' sizes.

The dense factorisations (eigendecompositions and Cholesky factors) are
counted by wrapping NumPy's and SciPy's entry points.  With GCV choosing
alpha (more rows than the leave-one-out sample), one tridiagonal reduction of
the centred ZᵀZ scores every alpha candidate and gives the solution at the
chosen one; the classifier adds one Cholesky factor at that alpha for the
calibration sample's leverages; the
gamma choice takes one eigendecomposition of the sample's kernel per gamma
it scores (and, on a sample of more than PILOT_ABOVE rows, one of a
PILOT_ROWS-row pilot's kernel per factor of the ladder).  Neither bound
depends on the number of alpha candidates.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import scipy.linalg
from sklearn.datasets import make_classification, make_regression

import distsketch.estimators.ridge.defaults as defaults
from distsketch import SketchedKernelRidge, SketchedKernelRidgeClassifier
from distsketch.estimators.ridge.gamma_search import (
    GAMMA_FACTORS,
    MAX_GAMMA_WIDENING,
    PILOT_ABOVE,
    PILOT_ROWS,
)


def _counting(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """Count every factorisation by the size of its matrix."""
    sizes: Counter = Counter()

    def wrap(module: object, name: str) -> None:
        real = getattr(module, name)

        def counted(a, *args, **kwargs):
            sizes[np.shape(a)[0]] += 1
            return real(a, *args, **kwargs)

        monkeypatch.setattr(module, name, counted)

    for name in ("eigh", "cholesky", "eigvalsh", "svd"):
        wrap(np.linalg, name)
    for name in ("eigh", "cholesky", "cho_factor", "eigvalsh", "svd", "lu_factor"):
        wrap(scipy.linalg, name)
    for name in ("dsytrd", "dsyevd", "dsyevr", "dpotrf"):
        wrap(scipy.linalg.lapack, name)
    return sizes


def _fit(estimator: str, n_alphas: int, monkeypatch: pytest.MonkeyPatch):
    # 1200 rows: the 1000-row leave-one-out sample does not hold every row, so GCV
    # chooses alpha from the summary
    if estimator == "classifier":
        X, y = make_classification(n_samples=1200, n_features=6, n_informative=4, n_classes=3,
                                   random_state=0)
        model = SketchedKernelRidgeClassifier(random_state=0)
    else:
        X, y = make_regression(n_samples=1200, n_features=6, noise=5.0, random_state=0)
        model = SketchedKernelRidge(random_state=0)
    with monkeypatch.context() as mp:
        mp.setattr(defaults, "GCV_FEATURE_GRID", np.logspace(-3, 2, n_alphas))
        mp.setattr(defaults, "GCV_GRID", np.logspace(-8, 2, n_alphas))
        sizes = _counting(mp)
        model.fit(X, y)
    return model, sizes


@pytest.mark.parametrize("estimator, n_alphas",
                         [("classifier", 3), ("classifier", 101), ("regressor", 41)])
def test_default_fit_factors_the_normal_equations_once(estimator, n_alphas, monkeypatch):
    model, sizes = _fit(estimator, n_alphas, monkeypatch)
    m = model.features_.n_output_features_
    k = model.cv_results_["loo_rows"]
    assert m != k and "gcv" in model.cv_results_
    assert len(model.cv_results_["alphas"]) == n_alphas
    # one reduction of the m × m normal equations for GCV and the solve (and one Cholesky
    # factor for the classifier's calibration), whatever the number of alphas
    assert sizes[m] == (2 if estimator == "classifier" else 1)
    # one of the sample's k × k kernel per gamma scored (the search moves one way: at
    # most the grid and its widening), one of the pilot's kernel (PILOT_ROWS rows, where the
    # sample has more than PILOT_ABOVE) per factor of the ladder, and no other
    n_gammas = len(model.cv_results_["gammas"])
    assert sizes[k] == n_gammas <= len(GAMMA_FACTORS) + MAX_GAMMA_WIDENING
    ladder = len(GAMMA_FACTORS) + 2 * MAX_GAMMA_WIDENING
    assert sizes[PILOT_ROWS] == (ladder if k > PILOT_ABOVE else 0)
    assert set(sizes) <= {m, k, PILOT_ROWS}
