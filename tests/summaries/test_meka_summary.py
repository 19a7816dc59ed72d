"""Mergeable-summary conformance of MEKA's projection pass (:mod:`distsketch.summaries.meka`)."""

from __future__ import annotations

import numpy as np

from distsketch.ops.meka import project_block
from distsketch.summaries.meka import Projection
from distsketch.testing import MergeableSummaryTests


class TestMEKAProjection(MergeableSummaryTests):
    """Rows ``[3 basis coordinates | cluster label | 2 columns of V]``, two clusters."""

    has_identity = False
    offsets, ranks = np.array([0, 3]), np.array([3, 2])

    def make_summary(self):
        return Projection(3, self.offsets, self.ranks)

    def make_data(self, rng):
        coords = rng.normal(size=(80, 3))
        labels = rng.integers(0, 2, size=(80, 1)).astype(np.float64)
        return np.hstack([coords, labels, rng.normal(size=(80, 2))])

    def test_matches_ops(self):
        D = self._data()
        np.testing.assert_allclose(self.make_summary().chunk(D, 0),
                                   project_block(D[:, :4], D[:, 4:], self.offsets, self.ranks))
