"""Mergeable-summary conformance of the sparsified Gram's strip summary
(:mod:`distsketch.summaries.sparsified`)."""

from __future__ import annotations

import numpy as np

from distsketch.summaries.sparsified import StripSummary
from distsketch.testing import MergeableSummaryTests, states_allclose


def _sorted_coo(state):
    order = np.lexsort((state["cols"], state["rows"]))
    return {k: state[k][order] for k in ("rows", "cols", "vals")}


class TestStripSummary(MergeableSummaryTests):
    """The strip is rows 40..60; the reduced blocks are the rows 0..60 (the lower triangle)."""

    has_identity = False
    r0 = 40

    def make_summary(self):
        return StripSummary("rbf", {"gamma": 0.3}, 11, 0.5, False, None, self.r0, 60)

    def operands(self):
        return (self._data()[self.r0:],)

    def make_data(self, rng):
        return rng.normal(size=(60, 3))

    def assert_states_close(self, actual, expected, X):
        # merge concatenates kept entries: the set of entries, not their order, is the state
        states_allclose(_sorted_coo(actual), _sorted_coo(expected), self.rtol, self.atol)

    def test_keeps_lower_triangle_entries_of_the_strip(self):
        X = self._data()
        st = self.make_summary().chunk(X, 0, X[self.r0:])
        assert len(st["vals"]) > 0
        # rows are local to the strip, columns global: on or below the diagonal
        assert np.all((st["rows"] >= 0) & (st["rows"] < 60 - self.r0))
        assert np.all(st["cols"] <= st["rows"] + self.r0)
