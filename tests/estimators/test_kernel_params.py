"""One gamma convention for every kernel estimator: None = 1 / n_features, "median" =
the median heuristic on a row sample, the value used stored as gamma_."""

import inspect

import dask.array as da
import numpy as np
import pytest
from scipy.spatial.distance import pdist

import distsketch as ds
from distsketch import registry
from distsketch.errors import ConfigError, InputError
from distsketch.estimators.kernel_params import median_gamma

RNG = np.random.default_rng(0)
X = RNG.normal(size=(120, 5))
Y = X[:, 0] - X[:, 1] ** 2


def _exact_median_gamma(A):
    return 1.0 / np.median(pdist(A, "sqeuclidean"))


def test_median_gamma_is_one_over_the_median_squared_distance():
    np.testing.assert_allclose(median_gamma(X), _exact_median_gamma(X), rtol=1e-12)


def test_median_gamma_samples_rows_independently_of_chunking():
    A = RNG.normal(size=(3000, 4)) * np.array([1.0, 2.0, 0.5, 3.0])
    g = median_gamma(A)
    for chunks in (3000, 700, 128):
        assert median_gamma(da.from_array(A, chunks=(chunks, 4))) == g
    # 1000 sampled rows: the pairs share rows, so the sample median's relative standard
    # error here is 1.8 % (measured over 20 seeds); 5 standard errors
    np.testing.assert_allclose(g, _exact_median_gamma(A), rtol=0.09)


def test_median_gamma_refuses_identical_rows():
    with pytest.raises(InputError, match="identical"):
        median_gamma(np.ones((10, 3)))
    with pytest.raises(InputError, match="identical"):
        ds.RandomFourierFeatures(gamma="median").fit(np.ones((10, 3)))


def _kernel_estimators():
    out = []
    for name in sorted(registry.ESTIMATORS):
        cls = registry.resolve(name)
        if "gamma" in inspect.signature(cls).parameters:
            out.append(cls)
    return out


@pytest.mark.parametrize("cls", _kernel_estimators(), ids=lambda c: c.__name__)
def test_every_gamma_defaults_to_none_and_accepts_median(cls):
    assert inspect.signature(cls).parameters["gamma"].default is None
    table = cls._parameter_constraints["gamma"]
    from distsketch.validation.params import accepts
    assert any(accepts(c, "median") for c in table) and any(accepts(c, None) for c in table)
    assert not any(accepts(c, "mean") for c in table)


_SMALL = {
    "RandomFourierFeatures": dict(n_components=16),
    "StreamingKernelPCA": dict(n_components=2, n_random_features=16, sketch_size=4),
    "TensorSketch": dict(n_components=16),
    "TensorSRHT": dict(n_components=16),
    "PolySketch": dict(n_components=16),
    "GaussianSketch": dict(n_components=64, check_variance=False),
    "KSpaceKernelPCA": dict(n_components=2),
    "KernelPCR": dict(n_components=2),
    "KernelPCRClassifier": dict(n_components=2),
    "NystromFeatures": dict(n_landmarks=10),
    "NystromKernelPCA": dict(n_components=2, n_landmarks=10),
    "MEKA": dict(n_clusters=2, rank=2),
    "BlockKernelApproximation": dict(n_clusters=2),
    "SparsifiedGram": dict(p=0.5),
    "SparsifiedKernelPCA": dict(n_components=2, p=0.5),
    "KernelSolver": dict(),
}


def _fit(cls, gamma):
    est = cls(gamma=gamma, random_state=0, **_SMALL.get(cls.__name__, {}))
    if cls.__name__ == "RoundedExpansion":
        return est.fit(X[:30], Y[:30])
    if cls.__name__ in ("KernelPCRClassifier", "NystromKernelRidgeClassifier"):
        return est.fit(X, Y > 0)
    if hasattr(est, "predict") and cls.__name__ not in ("BlockKernelApproximation",):
        return est.fit(X, Y)
    return est.fit(X)


@pytest.mark.parametrize("cls", _kernel_estimators(), ids=lambda c: c.__name__)
def test_fitted_gamma(cls):
    assert _fit(cls, None).gamma_ == 1.0 / X.shape[1]
    support = X[:30] if cls.__name__ == "RoundedExpansion" else X
    assert _fit(cls, "median").gamma_ == median_gamma(support)
    assert _fit(cls, 0.37).gamma_ == 0.37


@pytest.mark.parametrize("cls", [ds.RandomFourierFeatures, ds.TensorSketch, ds.NystromFeatures,
                                 ds.StreamingKernelPCA, ds.KSpaceKernelPCA],
                         ids=lambda c: c.__name__)
def test_transform_uses_the_fitted_gamma(cls):
    kw = {k: v for k, v in _SMALL[cls.__name__].items()}
    a = cls(gamma="median", random_state=0, **kw).fit(X)
    b = cls(gamma=median_gamma(X), random_state=0, **kw).fit(X)
    np.testing.assert_array_equal(a.transform(X), b.transform(X))
    c = cls(random_state=0, **kw).fit(X)
    d = cls(gamma=1.0 / X.shape[1], random_state=0, **kw).fit(X)
    np.testing.assert_array_equal(c.transform(X), d.transform(X))


def test_rff_default_matches_the_exact_kernel_at_one_over_n_features():
    # the default (gamma=None) approximates exp(-||x - y||^2 / d): Monte Carlo error ~ 1/sqrt(m)
    Z = ds.RandomFourierFeatures(n_components=4096, random_state=0).fit_transform(X[:40])
    sq = ((X[:40, None, :] - X[None, :40, :]) ** 2).sum(-1)
    np.testing.assert_allclose(Z @ Z.T, np.exp(-sq / X.shape[1]), atol=0.08)


def test_partial_fit_keeps_the_first_gamma():
    est = ds.StreamingKernelPCA(gamma="median", n_components=2, n_random_features=16,
                                sketch_size=4, random_state=0).partial_fit(X[:60])
    g = est.gamma_
    assert g == median_gamma(X[:60])
    est.partial_fit(X[60:] * 3.0)
    assert est.gamma_ == g and est.features_.gamma_ == g


def test_ridge_features_are_data_driven_and_nested_parameters():
    model = ds.SketchedKernelRidge(random_state=0).fit(X, Y)
    # the default map's gamma: chosen by leave-one-out on the ladder 2^k / n_features, the
    # centre {1/4, 1/2, 1} always scored, widened at most three steps past {1/8, ..., 2}
    assert model.gamma_ == model.features_.gamma_ == model.features_.gamma
    assert model.gamma_ in model.cv_results_["gammas"]
    factors = np.asarray(model.cv_results_["gammas"]) * X.shape[1]
    ladder = 2.0 ** np.arange(-6, 5)
    assert np.all(np.min(np.abs(factors[:, None] / ladder[None, :] - 1), axis=1) < 1e-9)
    assert {0.25, 0.5, 1.0} <= {float(f) for f in np.round(factors, 9)}
    model = ds.SketchedKernelRidge(features=ds.RandomFourierFeatures(n_components=64),
                                   random_state=0)
    model.set_params(features__gamma="median")
    assert model.get_params()["features__gamma"] == "median"
    model.fit(X, Y)
    # the map sees standardised columns: the median heuristic on those rows
    Xs = (X - X.mean(axis=0)) / X.std(axis=0)
    assert model.gamma_ == model.features_.gamma_ == pytest.approx(median_gamma(Xs), rel=1e-9)


def test_bad_gamma_is_a_config_error():
    with pytest.raises(ConfigError, match="gamma='mean'"):
        ds.RandomFourierFeatures(gamma="mean").fit(X)
    with pytest.raises(ConfigError, match="gamma=0"):
        ds.NystromFeatures(gamma=0.0).fit(X)


def test_rounded_expansion_of_a_model_uses_its_fitted_gamma():
    kp = ds.SparsifiedKernelPCA(n_components=2, gamma="median", p=0.5, random_state=0).fit(X)
    r = ds.RoundedExpansion(threshold=1e-14, random_state=0).fit(kp)
    assert r.gamma_ == kp.gamma_ == median_gamma(X)
    # nothing rounded away: the expansion is the model's transform (whose extra row-mean
    # centring term is ~0 because the eigenvectors are orthogonal to the ones vector)
    np.testing.assert_allclose(r.predict(X[:10]), kp.transform(X[:10]), atol=1e-10)


def test_fit_kernel_params_resolves_gamma_then_the_kernel():
    from types import SimpleNamespace

    from distsketch.estimators.kernel_params import fit_kernel_params

    est = SimpleNamespace(kernel="gaussian", gamma="median")
    name, params = fit_kernel_params(est, X)
    assert name == "rbf" and params == {"gamma": median_gamma(X)} and est.gamma_ == median_gamma(X)
    est = SimpleNamespace(kernel="poly", gamma=None, degree=2, coef0=0.5)
    assert fit_kernel_params(est, X) == ("polynomial", {"gamma": 0.2, "coef0": 0.5, "degree": 2})
    assert est.gamma_ == 0.2
    # without degree and coef0 attributes: scikit-learn's 3 and 1.0
    est = SimpleNamespace(kernel="polynomial", gamma=0.25)
    assert fit_kernel_params(est, X) == ("polynomial", {"gamma": 0.25, "coef0": 1.0, "degree": 3})
