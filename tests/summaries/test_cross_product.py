"""Mergeable-summary conformance of :mod:`distsketch.summaries.cross_product`."""

from __future__ import annotations

import numpy as np

from distsketch.summaries.cross_product import CrossProduct
from distsketch.testing import MergeableSummaryTests


class TestCrossProduct(MergeableSummaryTests):
    has_identity = False

    def make_summary(self):
        return CrossProduct(2)

    def make_data(self, rng):
        return rng.normal(size=(60, 5))

    def test_matches_numpy(self):
        X = self._data()
        np.testing.assert_allclose(self.make_summary().chunk(X, 0)["atb"], X[:, :3].T @ X[:, 3:],
                                   rtol=1e-12)
