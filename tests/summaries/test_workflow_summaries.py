"""Mergeable-summary conformance of the summaries the workflow defines."""

from __future__ import annotations

import numpy as np

from distsketch.summaries.moments import ColumnMoments
from distsketch.testing import MergeableSummaryTests


class TestMoments(MergeableSummaryTests):
    has_identity = False

    def make_summary(self):
        return ColumnMoments()

    def make_data(self, rng):
        return rng.normal(loc=3.0, size=(88, 4))

    def test_matches_numpy(self):
        X = self._data()
        s = self.make_summary()
        st = s.merge([s.chunk(X[:30], 0), s.chunk(X[30:], 30)])
        assert st["n"] == 88
        np.testing.assert_allclose(st["mean"], X.mean(axis=0), rtol=1e-12)
        np.testing.assert_allclose(st["m2"], X.var(axis=0) * 88, rtol=1e-10)


class TestMomentsAndSample(MergeableSummaryTests):
    # the standardising pass of the ridge models: column moments and the median-gamma
    # row sample in one state
    has_identity = False

    def make_summary(self):
        from distsketch.summaries.landmarks import UniformLandmarks
        from distsketch.summaries.moments import MomentsAndSample

        return MomentsAndSample(UniformLandmarks(12, seed=3, purpose="test.sample"))

    def make_data(self, rng):
        return rng.normal(loc=-2.0, size=(90, 3))

    def test_moments_and_sample_are_those_of_the_parts(self):
        from distsketch.summaries.landmarks import UniformLandmarks

        X = self._data()
        s = self.make_summary()
        st = s.merge([s.chunk(X[:41], 0), s.chunk(X[41:], 41)])
        np.testing.assert_allclose(st["moments"]["mean"], X.mean(axis=0), rtol=1e-12)
        np.testing.assert_allclose(st["moments"]["m2"], X.var(axis=0) * 90, rtol=1e-10)
        alone = UniformLandmarks(12, seed=3, purpose="test.sample")
        np.testing.assert_array_equal(alone.finalize(alone.chunk(X, 0))[1],
                                      alone.finalize(st["sample"])[1])
