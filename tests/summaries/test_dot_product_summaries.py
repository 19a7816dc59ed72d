"""Mergeable-summary conformance of the dot-product sketches' fit-time passes
(:mod:`distsketch.summaries.dot_product`)."""

from __future__ import annotations

import numpy as np

from distsketch.summaries.dot_product import ColumnSum, GaussianStats
from distsketch.testing import MergeableSummaryTests


class TestColumnSum(MergeableSummaryTests):
    has_identity = False

    def make_summary(self):
        return ColumnSum()

    def make_data(self, rng):
        return rng.normal(size=(77, 4))

    def test_matches_numpy(self):
        X = self._data()
        st = self.make_summary().chunk(X, 0)
        assert st["n"] == 77
        np.testing.assert_allclose(st["sum"], X.sum(axis=0), rtol=1e-12)


class TestGaussianStats(MergeableSummaryTests):
    has_identity = False
    center = np.array([0.1, -0.2, 0.0, 0.3])

    def make_summary(self):
        return GaussianStats(0.3, 6)

    def operands(self):
        return (self.center,)

    def make_data(self, rng):
        return rng.normal(size=(85, 4))

    def test_radius_after_centring(self):
        X = self._data()
        st = self.make_summary().chunk(X, 0, self.center)
        assert st["n"] == 85
        np.testing.assert_allclose(st["max_sq"], (((X - self.center) ** 2).sum(axis=1)).max())
        assert st["w"].shape == st["w2"].shape == (7,)
