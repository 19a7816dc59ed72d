"""RidgeSystem: one factorisation gives the path, the solution and the leverages exactly.

References are dense float64 solves of ``(A + αI) x = b`` with A the centred
``ZᵀZ`` (numpy.linalg.solve), and GCV written out from its definition
(hat-matrix trace and residuals of explicit refits).
"""

from __future__ import annotations

import numpy as np
import pytest

from distsketch.estimators.ridge.system import RidgeSystem
from distsketch.summaries.covariance import covariance_state


def _problem(seed: int = 0):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(200, 30)) @ rng.normal(size=(30, 30)) * 0.1 + 0.3
    Y = np.column_stack([Z[:, 0] - Z[:, 1] ** 2, Z[:, 2]]) + 0.05 * rng.normal(size=(200, 2))
    return Z, Y, covariance_state(Z, Y)


def _direct(Z, Y, alpha):
    Zc, Yc = Z - Z.mean(axis=0), Y - Y.mean(axis=0)
    G = Zc.T @ Zc + alpha * np.eye(Z.shape[1])
    return Zc, Yc, G, np.linalg.solve(G, Zc.T @ Yc)


@pytest.mark.parametrize("first", ["nothing", "eigh", "gcv"])
def test_solution_and_quadratic_forms_from_one_factorisation(first):
    Z, Y, state = _problem()
    alpha = 0.5
    Zc, _, G, W_ref = _direct(Z, Y, alpha)
    system = RidgeSystem(state, True)
    if first == "eigh":  # the eigenpairs serve the solve and the leverages
        system.eigh()
    elif first == "gcv":  # GCV's tridiagonal form serves the solve
        system.gcv(np.array([1.0]))
    W, c = system.solve(np.array([alpha]))
    np.testing.assert_allclose(W[0], W_ref, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(c[0], Y.mean(axis=0) - Z.mean(axis=0) @ W_ref, rtol=1e-9)
    quad = system.quadratic_forms(Zc[:17], alpha)
    ref = np.einsum("km,km->k", Zc[:17], np.linalg.solve(G, Zc[:17].T).T)
    np.testing.assert_allclose(quad, ref, rtol=1e-9)


def test_gcv_matches_its_definition():
    Z, Y, state = _problem(1)
    n = Z.shape[0]
    system = RidgeSystem(state, True)
    grid = np.array([1e-3, 1e-1, 10.0])
    alphas, gcv = system.gcv(grid)
    Zc, Yc, _, _ = _direct(Z, Y, 1.0)
    np.testing.assert_allclose(alphas, grid * np.trace(Zc.T @ Zc) / Z.shape[1], rtol=1e-12)
    for a, g in zip(alphas, gcv):
        _, _, G, W = _direct(Z, Y, a)
        H = Zc @ np.linalg.solve(G, Zc.T)
        df = np.trace(H) + 1.0                      # + the intercept
        rss = ((Yc - Zc @ W) ** 2).sum()
        assert g == pytest.approx(n * rss / (n - df) ** 2, rel=1e-8)


@pytest.mark.parametrize("m", [1, 2, 3])
def test_tridiagonal_route_on_the_smallest_systems(m):
    # no off-diagonal (m = 1) or a single one: GCV and the solve against dense references
    rng = np.random.default_rng(m)
    Z = rng.normal(size=(40, m))
    Y = Z @ rng.normal(size=(m, 2)) + 0.1 * rng.normal(size=(40, 2))
    state = covariance_state(Z, Y)
    tri, eig = RidgeSystem(state, True), RidgeSystem(state, True)
    eig.eigh()
    grid = np.array([1e-3, 1.0, 100.0])
    np.testing.assert_allclose(tri.gcv(grid)[1], eig.gcv(grid)[1], rtol=1e-10)
    alpha = float(tri.gcv(grid)[0][1])
    np.testing.assert_allclose(tri.solve(np.array([alpha]))[0][0], _direct(Z, Y, alpha)[3],
                               rtol=1e-10, atol=1e-13)
