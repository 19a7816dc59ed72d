"""Mergeable-summary conformance of the blocked RFF covariance
(:mod:`distsketch.summaries.rff_covariance`)."""

from __future__ import annotations

import numpy as np

from distsketch.ops.rff import rff_map, rff_operator
from distsketch.summaries.rff_covariance import MAP_ROWS, BlockedCovariance, RFFRows
from distsketch.testing import MergeableSummaryTests


class TestBlockedCovariance(MergeableSummaryTests):
    """More rows than one mapping slice, so a block is mapped in several slices."""

    has_identity = False
    W, b = rff_operator(9, "rbf", 0.4, 3, 16)

    def make_summary(self):
        return BlockedCovariance(transform=RFFRows())

    def operands(self):
        return (self.W, self.b)

    def make_data(self, rng):
        return rng.normal(size=(MAP_ROWS + 150, 3))

    def test_matches_numpy(self):
        X = self._data()
        Z = np.asarray(rff_map(X, self.W, self.b, 0), dtype=np.float64)
        st = self.make_summary().chunk(X, 0, self.W, self.b)
        np.testing.assert_allclose(st["ztz"], Z.T @ Z, rtol=1e-10)
        assert st["n"] == X.shape[0]
