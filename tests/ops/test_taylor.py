"""Taylor coefficients of the Gaussian and dot-product kernels; degree choice; tail sampling."""

import numpy as np
import pytest
from scipy.special import factorial

from distsketch.errors import ConfigError
from distsketch.ops.kernels import arccos0_profile, arccos1_profile, ntk_profile
from distsketch.ops.taylor import (
    arccos0_coefficients,
    arccos1_coefficients,
    dot_product_coefficients,
    gaussian_coefficients,
    gaussian_degree,
    ntk_coefficients,
    sample_tail_degrees,
    split_components,
)

T = np.linspace(-0.95, 0.95, 21)


@pytest.mark.parametrize(("coef", "profile"), [(arccos0_coefficients, arccos0_profile),
                                               (arccos1_coefficients, arccos1_profile),
                                               (ntk_coefficients, ntk_profile)])
def test_series_reproduce_profiles(coef, profile):
    c = coef(600)
    assert np.all(c >= 0)
    np.testing.assert_allclose(np.polynomial.polynomial.polyval(T, c), profile(T), atol=1e-12)


def test_total_mass_and_residual():
    c, res = dot_product_coefficients("ntk", 64)
    assert abs(c.sum() + res - ntk_profile(np.array(1.0))) < 1e-12
    assert res > 0


def test_gaussian_coefficients_and_degree():
    np.testing.assert_allclose(gaussian_coefficients(5, 0.7), (1.4) ** np.arange(6) / factorial(np.arange(6)))
    q = gaussian_degree(0.5, 2.0, 1e-4)
    lam = 2 * 0.5 * 4.0
    tail = lambda qq: np.exp(-lam) * sum(lam**j / factorial(j) for j in range(qq + 1, 80))  # noqa: E731
    assert tail(q) <= 1e-4 < tail(q - 1)


def test_tail_sampling_is_unbiased():
    # E[mass · t^J] = Σ_{j >= J0} c_j t^j for J drawn ∝ c_j
    c = arccos0_coefficients(200)
    t = 0.8
    draws = np.concatenate([sample_tail_degrees(s, "tail", c, 3, 50)[0] for s in range(200)])
    _, mass = sample_tail_degrees(0, "tail", c, 3, 50)
    vals = mass * t ** draws
    exact = np.sum(c[3:] * t ** np.arange(3, 201))
    assert abs(vals.mean() - exact) < 4 * vals.std() / np.sqrt(vals.size)
    assert draws.min() >= 3


def test_split_components_and_callable_checks():
    m = split_components(100, np.array([5.0, 3.0, 1.0, 0.01]))
    assert m.sum() == 100 and m.min() >= 1 and m[0] > m[1] > m[2]
    with pytest.raises(ConfigError, match="too small"):
        split_components(2, np.ones(3))
    with pytest.raises(ConfigError, match="non-negative"):
        dot_product_coefficients(lambda j: -np.ones(j.size), 4)
    with pytest.raises(ConfigError, match="unknown"):
        dot_product_coefficients("nope", 4)


# --- variance model of the recursive-squaring PolySketch and the split it drives ---------------------
from distsketch.ops.poly_sketch import poly_sketch  # noqa: E402
from distsketch.ops.taylor import (  # noqa: E402
    gaussian_term_weights,
    poly_sketch_log_moment,
    predicted_sketch_error,
    split_components_by_variance,
)


def test_gaussian_term_weights_are_poisson_pmf():
    sq = np.array([0.0, 0.3, 2.0])
    w = gaussian_term_weights(sq, 0.7, 60)
    lam = 1.4 * sq
    expect = np.exp(-lam)[:, None] * lam[:, None] ** np.arange(61) / factorial(np.arange(61))
    np.testing.assert_allclose(w, expect, atol=1e-15)
    np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-12)     # Σ_j w_j(x) = k(x, x) = 1


@pytest.mark.parametrize(("p", "m"), [(2, 64), (4, 128), (8, 128)])
def test_log_moment_predicts_polysketch_norm_variance(p, m):
    # empirical relative variance of ‖z(x)‖²/‖x‖^{2p} over 25 seeds × 40 rows vs e^v − 1 of the model
    X = np.random.default_rng(p).uniform(-1, 1, size=(40, 8))
    nx = np.sum(X * X, axis=1) ** p
    r = np.array([np.sum(poly_sketch(X, s, "v", p, m) ** 2, axis=1) / nx for s in range(25)])
    model = np.expm1(poly_sketch_log_moment(p, m))
    assert model / 4 < r.var() < 4 * model
    # and the (shared-squaring) bias grows with the degree as the model says: E‖z‖² >= ‖x‖^{2p}
    assert r.mean() > 1 - 3 * r.std() / np.sqrt(r.size)


def test_log_moment_shape():
    v = poly_sketch_log_moment(np.array([0, 1, 2, 4, 8]), 100)
    assert v[0] == 0 and np.all(np.diff(v) > 0)
    # quadratic in the degree, inverse in m
    np.testing.assert_allclose(poly_sketch_log_moment(8, 100) / poly_sketch_log_moment(4, 100),
                               (8 * 63 / 3 + 2 * 64) / (8 * 15 / 3 + 2 * 16))
    np.testing.assert_allclose(poly_sketch_log_moment(3, 50), 2 * poly_sketch_log_moment(3, 100))


def test_split_by_variance_beats_proportional_split():
    degrees = np.arange(1, 21)
    w = np.exp(-0.5 * (degrees - 10.0) ** 2 / 9)          # heavy high-degree terms
    a = poly_sketch_log_moment(degrees, 1.0)
    for total in (500, 3000):
        m = split_components_by_variance(total, w, degrees)
        assert m.sum() == total and np.all(m >= 0) and (m == 0).any()
        plain = split_components(total, w * np.sqrt(a))       # every term sketched, m_j ∝ w_j sqrt(a_j)
        assert predicted_sketch_error(w, degrees, m) < predicted_sketch_error(w, degrees, plain) / 10
    # with enough components (nearly) every term is kept and the predicted error falls
    big = split_components_by_variance(200_000, w, degrees)
    assert np.sum(big > 0) >= 18
    assert predicted_sketch_error(w, degrees, big) < predicted_sketch_error(w, degrees, m) / 5


def test_predicted_error_counts_dropped_terms_by_weight():
    got = predicted_sketch_error(np.array([0.3, 0.2]), np.array([1, 2]), np.array([10, 0]))
    assert got == pytest.approx(0.3 * np.sqrt(np.expm1(2.0 / 10)) + 0.2)
