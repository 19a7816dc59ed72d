"""The one sum merge: nested states added leaf by leaf, as a left fold."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

from distsketch.graph import reduce_blocks
from distsketch.summaries.sums import SumSummary, add_states, sum_states
from distsketch.testing import MergeableSummaryTests


def _moments(block, row_offset):
    Z = np.asarray(block, dtype=np.float64)
    return {"n": Z.shape[0], "parts": [Z.sum(axis=0), Z.T @ Z]}


def test_add_states_adds_nested_leaves():
    a = {"n": 2, "x": [np.array([1.0, 2.0]), (np.array(3.0),)]}
    b = {"n": 5, "x": [np.array([10.0, 20.0]), (np.array(30.0),)]}
    out = add_states(a, b)
    assert out["n"] == 7
    np.testing.assert_array_equal(out["x"][0], [11.0, 22.0])
    assert isinstance(out["x"][1], tuple)
    assert out["x"][1][0] == 33.0


def test_sum_states_is_a_left_fold():
    rng = np.random.default_rng(1)
    # magnitudes far apart, so another summation order rounds differently
    parts = [rng.normal(size=4) * 10.0 ** e for e in (8, -8, 0, 8, -3, 5, -8, 2, 0)]
    expect = parts[0]
    for p in parts[1:]:
        expect = expect + p
    np.testing.assert_array_equal(sum_states([{"v": p} for p in parts])["v"], expect)


def test_merged_state_does_not_alias_its_inputs():
    a = {"v": np.ones(3)}
    out = sum_states([a])
    out["v"] += 1.0
    np.testing.assert_array_equal(a["v"], np.ones(3))


def test_mismatched_states_are_refused():
    with pytest.raises(KeyError):
        add_states({"a": 1.0, "b": 2.0}, {"a": 1.0})
    with pytest.raises(ValueError):
        add_states([1.0, 2.0], [1.0])


def test_sum_summary_tree_reduces_to_the_whole_array_moments():
    X = np.random.default_rng(2).normal(size=(300, 3))
    state = reduce_blocks(SumSummary(_moments), da.from_array(X, chunks=(37, 3)), split_every=3)
    assert state["n"] == 300
    np.testing.assert_allclose(state["parts"][0], X.sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(state["parts"][1], X.T @ X, rtol=1e-12)


class TestSumSummary(MergeableSummaryTests):
    """The generic sum merge over a block function (count, column sums, Gram)."""

    has_identity = False

    def make_summary(self):
        return SumSummary(_moments)

    def make_data(self, rng):
        return rng.normal(size=(90, 4))

    def test_matches_numpy(self):
        X = self._data()
        st = self.make_summary().chunk(X, 0)
        assert st["n"] == 90
        np.testing.assert_allclose(st["parts"][1], X.T @ X, rtol=1e-12)
