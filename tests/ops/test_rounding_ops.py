"""Randomized rounding of expansion coefficients: values, unbiasedness, budget, Hoeffding."""

import numpy as np
import pytest

from distsketch.errors import ConfigError
from distsketch.ops.rounding import (
    expected_nonzeros,
    hoeffding_bound,
    keep_probabilities,
    round_coefficients,
    round_shared,
    shared_keep_probabilities,
    shared_rounded_counts,
    threshold_for_budget,
    threshold_for_total_budget,
)

RNG = np.random.default_rng(3)
COEF = RNG.standard_t(3, size=(200, 2))


def test_rounded_values():
    c = np.array([0.5, 1.0])
    R = round_coefficients(COEF, c, seed=0)
    big = np.abs(COEF) >= c
    assert np.array_equal(R[big], COEF[big])
    small = ~big
    assert np.all(np.isin(np.abs(R[small]), [0.0]) | np.isclose(np.abs(R), c)[small])
    nz = small & (R != 0)
    assert np.all(np.sign(R[nz]) == np.sign(COEF[nz]))


def test_slices_round_like_the_whole_vector():
    R = round_coefficients(COEF, 0.7, seed=5)
    parts = [round_coefficients(COEF[a:b], 0.7, seed=5, row_offset=a)
             for a, b in [(0, 37), (37, 150), (150, 200)]]
    assert np.array_equal(np.vstack(parts), R)


def test_unbiased():
    c = 1.5
    S = 4000
    acc = np.zeros_like(COEF)
    for seed in range(S):
        acc += round_coefficients(COEF, c, seed)
    # Var(rounded) = |a| c - a^2 <= c^2 / 4
    assert np.max(np.abs(acc / S - COEF)) < 5 * (c / 2) / np.sqrt(S)


def test_budget_threshold_meets_budget():
    for budget in [1.5, 10.0, 57.3, 199.0]:
        thr = threshold_for_budget(COEF, budget)
        np.testing.assert_allclose(expected_nonzeros(COEF, thr), budget, rtol=1e-10)
    # more budget than coefficients: nothing is rounded
    thr = threshold_for_budget(COEF, 500.0)
    assert np.array_equal(round_coefficients(COEF, thr, 0), COEF)
    np.testing.assert_allclose(keep_probabilities(COEF, thr), 1.0)


def test_expected_nonzeros_matches_average():
    thr = threshold_for_budget(COEF, 30.0)
    counts = np.array([(round_coefficients(COEF, thr, s) != 0).sum(axis=0) for s in range(500)])
    p = keep_probabilities(COEF, thr)
    sd = np.sqrt((p * (1 - p)).sum(axis=0) / 500)
    assert np.all(np.abs(counts.mean(axis=0) - 30.0) < 5 * sd)


def test_error_within_hoeffding_bound():
    # f = sum a_i k_i with kernel values k_i in [-1, 1]
    k = RNG.uniform(-1, 1, size=(200, 1))
    a = COEF[:, :1]
    c = 0.8
    delta = 0.05
    bound = hoeffding_bound(a, c, 1.0, delta)[0]
    f = float(a[:, 0] @ k[:, 0])
    errs = np.array([float(round_coefficients(a, c, s)[:, 0] @ k[:, 0]) - f for s in range(2000)])
    assert np.mean(np.abs(errs) > bound) <= delta
    # the bound is not vacuous: it is within a small factor of the observed spread
    assert bound < 10 * np.quantile(np.abs(errs), 1 - delta)


def test_bad_arguments():
    with pytest.raises(ConfigError, match="threshold"):
        round_coefficients(COEF, 0.0, 0)
    with pytest.raises(ConfigError, match="budget"):
        threshold_for_budget(COEF, 0.0)
    with pytest.raises(ConfigError, match="delta"):
        hoeffding_bound(COEF, 1.0, 1.0, 1.5)


# --------------------------------------------------- shared rounding (total budget)

COEF4 = RNG.standard_t(3, size=(60, 4)) * np.array([1.0, 3.0, 10.0, 0.3])[None, :]


def test_shared_rounding_keeps_whole_points_and_bounds_terms():
    c = threshold_for_total_budget(COEF4, 20.0)
    p = shared_keep_probabilities(COEF4, c)
    np.testing.assert_allclose(p, np.minimum(1.0, (np.abs(COEF4) / c[None, :]).max(axis=1)))
    R = round_shared(COEF4, c, seed=2)
    kept = np.any(R != 0, axis=1)
    # a point is kept or dropped for every output at once
    assert np.array_equal(R[~kept], np.zeros_like(R[~kept]))
    np.testing.assert_allclose(R[kept], COEF4[kept] / p[kept][:, None], rtol=1e-15)
    # a rounded term never exceeds the output's level: the Hoeffding interval width
    sub = kept & (p < 1)
    assert np.all(np.abs(R[sub]) <= c[None, :] * (1 + 1e-12))
    assert np.array_equal(shared_rounded_counts(COEF4, c),
                          ((p < 1)[:, None] & (COEF4 != 0)).sum(axis=0))
    parts = [round_shared(COEF4[a:b], c, seed=2, row_offset=a) for a, b in [(0, 17), (17, 60)]]
    assert np.array_equal(np.vstack(parts), R)


def test_total_budget_levels():
    c = threshold_for_total_budget(COEF4, 20.0)
    # Σᵢ pᵢ is the budget, and levels are proportional to each output's ℓ₁ mass
    assert shared_keep_probabilities(COEF4, c).sum() == pytest.approx(20.0, rel=1e-12)
    np.testing.assert_allclose(c / np.abs(COEF4).sum(axis=0), c[0] / np.abs(COEF4[:, 0]).sum())
    # one output: the per-output level and the same rounding (same coin)
    one = COEF4[:, 1]
    np.testing.assert_allclose(threshold_for_total_budget(one, 12.0),
                               threshold_for_budget(one, 12.0), rtol=1e-12)
    cc = threshold_for_budget(one, 12.0)
    np.testing.assert_allclose(round_shared(one, cc, seed=4), round_coefficients(one, cc, seed=4),
                               rtol=1e-12)
    # a budget above the support keeps everything; an all-zero output keeps zeros
    Z = np.column_stack([COEF4[:, 0], np.zeros(60)])
    cz = threshold_for_total_budget(Z, 100.0)
    assert np.array_equal(round_shared(Z, cz, seed=0), Z)
    with pytest.raises(ConfigError, match="budget"):
        threshold_for_total_budget(COEF4, 0.0)


def test_shared_rounding_unbiased():
    # Var(α̂ᵢⱼ) = αᵢⱼ² (1 − pᵢ)/pᵢ exactly; the mean over S seeds is within 5 sd
    c = threshold_for_total_budget(COEF4, 15.0)
    p = shared_keep_probabilities(COEF4, c)
    S = 3000
    acc = np.zeros_like(COEF4)
    for seed in range(S):
        acc += round_shared(COEF4, c, seed)
    sd = np.sqrt(COEF4 ** 2 * (1 - p)[:, None] / p[:, None] / S)
    err = np.abs(acc / S - COEF4)
    assert np.all(err <= 5 * sd + 1e-12)
    assert np.any(err > 0)
