"""Mergeable-summary conformance of k-Space's two passes (:mod:`distsketch.summaries.kspace`)."""

from __future__ import annotations

import numpy as np

from distsketch.estimators.decomposition.kspace import KSpaceKernelPCA
from distsketch.estimators.features.polynomial import TensorSketch
from distsketch.summaries.kspace import FactorCross, SketchGram
from distsketch.testing import MergeableSummaryTests

_RNG = np.random.default_rng(7)
_X_FIT = _RNG.normal(size=(40, 4))


class TestSketchGram(MergeableSummaryTests):
    has_identity = False
    S = TensorSketch(degree=2, n_components=16, random_state=1).fit(_X_FIT)
    T = TensorSketch(degree=2, n_components=8, random_state=2).fit(_X_FIT)

    def make_summary(self):
        return SketchGram(self.S._map_block, self.T._map_block)

    def make_data(self, rng):
        return rng.normal(size=(70, 4))

    def test_matches_numpy(self):
        X = self._data()
        Zs, Zt = np.asarray(self.S.transform(X), np.float64), np.asarray(self.T.transform(X),
                                                                          np.float64)
        st = self.make_summary().chunk(X, 0)
        np.testing.assert_allclose(st["ss"], Zs.T @ Zs, rtol=1e-10)
        np.testing.assert_allclose(st["st"], Zs.T @ Zt, rtol=1e-10)


class TestFactorCross(MergeableSummaryTests):
    has_identity = False
    model = KSpaceKernelPCA(n_components=3, degree=2, n_landmarks=6, random_state=0).fit(_X_FIT)

    def make_summary(self):
        return FactorCross(self.model._embed_block, self.model._kernel, self.model.landmarks_)

    def make_data(self, rng):
        return rng.normal(size=(64, 4))

    def test_shape(self):
        assert self.make_summary().chunk(self._data(), 0).shape == (3, 6)
