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
