"""Tests of the preconditioned conjugate gradient (distsketch.ops.cg)."""

import numpy as np
import pytest
import scipy.linalg as sla

from distsketch.errors import ConfigError, InputError
from distsketch.ops.cg import cg_iteration_bound, pcg


def _spd(n, kappa, seed=0):
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    ev = np.geomspace(1.0, kappa, n)
    return (Q * ev) @ Q.T


@pytest.mark.parametrize("t", [1, 3])
def test_pcg_matches_direct_solve(t):
    A = _spd(60, 1e3)
    b = np.random.default_rng(1).normal(size=(60, t))
    res = pcg(lambda V: A @ V, b, tol=1e-10, max_iter=500)
    assert res.converged
    np.testing.assert_allclose(res.x, sla.solve(A, b), rtol=1e-6, atol=1e-8)
    assert res.residuals.shape == (res.n_iter + 1,)
    assert res.residuals[-1] <= 1e-10


def test_pcg_vector_rhs_keeps_shape_and_respects_bound():
    kappa = 1e4
    A = _spd(200, kappa, seed=2)
    b = np.random.default_rng(3).normal(size=200)
    res = pcg(lambda V: A @ V, b, tol=1e-6, max_iter=2000)
    assert res.x.shape == (200,)
    assert res.n_iter <= cg_iteration_bound(kappa, 1e-6)
    np.testing.assert_allclose(A @ res.x, b, atol=1e-5 * np.linalg.norm(b))


def test_exact_preconditioner_converges_in_one_step():
    A = _spd(50, 1e6)
    Ainv = np.linalg.inv(A)
    b = np.random.default_rng(4).normal(size=(50, 2))
    res = pcg(lambda V: A @ V, b, precond=lambda R: Ainv @ R, tol=1e-8)
    assert res.n_iter <= 2
    np.testing.assert_allclose(res.x, sla.solve(A, b), rtol=1e-5)


def test_residual_history_recorded_and_warm_start():
    A = _spd(40, 100)
    b = np.random.default_rng(5).normal(size=40)
    x_star = sla.solve(A, b)
    res = pcg(lambda V: A @ V, b, x0=x_star, tol=1e-8)
    assert res.n_iter == 0 and res.converged
    res2 = pcg(lambda V: A @ V, b, tol=1e-8, max_iter=3)
    assert res2.n_iter == 3 and not res2.converged and len(res2.residuals) == 4


def test_bad_inputs():
    A = np.eye(3)
    with pytest.raises(InputError, match="NaN"):
        pcg(lambda V: A @ V, np.array([1.0, np.nan, 0.0]))
    with pytest.raises(ConfigError, match="tol"):
        pcg(lambda V: A @ V, np.ones(3), tol=0)
    with pytest.raises(ConfigError, match="positive definite"):
        pcg(lambda V: -V, np.ones(3))
