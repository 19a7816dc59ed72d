"""Mergeable-summary conformance of the kernel ridge summary (:mod:`distsketch.summaries.ridge`)."""

from __future__ import annotations

import numpy as np

from distsketch.ops.rff import rff_map, rff_operator
from distsketch.summaries.ridge import RidgeSummary
from distsketch.testing import MergeableSummaryTests


def _rff(block, offset, W, b):
    return rff_map(block, W, b, offset)


class TestRidgeSummary(MergeableSummaryTests):
    """One RFF map; the block holds 3 input columns and 1 target column."""

    has_identity = False
    W, b = rff_operator(5, "rbf", 0.5, 3, 16)
    n_folds = 0

    def make_summary(self):
        return RidgeSummary([_rff], [2], 3, 1, "<f8", n_folds=self.n_folds, seed=4)

    def operands(self):
        return (self.W, self.b)

    def make_data(self, rng):
        X = rng.normal(size=(90, 3))
        return np.hstack([X, np.sin(X[:, :1])])

    def test_matches_numpy(self):
        D = self._data()
        Z = rff_map(D[:, :3], self.W, self.b, 0)
        st = RidgeSummary([_rff], [2], 3, 1, "<f8").chunk(D, 0, self.W, self.b)["maps"][0]
        np.testing.assert_allclose(st["ztz"], Z.T @ Z, rtol=1e-10)
        np.testing.assert_allclose(st["zty"], Z.T @ D[:, 3:], rtol=1e-10)


class TestRidgeSummaryFolds(TestRidgeSummary):
    """Cross-validation folds chosen by hash(seed, global row): still chunking-independent."""

    n_folds = 3
