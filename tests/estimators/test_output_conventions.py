"""scikit-learn output conventions beyond check_estimator: feature names in and out,
set_output (lazy on dask input), classifier probabilities and accuracy-scored CV, and
parameters checked against the data shape before fitting."""

import dask.array as da
import numpy as np
import pandas as pd
import pytest
from scipy.special import expit, softmax
from sklearn.linear_model import Ridge

import distsketch as ds
from distsketch import registry
from distsketch.errors import ConfigError, InputError
from distsketch.ops.random import hash_bucket
from distsketch.testing import raise_on_compute

RNG = np.random.default_rng(1)
X = RNG.normal(size=(90, 4))
DF = pd.DataFrame(X, columns=["w", "x", "y", "z"])
Y3 = np.digitize(X[:, 0] + 0.5 * X[:, 1], [-0.5, 0.5])      # three classes
Y2 = np.where(X[:, 0] * X[:, 1] > 0, "pos", "neg")

TRANSFORMERS = {
    "RandomFourierFeatures": dict(n_components=6),
    "StreamingKernelPCA": dict(n_components=2, n_random_features=16, sketch_size=4),
    "CountSketch": dict(n_components=6),
    "TensorSketch": dict(n_components=6),
    "SRHT": dict(n_components=3),
    "TensorSRHT": dict(n_components=6),
    "PolySketch": dict(n_components=6),
    "GaussianSketch": dict(gamma=0.01, n_components=16),
    "DotProductKernelSketch": dict(kernel="arccos1", n_components=16, check_variance=False),
    "KSpaceKernelPCA": dict(n_components=3),
    "NystromFeatures": dict(n_landmarks=5),
    "NystromKernelPCA": dict(n_components=3, n_landmarks=10),
    "MEKA": dict(n_clusters=2, rank=2),
    "SparsifiedKernelPCA": dict(n_components=2, p=0.5),
    "RoundedExpansion": dict(budget=10),
    "DatabaseFriendlyProjection": dict(n_components=3),
}


def test_every_transformer_is_listed():
    names = {n for n in registry.ESTIMATORS if hasattr(registry.resolve(n), "transform")}
    assert names == set(TRANSFORMERS)


def _fitted(name, data):
    est = registry.resolve(name)(random_state=0, **TRANSFORMERS[name])
    if name == "RoundedExpansion":      # support points and their coefficients
        return est.fit(data, X[:, 0])
    return est.fit(data)


@pytest.mark.parametrize("name", sorted(TRANSFORMERS))
def test_feature_names_and_pandas_output(name):
    est = _fitted(name, DF)
    np.testing.assert_array_equal(est.feature_names_in_, DF.columns)
    ref = np.asarray(est.transform(DF))
    width = 1 if ref.ndim == 1 else ref.shape[1]
    names = est.get_feature_names_out()
    assert list(names) == [f"{name.lower()}{i}" for i in range(width)]
    est.set_output(transform="pandas")
    out = est.transform(DF)
    assert isinstance(out, pd.DataFrame) and list(out.columns) == list(names)
    np.testing.assert_array_equal(out.to_numpy(), ref.reshape(len(X), width))
    with pytest.raises(ValueError, match="input_features is not equal to feature_names_in_"):
        est.get_feature_names_out(["a", "b", "c", "d"])
    # fitted on NumPy: no names recorded, and the output names are the same
    plain = _fitted(name, X)
    assert not hasattr(plain, "feature_names_in_")
    assert list(plain.get_feature_names_out()) == list(names)


@pytest.mark.parametrize("name", ["RandomFourierFeatures", "StreamingKernelPCA", "NystromKernelPCA"])
def test_pandas_output_on_dask_input_stays_lazy(name):
    est = _fitted(name, X).set_output(transform="pandas")
    Xd = da.from_array(X, chunks=(30, 4))
    try:
        import dask.dataframe as dd
    except ImportError:
        # no dask DataFrame here: refused with the fix, never computed into pandas
        with raise_on_compute(), pytest.raises(ConfigError, match="lazy dask DataFrame"):
            est.transform(Xd)
        return
    with raise_on_compute():
        out = est.transform(Xd)
    assert isinstance(out, dd.DataFrame)
    assert list(out.columns) == list(est.get_feature_names_out())
    ref = est.set_output(transform="default").transform(X)
    np.testing.assert_array_equal(est.set_output(transform="pandas").transform(Xd)
                                  .compute().to_numpy(), ref)


# --------------------------------------------------------------------------- classifiers

def _ridge_clf(**kw):
    return ds.SketchedKernelRidgeClassifier(
        features=ds.RandomFourierFeatures(gamma=0.3, n_components=64), alpha=0.1,
        random_state=0, **kw)


@pytest.mark.parametrize("y", [Y2, Y3], ids=["binary", "multiclass"])
def test_predict_proba_is_the_softmax_of_the_scores(y):
    for clf in (_ridge_clf().fit(X, y),
                ds.KernelPCRClassifier(n_components=6, degree=2, random_state=0).fit(X, y)):
        # the ridge classifier's softmax is of its scores times the fitted inverse temperature
        D = np.asarray(clf.decision_function(X)) * getattr(clf, "proba_scale_", 1.0)
        P = np.asarray(clf.predict_proba(X))
        assert P.shape == (len(X), clf.classes_.size)
        np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)
        if clf.classes_.size == 2:
            assert D.ndim == 1
            np.testing.assert_allclose(P[:, 1], expit(2 * D), rtol=1e-12)
        else:
            np.testing.assert_allclose(P, softmax(D, axis=1), rtol=1e-12)
        np.testing.assert_array_equal(clf.classes_[P.argmax(axis=1)], clf.predict(X))
        lazy = clf.predict_proba(da.from_array(X, chunks=(30, 4)))
        assert isinstance(lazy, da.Array)
        np.testing.assert_allclose(lazy.compute(), P, rtol=1e-12)


def test_cv_chooses_by_held_out_accuracy():
    k, alphas, gammas, m = 3, [1e-3, 1e-1, 10.0], [0.05, 0.5], 48
    clf = ds.SketchedKernelRidgeClassifier(
        features=ds.RandomFourierFeatures(n_components=m), cv=k, alphas=alphas, gammas=gammas,
        standardize=False, random_state=0).fit(X, Y3)
    acc = np.asarray(clf.cv_results_["accuracy"])
    # reference: scikit-learn's Ridge on the same features and folds, one ±1 column per class
    fold = hash_bucket(clf.seed_, "cv.fold", np.arange(len(X), dtype=np.int64), k)
    T = np.where(Y3[:, None] == clf.classes_[None, :], 1.0, -1.0)
    ref = np.zeros((len(gammas), len(alphas)))
    for g, gamma in enumerate(gammas):
        Z = ds.RandomFourierFeatures(gamma=gamma, n_components=m,
                                     random_state=clf.seed_).fit(X).transform(X)
        for a, alpha in enumerate(alphas):
            for f in range(k):
                tr, te = fold != f, fold == f
                S = Ridge(alpha=alpha).fit(Z[tr], T[tr]).predict(Z[te])
                ref[g, a] += np.sum(clf.classes_[S.argmax(axis=1)] == Y3[te])
    np.testing.assert_allclose(acc, ref / len(X), rtol=0, atol=1e-12)
    g_best, a_best = gammas.index(clf.gamma_), alphas.index(clf.alpha_)
    assert acc[g_best, a_best] == acc.max()
    assert acc.shape == np.asarray(clf.cv_results_["mse"]).shape


# --------------------------------------------------------------------------- shape checks

@pytest.mark.parametrize("est, error, match", [
    (ds.NystromKernelPCA(n_components=20, n_landmarks=10), ConfigError, "n_landmarks=10"),
    (ds.NystromKernelPCA(n_components=8, n_landmarks=10), InputError, "n_samples=5"),
    (ds.MEKA(n_clusters=8), InputError, "n_samples=5"),
    (ds.BlockKernelApproximation(n_clusters=8), InputError, "n_samples=5"),
    (ds.SparsifiedKernelPCA(n_components=5), ConfigError, "n_samples=5"),
    (ds.KSpaceKernelPCA(n_components=6, degree=1), InputError, "exceeds the 5 rows"),
    (ds.KernelPCR(n_components=4, degree=1, coef0=0.0), InputError, "dimension 3"),
])
def test_parameters_checked_against_the_shape_before_any_pass(est, error, match):
    A = RNG.normal(size=(5, 3))
    with raise_on_compute(), pytest.raises(error, match=match):
        est._check_params_for_shape(*A.shape)
    with pytest.raises(error, match=match):
        est.fit(A, A[:, 0]) if hasattr(est, "predict") and not isinstance(
            est, ds.BlockKernelApproximation) else est.fit(A)
