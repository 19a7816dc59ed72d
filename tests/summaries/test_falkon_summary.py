"""Mergeable-summary conformance of Falkon's CG pass (:mod:`distsketch.summaries.falkon`)."""

from __future__ import annotations

import numpy as np

from distsketch.summaries.falkon import FalkonPass
from distsketch.testing import MergeableSummaryTests


def _rbf(A, B, gamma):
    return np.exp(-gamma * ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))


class TestFalkonPass(MergeableSummaryTests):
    """One CG pass: ``K_bMᵀ (K_bM V)`` with the centres and V as operands."""

    has_identity = False
    C = np.random.default_rng(11).normal(size=(7, 4))
    V = np.random.default_rng(12).normal(size=(7, 2))

    def make_summary(self):
        # tiles of 16 rows: a 70-row block is several tiles
        return FalkonPass("rbf", {"gamma": 0.3}, 16)

    def operands(self):
        return (self.C, self.V)

    def make_data(self, rng):
        return rng.normal(size=(70, 4))

    def test_matches_numpy(self):
        X = self._data()
        K = _rbf(X, self.C, 0.3)
        st = self.make_summary().chunk(X, 0, self.C, self.V)
        np.testing.assert_allclose(st["hv"], K.T @ (K @ self.V), rtol=1e-12, atol=1e-12)


class TestFalkonRightHandSide(MergeableSummaryTests):
    """The first pass: ``K_bMᵀ Y`` with the targets in the block's last column."""

    has_identity = False
    C = TestFalkonPass.C

    def make_summary(self):
        return FalkonPass("rbf", {"gamma": 0.3}, 16, n_y=1)

    def operands(self):
        return (self.C,)

    def make_data(self, rng):
        X = rng.normal(size=(70, 4))
        return np.hstack([X, np.sin(X[:, :1])])

    def test_matches_numpy(self):
        XY = self._data()
        K = _rbf(XY[:, :4], self.C, 0.3)
        st = self.make_summary().chunk(XY, 0, self.C)
        np.testing.assert_allclose(st["b"], K.T @ XY[:, 4:], rtol=1e-12, atol=1e-12)
