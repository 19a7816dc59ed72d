"""Conformance of the exact covariance summary (ZᵀZ, Zᵀy) to the mergeable-summary tests."""

from __future__ import annotations

import numpy as np

from distsketch.ops.rff import rff_map, rff_operator
from distsketch.summaries import Covariance
from distsketch.testing import MergeableSummaryTests


def _rff(block, offset, W, b):
    return rff_map(block, W, b, offset)


class TestCovariancePlain(MergeableSummaryTests):
    has_identity = False

    def make_summary(self):
        return Covariance()

    def make_data(self, rng):
        return rng.normal(size=(97, 6))

    def test_matches_numpy(self):
        X = self._data()
        st = self.make_summary().chunk(X, 0)
        np.testing.assert_allclose(st["ztz"], X.T @ X, rtol=1e-12)
        np.testing.assert_allclose(st["sum"], X.sum(axis=0), rtol=1e-12)
        assert st["n"] == X.shape[0]


class TestCovarianceRFFWithTargets(MergeableSummaryTests):
    """RFF features as the transform, two target columns at the end of each block."""

    has_identity = False
    W, b = rff_operator(3, "rbf", 0.3, 4, 32)

    def make_summary(self):
        return Covariance(transform=_rff, n_targets=2)

    def operands(self):
        return (self.W, self.b)

    def make_data(self, rng):
        X = rng.normal(size=(83, 4))
        y = np.stack([X[:, 0] - X[:, 1], np.sin(X[:, 2])], axis=1)
        return np.hstack([X, y])

    def test_matches_numpy(self):
        D = self._data()
        X, y = D[:, :4], D[:, 4:]
        Z = rff_map(X, self.W, self.b, 0)
        st = self.make_summary().chunk(D, 0, self.W, self.b)
        np.testing.assert_allclose(st["ztz"], Z.T @ Z, rtol=1e-12)
        np.testing.assert_allclose(st["zty"], Z.T @ y, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(st["yty"], y.T @ y, rtol=1e-12)
