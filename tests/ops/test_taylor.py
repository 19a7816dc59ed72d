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
