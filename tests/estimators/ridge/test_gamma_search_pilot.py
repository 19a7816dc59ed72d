"""The gamma search of a large sample starts where a pilot sub-sample points.

Reference: the exact leave-one-out path (:func:`loo_kernel_path`, checked
against refits in ``test_ridge_defaults.py``) scored at every factor the
search may reach.  Counted, not timed: the k-row eigendecompositions of one
search (each costs k³; the pilot's are (k / PILOT_ROWS)³ cheaper).
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_friedman2

from distsketch.estimators.ridge.gamma_search import (
    GAMMA_LADDER,
    PILOT_ABOVE,
    loo_kernel_path,
    search_gamma,
)

LADDER = list(GAMMA_LADDER)

ROWS = 600


def _standardised(X: np.ndarray) -> np.ndarray:
    return (X - X.mean(axis=0)) / X.std(axis=0)


def _friedman2() -> tuple[np.ndarray, np.ndarray]:
    # smooth in its 4 columns: the best gamma is the ladder's smallest, 3 steps below the grid
    X, y = make_friedman2(ROWS, noise=10.0, random_state=0)
    return _standardised(X), y[:, None]


def _wiggly() -> tuple[np.ndarray, np.ndarray]:
    # oscillates along one column: the best gamma is 2 steps above the grid, and the error
    # has a second, shallow minimum at the small gammas (all of them fit a constant)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(ROWS, 2))
    return _standardised(X), (np.sin(5.0 * X[:, 0]) + 0.05 * rng.normal(size=ROWS))[:, None]


def _linear() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(ROWS, 4))
    return _standardised(X), (X @ np.array([1.0, -2.0, 0.5, 1.0])
                              + 0.1 * rng.normal(size=ROWS))[:, None]


@pytest.mark.parametrize("table", [_friedman2, _wiggly, _linear])
def test_search_picks_the_ladder_best_with_at_most_four_full_decompositions(table,
                                                                            monkeypatch):
    S, Y = table()
    assert S.shape[0] > PILOT_ABOVE
    d = S.shape[1]
    full = loo_kernel_path(S, Y, np.asarray(LADDER) / d, True)
    g_ref, a_ref = np.unravel_index(int(np.argmin(full["mse"])), full["mse"].shape)

    sizes: list[int] = []
    eigh = np.linalg.eigh

    def counting_eigh(a, *args, **kwargs):
        sizes.append(int(np.shape(a)[0]))
        return eigh(a, *args, **kwargs)

    monkeypatch.setattr(np.linalg, "eigh", counting_eigh)
    path = search_gamma(S, Y, True)
    monkeypatch.undo()

    g, a = np.unravel_index(int(np.argmin(path["mse"])), path["mse"].shape)
    # the same choice as scoring all 11 factors on every row: gamma and alpha
    assert path["factors"][g] == LADDER[g_ref]
    assert path["alphas"][g, a] == full["alphas"][g_ref, a_ref]
    # each scored factor's row is the exact path at that factor
    for f, row in zip(path["factors"], path["mse"]):
        np.testing.assert_allclose(row, full["mse"][LADDER.index(f)], rtol=1e-9)
    # the choice and its two neighbours (one more where the pilot was a step off), where
    # walking from the middle of GAMMA_FACTORS takes 6 or 7 here
    full_size = [s for s in sizes if s == S.shape[0]]
    assert len(full_size) == len(path["factors"]) <= 4
    # the pilot's decompositions are of its rows only
    assert all(s < S.shape[0] // 2 for s in sizes if s != S.shape[0])


def test_factors_scored_side_by_side_give_the_serial_result_bitwise():
    # the pilot's factors and the first three are scored on several threads, each with
    # single-threaded BLAS: the search equals the one-thread search bit for bit
    import dask

    S, Y = _friedman2()
    with dask.config.set(num_workers=1):
        serial = search_gamma(S, Y, True)
    with dask.config.set(num_workers=3):
        threaded = search_gamma(S, Y, True)
    assert serial["factors"] == threaded["factors"]
    for key in ("gammas", "alphas", "mse"):
        np.testing.assert_array_equal(serial[key], threaded[key])
