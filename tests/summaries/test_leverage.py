"""Weighted bottom-k races (WeightedLandmarks) and approximate ridge leverage scores."""

from __future__ import annotations

import itertools

import dask.array as da
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distsketch.estimators.nystrom.landmark_choice import leverage_landmarks
from distsketch.ops.kernels import pairwise_kernel
from distsketch.ops.nystrom import inv_sqrt_map
from distsketch.ops.random import hash_uniform
from distsketch.summaries.leverage import (
    WeightedLandmarks,
    race_keys,
    ridge_from_spectrum,
    ridge_leverage,
)
from distsketch.testing import MergeableSummaryTests


def sq_norm(block, row_offset):
    # a per-row weight, zero for the rows whose first coordinate is negative
    b = np.asarray(block, dtype=np.float64)
    return np.where(b[:, 0] > 0, np.sum(b * b, axis=1), 0.0)


def _brute(X: np.ndarray, k: int, seed: int, purpose: str) -> np.ndarray:
    key = race_keys(seed, purpose, np.arange(X.shape[0]), sq_norm(X, 0))
    live = np.flatnonzero(np.isfinite(key))
    return np.sort(live[np.lexsort((live, key[live]))[:k]])


class TestWeightedLandmarks(MergeableSummaryTests):
    rtol = 0.0
    atol = 0.0

    def make_summary(self):
        return WeightedLandmarks(17, seed=5, purpose="w", weight=sq_norm)

    def make_data(self, rng):
        return rng.normal(size=(203, 4))

    def test_equals_bottom_k_of_all_keys(self):
        X = self._data()
        idx, rows = self.make_summary().finalize(self.make_summary().chunk(X, 0))
        expect = _brute(X, 17, 5, "w")
        np.testing.assert_array_equal(idx, expect)
        np.testing.assert_array_equal(rows, X[expect])

    def test_rows_of_weight_zero_are_never_drawn(self):
        X = self._data()
        s = WeightedLandmarks(500, seed=5, purpose="w", weight=sq_norm)
        idx, _ = s.finalize(s.chunk(X, 0))
        # fewer than k rows have positive weight: all of them, and only them, come back
        np.testing.assert_array_equal(idx, np.flatnonzero(X[:, 0] > 0))


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(cuts=st.lists(st.integers(1, 256), min_size=0, max_size=6, unique=True),
       order=st.permutations(range(7)))
def test_sample_is_independent_of_chunking_and_merge_order(cuts, order):
    X = np.random.default_rng(2).normal(size=(257, 3))
    s = WeightedLandmarks(20, seed=3, purpose="w", weight=sq_norm)
    bounds = [0, *sorted(cuts), 257]
    states = [s.chunk(X[lo:hi], lo) for lo, hi in itertools.pairwise(bounds)]
    states = [states[i] for i in order if i < len(states)]
    while len(states) > 1:  # an unbalanced tree: merge the last two, then the rest
        states = [*states[:-2], s.merge(states[-2:])]
    idx, rows = s.finalize(states[0])
    np.testing.assert_array_equal(idx, _brute(X, 20, 3, "w"))
    np.testing.assert_array_equal(rows, X[idx])


def test_first_draw_is_proportional_to_weight():
    # k = 1 over 4 rows of weights 1, 2, 3, 4: row i wins with probability w_i / 10
    w = np.array([1.0, 2.0, 3.0, 4.0])
    trials = 4000
    wins = np.zeros(4)
    for seed in range(trials):
        wins[np.argmin(race_keys(seed, "w", np.arange(4), w))] += 1
    p = w / w.sum()
    # five binomial standard deviations at 4000 fixed seeds
    assert np.all(np.abs(wins / trials - p) <= 5 * np.sqrt(p * (1 - p) / trials))


def test_keys_are_exponential_clocks():
    u = hash_uniform(1, "w", np.arange(10))
    np.testing.assert_allclose(race_keys(1, "w", np.arange(10), np.full(10, 2.0)),
                               -np.log1p(-u) / 2.0, rtol=0, atol=0)
    assert np.all(np.isinf(race_keys(1, "w", np.arange(3), np.zeros(3))))


def test_ridge_leverage_with_all_rows_as_pilot_is_exact():
    # pilot = every row: Z Zᵀ = K, no residual, and ℓ_i = (K (K + λI)⁻¹)_ii exactly
    X = np.random.default_rng(0).normal(size=(60, 3))
    K = pairwise_kernel(X, None, "rbf", gamma=0.5)
    M, _ = inv_sqrt_map(K, rcond=1e-14)
    Z = K @ M
    lam = 0.3
    A = np.linalg.inv(Z.T @ Z + lam * np.eye(Z.shape[1]))
    got = ridge_leverage(X, 0, X, M, A, lam, kernel="rbf", params={"gamma": 0.5})
    exact = np.diag(K @ np.linalg.inv(K + lam * np.eye(60)))
    np.testing.assert_allclose(got, exact, rtol=1e-6, atol=1e-8)
    assert abs(got.sum() - np.trace(K @ np.linalg.inv(K + lam * np.eye(60)))) < 1e-6


def test_ridge_leverage_adds_the_residual_over_ridge():
    X = np.random.default_rng(1).normal(size=(50, 3))
    L = X[:5]
    M, _ = inv_sqrt_map(pairwise_kernel(L, None, "rbf", gamma=0.5))
    Z = pairwise_kernel(X, L, "rbf", gamma=0.5) @ M
    lam = 0.7
    A = np.linalg.inv(Z.T @ Z + lam * np.eye(Z.shape[1]))
    expect = np.einsum("ij,jk,ik->i", Z, A, Z) + np.maximum(1.0 - np.sum(Z * Z, axis=1), 0) / lam
    got = ridge_leverage(X, 0, L, M, A, lam, kernel="rbf", params={"gamma": 0.5})
    np.testing.assert_allclose(got, expect, rtol=1e-10, atol=1e-12)


def test_ridge_rule_is_tail_over_k():
    vals = np.array([1.0, 5.0, 3.0, 0.5, 0.25, 0.25])
    # M = 4 -> k = min(2, 3) = 2; tail beyond the top 2 (5, 3) = 2.0
    assert ridge_from_spectrum(vals, 4) == 1.0
    # an exactly low-rank spectrum keeps a positive ridge
    assert ridge_from_spectrum(np.array([2.0, 0.0, 0.0, 0.0]), 2) == 2e-12


def test_leverage_landmarks_are_independent_of_chunking():
    X = np.random.default_rng(4).normal(size=(400, 4))
    kw = {"kernel": "rbf", "kernel_params": {"gamma": 0.4}}
    ref_idx, ref_rows, lam = leverage_landmarks(X, 30, 7, **kw)
    assert len(ref_idx) == 30 and lam > 0
    np.testing.assert_array_equal(ref_rows, X[ref_idx])
    for chunk in (37, 128, 400):
        idx, _, _ = leverage_landmarks(da.from_array(X, chunks=(chunk, 4)), 30, 7, **kw)
        np.testing.assert_array_equal(idx, ref_idx)


def test_high_leverage_outliers_are_drawn():
    # 6 far, isolated rows among a tight cluster: each has ridge leverage near 1,
    # the cluster's rows share theirs, so a 20-row leverage sample takes every outlier
    rng = np.random.default_rng(3)
    X = np.vstack([rng.normal(scale=0.05, size=(500, 2)), 10.0 * np.eye(2)[[0, 1, 0, 1, 0, 1]]
                   * np.arange(1, 7)[:, None]])
    idx, _, _ = leverage_landmarks(X, 20, 0, kernel="rbf", kernel_params={"gamma": 1.0})
    assert set(range(500, 506)) <= set(idx.tolist())
