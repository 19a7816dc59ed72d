"""Mergeable-summary conformance of the summaries the estimators define
(dot-product sketches, k-space PCA, MEKA, the kernel solver, ridge, sparsified Gram)."""

from __future__ import annotations

import numpy as np

from distsketch.estimators.dot_product_passes import ColumnSum, GaussianStats, MaxRowNorm
from distsketch.estimators.falkon import _FalkonPass
from distsketch.estimators.kspace import KSpaceKernelPCA, _FactorCross, _SketchGram
from distsketch.estimators.meka import _Projection
from distsketch.estimators.polynomial import TensorSketch
from distsketch.estimators.ridge import RidgeSummary
from distsketch.estimators.solver import _CrossProduct
from distsketch.estimators.sparsified import _StripSummary
from distsketch.estimators.streaming_kpca import _MAP_ROWS, _BlockedCovariance, _RFFRows
from distsketch.ops.meka import project_block
from distsketch.ops.rff import rff_map, rff_operator
from distsketch.testing import MergeableSummaryTests, states_allclose

_RNG = np.random.default_rng(7)
_X_FIT = _RNG.normal(size=(40, 4))


# ------------------------------------------------------------------ dot_product

class TestMaxRowNorm(MergeableSummaryTests):
    has_identity = False

    def make_summary(self):
        return MaxRowNorm()

    def make_data(self, rng):
        return rng.normal(size=(90, 5))

    def test_is_the_largest_row_norm(self):
        X = self._data()
        assert self.make_summary().chunk(X, 0) == np.linalg.norm(X, axis=1).max()


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


# ---------------------------------------------------------------------- kspace

class TestSketchGram(MergeableSummaryTests):
    has_identity = False
    S = TensorSketch(degree=2, n_components=16, random_state=1).fit(_X_FIT)
    T = TensorSketch(degree=2, n_components=8, random_state=2).fit(_X_FIT)

    def make_summary(self):
        return _SketchGram(self.S, self.T)

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
        return _FactorCross(self.model)

    def make_data(self, rng):
        return rng.normal(size=(64, 4))

    def test_shape(self):
        assert self.make_summary().chunk(self._data(), 0).shape == (3, 6)


# ------------------------------------------------------------------------ MEKA

class TestMEKAProjection(MergeableSummaryTests):
    """Rows ``[3 basis coordinates | cluster label | 2 columns of V]``, two clusters."""

    has_identity = False
    offsets, ranks = np.array([0, 3]), np.array([3, 2])

    def make_summary(self):
        return _Projection(3, self.offsets, self.ranks)

    def make_data(self, rng):
        coords = rng.normal(size=(80, 3))
        labels = rng.integers(0, 2, size=(80, 1)).astype(np.float64)
        return np.hstack([coords, labels, rng.normal(size=(80, 2))])

    def test_matches_ops(self):
        D = self._data()
        np.testing.assert_allclose(self.make_summary().chunk(D, 0),
                                   project_block(D[:, :4], D[:, 4:], self.offsets, self.ranks))


# ------------------------------------------------------------ streaming kernel PCA

class TestBlockedCovariance(MergeableSummaryTests):
    """More rows than one mapping slice, so a block is mapped in several slices."""

    has_identity = False
    W, b = rff_operator(9, "rbf", 0.4, 3, 16)

    def make_summary(self):
        return _BlockedCovariance(transform=_RFFRows())

    def operands(self):
        return (self.W, self.b)

    def make_data(self, rng):
        return rng.normal(size=(_MAP_ROWS + 150, 3))

    def test_matches_numpy(self):
        X = self._data()
        Z = np.asarray(rff_map(X, self.W, self.b, 0), dtype=np.float64)
        st = self.make_summary().chunk(X, 0, self.W, self.b)
        np.testing.assert_allclose(st["ztz"], Z.T @ Z, rtol=1e-10)
        assert st["n"] == X.shape[0]


# ---------------------------------------------------------------------- solver

class TestCrossProduct(MergeableSummaryTests):
    has_identity = False

    def make_summary(self):
        return _CrossProduct(2)

    def make_data(self, rng):
        return rng.normal(size=(60, 5))

    def test_matches_numpy(self):
        X = self._data()
        np.testing.assert_allclose(self.make_summary().chunk(X, 0)["atb"], X[:, :3].T @ X[:, 3:],
                                   rtol=1e-12)


# ---------------------------------------------------------------------- falkon

def _rbf(A, B, gamma):
    return np.exp(-gamma * ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))


class TestFalkonPass(MergeableSummaryTests):
    """One CG pass: ``K_bMᵀ (K_bM V)`` with the centres and V as operands."""

    has_identity = False
    C = np.random.default_rng(11).normal(size=(7, 4))
    V = np.random.default_rng(12).normal(size=(7, 2))

    def make_summary(self):
        # tiles of 16 rows: a 70-row block is several tiles
        return _FalkonPass("rbf", {"gamma": 0.3}, 16)

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
        return _FalkonPass("rbf", {"gamma": 0.3}, 16, n_y=1)

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


# ----------------------------------------------------------------------- ridge

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


# ------------------------------------------------------------------ sparsified

def _sorted_coo(state):
    order = np.lexsort((state["cols"], state["rows"]))
    return {k: state[k][order] for k in ("rows", "cols", "vals")}


class TestStripSummary(MergeableSummaryTests):
    """The strip is rows 40..60; the reduced blocks are the rows 0..60 (the lower triangle)."""

    has_identity = False
    r0 = 40

    def make_summary(self):
        return _StripSummary("rbf", {"gamma": 0.3}, 11, 0.5, False, None, self.r0, 60)

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
