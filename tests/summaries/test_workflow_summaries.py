"""Mergeable-summary conformance of the summaries the workflow defines."""

from __future__ import annotations

import numpy as np

from distsketch.summaries.landmarks import UniformLandmarks
from distsketch.testing import MergeableSummaryTests, assert_states_equal
from distsketch.workflow import _Moments, _Shifted


class TestMoments(MergeableSummaryTests):
    has_identity = False

    def make_summary(self):
        return _Moments()

    def make_data(self, rng):
        return rng.normal(loc=3.0, size=(88, 4))

    def test_matches_numpy(self):
        X = self._data()
        s = self.make_summary()
        st = s.merge([s.chunk(X[:30], 0), s.chunk(X[30:], 30)])
        assert st["n"] == 88
        np.testing.assert_allclose(st["mean"], X.mean(axis=0), rtol=1e-12)
        np.testing.assert_allclose(st["m2"], X.var(axis=0) * 88, rtol=1e-10)


class TestShiftedLandmarks(MergeableSummaryTests):
    """Bottom-k landmarks of rows numbered from 1000: exact, and they depend on the shift."""

    rtol = 0.0
    atol = 0.0
    has_identity = False

    def make_summary(self):
        return _Shifted(UniformLandmarks(9, seed=2), 1000)

    def make_data(self, rng):
        return rng.normal(size=(120, 3))

    def test_numbers_rows_from_the_base(self):
        X = self._data()
        shifted = self.make_summary()
        got = shifted.chunk(X, 0)
        assert_states_equal(got, UniformLandmarks(9, seed=2).chunk(X, 1000))
        idx, _ = UniformLandmarks(9, seed=2).finalize(got)
        assert idx.min() >= 1000
