"""Tests of SketchedKernelRidge, its classifier and the statistical-dimension sketch."""

from typing import ClassVar

import dask.array as da
import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_diabetes, load_digits
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import Ridge, RidgeClassifier
from sklearn.preprocessing import LabelBinarizer

from distsketch import (
    ConfigError,
    InputError,
    NotFittedError,
    RandomFourierFeatures,
    SketchedKernelRidge,
    SketchedKernelRidgeClassifier,
    load,
)
from distsketch.estimators.base import RowMapTransformer
from distsketch.estimators.ridge.regressor import RidgeSummary
from distsketch.estimators.ridge.statistical_dimension import StatisticalDimensionSketch
from distsketch.ops.kernels import pairwise_kernel
from distsketch.ops.random import hash_bucket
from distsketch.ops.sketch_solve import statistical_dimension
from distsketch.summaries.covariance import covariance_state
from distsketch.summaries.ridge import unpack_gram


class ExplicitPoly2(RowMapTransformer):
    """Exact features of (x·y + c)²: [c, √(2c) x, vec(x xᵀ)] (or x itself for degree=1)."""

    _parameter_constraints: ClassVar[dict] = {}

    def __init__(self, *, degree: int = 2, coef0: float = 1.0):
        self.degree = degree
        self.coef0 = coef0

    def fit(self, X, y=None):
        X = self._check_input(X, reset=True)
        d = X.shape[1]
        self.n_output_features_ = d if self.degree == 1 else 1 + d + d * d
        return self

    def _operands(self):
        return (np.array([self.coef0, self.degree], dtype=np.float64),)

    @staticmethod
    def _map_block(block, offset, params):
        X = np.asarray(block, dtype=np.float64)
        c, deg = params
        if deg == 1:
            return X
        outer = np.einsum("ni,nj->nij", X, X).reshape(X.shape[0], -1)
        return np.hstack([np.full((X.shape[0], 1), np.sqrt(c) * np.sqrt(c)),
                          np.sqrt(2 * c) * X, outer])


def _data(n=60, d=3, t=None, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * rng.normal(size=n)
    if t:
        y = np.column_stack([y] + [np.cos(X[:, k % d]) for k in range(1, t)])
    return X, y


# ----------------------------------------------------------------------------- exact

def test_exact_features_equal_direct_kernel_solve():
    X, y = _data(40)
    Xt = np.random.default_rng(9).normal(size=(7, 3))
    lam = 0.3
    model = SketchedKernelRidge(standardize=False,
                                features=ExplicitPoly2(), alpha=lam, fit_intercept=False).fit(X, y)
    K = pairwise_kernel(X, kernel="polynomial", gamma=1.0, coef0=1.0, degree=2)
    dual = sla.solve(K + lam * np.eye(40), y, assume_a="pos")
    Kt = pairwise_kernel(Xt, X, kernel="polynomial", gamma=1.0, coef0=1.0, degree=2)
    np.testing.assert_allclose(model.predict(Xt), Kt @ dual, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(model.predict(X), K @ dual, rtol=1e-7, atol=1e-9)


def test_nystrom_with_every_point_as_landmark_is_exact_kernel_ridge():
    from distsketch import NystromFeatures

    X, y = _data(60)
    lam = 0.1
    model = SketchedKernelRidge(standardize=False, features=NystromFeatures(gamma=0.5, n_landmarks=60,
                                                         random_state=0),
                                alpha=lam, fit_intercept=False).fit(X, y)
    K = pairwise_kernel(X, X, kernel="rbf", gamma=0.5)
    dual = sla.solve(K + lam * np.eye(60), y, assume_a="pos")
    Xt = np.random.default_rng(2).normal(size=(9, 3))
    Kt = pairwise_kernel(Xt, X, kernel="rbf", gamma=0.5)
    np.testing.assert_allclose(model.predict(Xt), Kt @ dual, rtol=1e-6,
                               atol=1e-8 * np.abs(dual).max())


def test_intercept_matches_sklearn_ridge_on_the_same_features():
    X, y = _data(50, t=2)
    Z = ExplicitPoly2().fit(X).transform(X)
    ref = Ridge(alpha=0.7, fit_intercept=True, solver="cholesky").fit(Z, y)
    model = SketchedKernelRidge(standardize=False, features=ExplicitPoly2(), alpha=0.7).fit(X, y)
    np.testing.assert_allclose(model.coef_, ref.coef_, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(model.intercept_, ref.intercept_, rtol=1e-6, atol=1e-9)
    assert model.predict(X).shape == (50, 2)
    assert model.score(X, y) == pytest.approx(ref.score(Z, y), rel=1e-9)


def test_lambda_path_equals_separate_fits():
    X, y = _data(80, t=2)
    alphas = [1e-3, 0.1, 3.0]
    feats = RandomFourierFeatures(gamma=0.3, n_components=64, random_state=1)
    path = SketchedKernelRidge(features=feats, alpha=alphas).fit(X, y)
    assert path.coef_.shape == (3, 2, 64)
    P = path.predict(X)
    assert P.shape == (80, 3, 2)
    for k, lam in enumerate(alphas):
        single = SketchedKernelRidge(features=feats, alpha=lam).fit(X, y)
        np.testing.assert_allclose(path.coef_[k], single.coef_, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(P[:, k], single.predict(X), rtol=1e-8, atol=1e-10)
        assert path.score(X, y)[k] == pytest.approx(single.score(X, y), rel=1e-9)


def test_multi_output_equals_separate_single_output_fits():
    X, y = _data(70, t=3)
    feats = RandomFourierFeatures(gamma=0.5, n_components=40, random_state=3)
    multi = SketchedKernelRidge(features=feats, alpha=0.1).fit(X, y)
    for j in range(3):
        one = SketchedKernelRidge(features=feats, alpha=0.1).fit(X, y[:, j])
        np.testing.assert_allclose(multi.coef_[j], one.coef_, rtol=1e-9, atol=1e-12)
        assert multi.intercept_[j] == pytest.approx(one.intercept_, rel=1e-9, abs=1e-12)


@settings(max_examples=8, deadline=None)
@given(chunk=st.integers(min_value=7, max_value=120))
def test_any_chunking_gives_the_single_block_model(chunk):
    X, y = _data(120)
    feats = RandomFourierFeatures(gamma=0.4, n_components=32, random_state=5)
    ref = SketchedKernelRidge(features=feats, alpha=0.05).fit(X, y)
    Xd = da.from_array(X, chunks=(chunk, 3))
    yd = da.from_array(y, chunks=chunk)
    model = SketchedKernelRidge(features=feats, alpha=0.05, split_every=3).fit(Xd, yd)
    # summaries are sums in a different order: equal to rounding
    np.testing.assert_allclose(model.coef_, ref.coef_, rtol=1e-8, atol=1e-10)
    out = ref.predict(Xd)
    assert isinstance(out, da.Array)
    # prediction rows do not depend on blocking at all
    assert np.array_equal(out.compute(), ref.predict(X))


def test_partial_fit_merges_to_the_full_fit():
    X, y = _data(90, t=2)
    feats = RandomFourierFeatures(gamma=0.4, n_components=30, random_state=2)
    full = SketchedKernelRidge(standardize=False, features=feats, alpha=0.2).fit(X, y)
    inc = SketchedKernelRidge(standardize=False, features=feats, alpha=0.2)
    for lo, hi in [(0, 31), (31, 32), (32, 90)]:
        inc.partial_fit(X[lo:hi], y[lo:hi])
    assert inc.n_samples_seen_ == 90
    np.testing.assert_allclose(inc.coef_, full.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(inc.intercept_, full.intercept_, rtol=1e-8, atol=1e-10)


def test_cv_fold_summaries_equal_summaries_of_fold_rows():
    X, y = _data(100, t=2)
    feats = RandomFourierFeatures(gamma=0.4, n_components=16, random_state=0).fit(X)
    fn, ops = feats._map_block, feats._operands()
    summ = RidgeSummary([fn], [len(ops)], 3, 2, "<f8", n_folds=4, seed=11)
    XY = np.hstack([X, y])
    states = [summ.chunk(XY[lo:hi], lo, *ops) for lo, hi in [(0, 13), (13, 60), (60, 100)]]
    # fold states carry ZᵀZ packed (upper triangle): restored as the fit restores them
    merged = [unpack_gram(s) for s in summ.merge(states)["maps"][0]]
    fold = hash_bucket(11, "cv.fold", np.arange(100), 4)
    Z = feats.transform(X)
    assert sum(s["n"] for s in merged) == 100
    for f in range(4):
        ref = covariance_state(Z[fold == f], y[fold == f])
        for key, val in ref.items():
            np.testing.assert_allclose(merged[f][key], val, rtol=1e-10, atol=1e-12)


def test_cv_errors_equal_refits_on_training_folds():
    X, y = _data(120)
    feats = RandomFourierFeatures(gamma=0.4, n_components=24, random_state=4)
    alphas = [1e-3, 0.1, 10.0]
    model = SketchedKernelRidge(standardize=False,
                                features=feats, cv=3, alphas=alphas, random_state=8).fit(X, y)
    fold = hash_bucket(model.seed_, "cv.fold", np.arange(120), 3)
    Z = feats.fit(X).transform(X)
    mse = np.zeros(3)
    for f in range(3):
        tr, te = fold != f, fold == f
        for k, lam in enumerate(alphas):
            r = Ridge(alpha=lam, solver="cholesky").fit(Z[tr], y[tr])
            mse[k] += ((r.predict(Z[te]) - y[te]) ** 2).sum()
    np.testing.assert_allclose(np.asarray(model.cv_results_["mse"])[0], mse / 120, rtol=1e-6)
    assert model.alpha_ == alphas[int(np.argmin(mse))]
    np.testing.assert_allclose(
        model.coef_, SketchedKernelRidge(standardize=False,
                                         features=feats, alpha=model.alpha_).fit(X, y).coef_,
        rtol=1e-8, atol=1e-10)


def test_cv_over_gammas_picks_a_sensible_scale():
    X, y = _data(300, seed=1)
    model = SketchedKernelRidge(
        features=RandomFourierFeatures(n_components=100, random_state=0), cv=4,
        alphas=[1e-3, 1e-1], gammas=[1e-4, 0.3], random_state=0).fit(X, y)
    # γ = 1e-4 makes the kernel nearly constant: it cannot fit sin/quadratic structure
    assert model.gamma_ == 0.3
    assert model.features_.gamma == 0.3
    mse = np.asarray(model.cv_results_["mse"])
    assert mse.shape == (2, 2) and mse[1].min() < 0.5 * mse[0].min()


def test_classifier_matches_sklearn_ridge_classifier_on_linear_features():
    X, yc = load_digits(return_X_y=True)
    X = X[:300] / 16.0
    yc = yc[:300]
    ref = RidgeClassifier(alpha=1.0).fit(X, yc)
    clf = SketchedKernelRidgeClassifier(standardize=False,
                                        features=ExplicitPoly2(degree=1), alpha=1.0).fit(X, yc)
    np.testing.assert_allclose(clf.coef_, ref.coef_, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(clf.decision_function(X), ref.decision_function(X), atol=1e-7)
    assert np.array_equal(clf.predict(X), ref.predict(X))
    # two classes: one ±1 column, labels kept
    two = yc < 5
    lab = np.where(two, "low", "high")
    ref2 = RidgeClassifier(alpha=1.0).fit(X, lab)
    clf2 = SketchedKernelRidgeClassifier(standardize=False,
                                         features=ExplicitPoly2(degree=1), alpha=1.0).fit(X, lab)
    assert clf2.coef_.shape == (64,)
    np.testing.assert_allclose(clf2.decision_function(X), ref2.decision_function(X), atol=1e-7)
    assert np.array_equal(clf2.predict(da.from_array(X, chunks=(77, 64))).compute(),
                          ref2.predict(X))


def test_classifier_partial_fit_and_errors():
    X, yc = load_digits(return_X_y=True)
    X = X[:200] / 16.0
    yc = yc[:200]
    feats = RandomFourierFeatures(gamma=0.05, n_components=64, random_state=0)
    full = SketchedKernelRidgeClassifier(standardize=False, features=feats, alpha=0.1).fit(X, yc)
    inc = SketchedKernelRidgeClassifier(standardize=False, features=feats, alpha=0.1)
    with pytest.raises(ConfigError, match="classes"):
        inc.partial_fit(X[:50], yc[:50])
    inc.partial_fit(X[:50], yc[:50], classes=np.arange(10))
    inc.partial_fit(X[50:], yc[50:])
    np.testing.assert_allclose(inc.coef_, full.coef_, rtol=1e-8, atol=1e-10)
    with pytest.raises(InputError, match="not one of classes"):
        inc.partial_fit(X[:5], np.array([0, 1, 2, 3, 42]))


# ----------------------------------------------------------------------------- statistical

def _split(n, n_train, seed=0):
    idx = np.random.default_rng(seed).permutation(n)
    return idx[:n_train], idx[n_train:]


def test_diabetes_rmse_close_to_exact_kernel_ridge():
    X, y = load_diabetes(return_X_y=True)
    tr, te = _split(len(y), 350)
    ym = y[tr].mean()
    gamma, lam = 5.0, 0.1
    exact = KernelRidge(kernel="rbf", gamma=gamma, alpha=lam).fit(X[tr], y[tr] - ym)
    rmse0 = np.sqrt(np.mean((exact.predict(X[te]) + ym - y[te]) ** 2))
    model = SketchedKernelRidge(standardize=False,
                                features=RandomFourierFeatures(gamma=gamma, n_components=1000,
                                                               random_state=0),
                                alpha=lam, fit_intercept=False).fit(X[tr], y[tr] - ym)
    rmse1 = np.sqrt(np.mean((model.predict(X[te]) + ym - y[te]) ** 2))
    # m = 1000 random features: kernel error ~ 1/sqrt(m) ≈ 3%; allow 3% on the test RMSE
    assert rmse1 <= 1.03 * rmse0
    # and the intercept version does as well
    model2 = SketchedKernelRidge(standardize=False, features=model.features_, alpha=lam).fit(X[tr], y[tr])
    assert np.sqrt(np.mean((model2.predict(X[te]) - y[te]) ** 2)) <= 1.03 * rmse0


def test_digits_accuracy_close_to_exact_kernel_ridge():
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    tr, te = _split(len(y), 1200)
    gamma, lam = 0.02, 1e-2
    lb = LabelBinarizer(neg_label=-1)
    exact = KernelRidge(kernel="rbf", gamma=gamma, alpha=lam).fit(X[tr], lb.fit_transform(y[tr]))
    acc0 = np.mean(lb.classes_[exact.predict(X[te]).argmax(axis=1)] == y[te])
    clf = SketchedKernelRidgeClassifier(standardize=False,
        features=RandomFourierFeatures(gamma=gamma, n_components=800, random_state=0),
        alpha=lam, fit_intercept=False).fit(X[tr], y[tr])
    # margin: two percentage points of accuracy (about 12 of 597 test digits)
    assert clf.score(X[te], y[te]) >= acc0 - 0.02
    assert acc0 > 0.95


def test_statistical_dimension_sketch_tracks_s_lambda():
    X, _ = _data(1000, seed=3)
    base = RandomFourierFeatures(gamma=0.5, n_components=256, random_state=0)
    Z = base.fit(X).transform(X)
    for lam in (1.0, 30.0):
        sk = StatisticalDimensionSketch(base=base, alpha=lam, n_sample=400, random_state=0).fit(X)
        exact = statistical_dimension(np.linalg.eigvalsh(Z.T @ Z), lam)
        # a third of the rows: eigenvalue estimates within ~ sqrt(m/n_s); s_λ within 20%
        assert abs(sk.statistical_dimension_ - exact) <= 0.2 * exact
        assert sk.n_output_features_ <= 256
        assert sk.transform(X[:5]).shape == (5, sk.n_output_features_)
    small = StatisticalDimensionSketch(base=base, alpha=30.0, random_state=0).fit(X)
    big = StatisticalDimensionSketch(base=base, alpha=0.01, random_state=0).fit(X)
    assert small.n_output_features_ < big.n_output_features_


def test_composed_sketch_ridge_close_to_base_ridge():
    X, y = _data(1000, seed=4)
    Xt, yt = _data(500, seed=5)
    lam = 10.0
    base = RandomFourierFeatures(gamma=0.5, n_components=512, random_state=0)
    ref = SketchedKernelRidge(features=base, alpha=lam).fit(X, y)
    comp = StatisticalDimensionSketch(base=base, alpha=lam, random_state=1)
    model = SketchedKernelRidge(features=comp, alpha=lam).fit(X, y)
    assert model.features_.n_output_features_ < 512 / 2

    def objective(m):
        return np.sum((m.predict(X) - y) ** 2) + lam * np.sum(m.coef_ ** 2)

    # Theorem E.2: the composed problem's optimum is within (1 + ε) of the base optimum
    ratio = objective(model) / objective(ref)
    assert 0.8 <= ratio <= 1.2
    assert model.score(Xt, yt) >= ref.score(Xt, yt) - 0.03


# ----------------------------------------------------------------------------- errors, io

def test_bad_inputs_name_what_and_where():
    X, y = _data(30)
    with pytest.raises(InputError, match="y has 29 rows but X has 30"):
        SketchedKernelRidge().fit(X, y[:29])
    bad = y.copy()
    bad[7] = np.nan
    with pytest.raises(InputError, match="row 7"):
        SketchedKernelRidge().fit(X, bad)
    with pytest.raises(InputError, match="NaN"):
        SketchedKernelRidge().fit(da.from_array(X, chunks=10), da.from_array(bad, chunks=10))
    for alpha in (0.0, -1.0, [0.1, 0.0]):
        with pytest.raises(ConfigError, match="alpha"):
            SketchedKernelRidge(alpha=alpha).fit(X, y)
    with pytest.raises(ConfigError, match="gammas"):
        SketchedKernelRidge(gammas=[1.0]).fit(X, y)
    with pytest.raises(NotFittedError):
        SketchedKernelRidge().predict(X)
    model = SketchedKernelRidge(random_state=0).fit(X, y)
    with pytest.raises(InputError, match="features"):
        model.predict(X[:, :2])


def test_save_and_load_round_trip(tmp_path):
    X, y = _data(50, t=2)
    model = SketchedKernelRidge(features=RandomFourierFeatures(gamma=0.3, n_components=20,
                                                               random_state=0),
                                cv=3, alphas=[0.01, 1.0], random_state=0).fit(X, y)
    model.save(tmp_path / "krr")
    again = load(tmp_path / "krr")
    assert np.array_equal(again.predict(X), model.predict(X))
    again.partial_fit(X, y)
    assert again.n_samples_seen_ == 100


def test_cv_fold_of_a_row_is_independent_of_its_block():
    from distsketch.summaries.ridge import cv_folds

    whole = cv_folds(7, 0, 500, 4)
    parts = np.concatenate([cv_folds(7, a, b - a, 4) for a, b in [(0, 30), (30, 301), (301, 500)]])
    np.testing.assert_array_equal(parts, whole)
    assert set(np.unique(whole)) == {0, 1, 2, 3}
    assert not np.array_equal(cv_folds(8, 0, 500, 4), whole)  # the seed picks the folds
