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


def _curvature_numbers(message):
    import re

    worst = float(re.search(r"pᵀAp/‖p‖² = (\S+), i\.e\.", message).group(1))
    relative = float(re.search(r"i\.e\. (\S+) relative", message).group(1))
    scale = float(re.search(r"seen: ([^)]+)\)", message).group(1))
    return worst, relative, scale


@pytest.mark.parametrize("b_scale", [1.0, 1e6])
def test_negative_curvature_message_is_normalised(b_scale):
    rng = np.random.default_rng(6)
    Q, _ = np.linalg.qr(rng.normal(size=(40, 40)))
    ev = np.concatenate([[-0.5], np.linspace(1.0, 100.0, 39)])
    A = (Q * ev) @ Q.T
    b = b_scale * rng.normal(size=40)
    with pytest.raises(ConfigError, match="not positive definite") as info:
        pcg(lambda V: A @ V, b, tol=1e-12, max_iter=200)
    worst, relative, scale = _curvature_numbers(str(info.value))
    # a Rayleigh quotient lies in [λ_min, λ_max] whatever ‖p‖ is
    assert ev.min() - 1e-9 <= worst <= 0.0
    assert 0 < scale <= ev.max() * (1 + 1e-9)
    assert -1.0 <= relative < 0.0
    np.testing.assert_allclose(relative, worst / scale, rtol=1e-2)
    # the same numbers whatever the scale of b (the raw pᵀAp grows with ‖b‖²)
    with pytest.raises(ConfigError) as again:
        pcg(lambda V: A @ V, b / b_scale, tol=1e-12, max_iter=200)
    np.testing.assert_allclose(_curvature_numbers(str(again.value)), (worst, relative, scale),
                               rtol=1e-2)


def test_scaling_the_operator_keeps_the_relative_number():
    A = np.diag([-1.0, 2.0, 3.0, 50.0])
    b = np.ones(4)
    msgs = []
    for c in (1.0, 1e4):
        with pytest.raises(ConfigError) as info:
            pcg(lambda V, c=c: c * (A @ V), b, tol=1e-12)
        msgs.append(_curvature_numbers(str(info.value)))
    np.testing.assert_allclose(msgs[1][1], msgs[0][1], rtol=1e-2)
    np.testing.assert_allclose(msgs[1][0], 1e4 * msgs[0][0], rtol=1e-2)


@pytest.mark.parametrize("verbose, expected", [(0, None), (1, 10), (2, 1)])
def test_verbose_logs_iterations_and_residuals(caplog, verbose, expected):
    import logging

    A = _spd(80, 1e4, seed=7)
    b = np.random.default_rng(8).normal(size=80)
    with caplog.at_level(logging.INFO, logger="distsketch"):
        res = pcg(lambda V: A @ V, b, tol=1e-8, max_iter=500, verbose=verbose, label="demo")
    lines = [r.getMessage() for r in caplog.records if r.name == "distsketch"]
    if expected is None:  # verbose=0 stays at DEBUG level: nothing at INFO
        assert lines == []
        return
    its = [ln for ln in lines if "iteration " in ln and "relative residual" in ln
           and "after" not in ln]
    assert len(its) == res.n_iter // expected
    # the logged residuals are the recorded history
    first = its[0]
    k = int(first.split("iteration ")[1].split(",")[0])
    assert float(first.rsplit(" ", 1)[1]) == pytest.approx(res.residuals[k], rel=1e-3)
    assert lines[0].startswith("demo: n=80") and "converged after" in lines[-1]
