"""RoundedExpansion: exactness without rounding, unbiasedness, Hoeffding bound, model adapters."""

import dask.array as da
import numpy as np
import pytest
from sklearn.decomposition import KernelPCA
from sklearn.kernel_ridge import KernelRidge

from distsketch import RoundedExpansion, SparsifiedKernelPCA, load
from distsketch.errors import ConfigError, InputError
from distsketch.ops.kernels import pairwise_kernel

RNG = np.random.default_rng(21)
X = RNG.normal(size=(400, 3))
Y = np.sin(X[:, 0]) + 0.1 * RNG.normal(size=400)
XT = RNG.normal(size=(60, 3))
KRR = KernelRidge(kernel="rbf", gamma=0.5, alpha=0.5).fit(X, Y)


def test_no_rounding_reproduces_kernel_ridge():
    c = float(np.abs(KRR.dual_coef_).min())
    r = RoundedExpansion(threshold=c, random_state=0).fit(KRR)
    assert r.n_evaluations_ == 400 and r.n_support_full_ == 400
    np.testing.assert_allclose(r.predict(XT), KRR.predict(XT), rtol=1e-10, atol=1e-10)
    assert r.hoeffding_bound_[0] == 0.0


def test_unbiased_and_within_hoeffding_bound():
    delta = 0.05
    full = KRR.predict(XT)
    preds, bounds, evals = [], [], []
    for seed in range(200):
        r = RoundedExpansion(budget=80, delta=delta, random_state=seed).fit(KRR)
        preds.append(r.predict(XT))
        bounds.append(r.hoeffding_bound_[0])
        evals.append(r.n_evaluations_)
    preds = np.array(preds)
    c = r.threshold_[0]
    # each rounded term has variance <= (c |k|)^2 / 4 <= c^2 / 4; m rounded terms
    sd = c / 2 * np.sqrt(r.n_rounded_[0] / 200)
    assert np.max(np.abs(preds.mean(axis=0) - full)) < 5 * sd
    assert np.mean(np.abs(preds - full) > np.array(bounds)[:, None]) <= delta
    # fewer kernel evaluations, as many as expected on average
    assert r.expected_evaluations_ == pytest.approx(80.0, rel=1e-9)
    p = np.minimum(1.0, np.abs(KRR.dual_coef_) / c)
    assert abs(np.mean(evals) - 80.0) < 5 * np.sqrt((p * (1 - p)).sum() / 200)


def test_from_scikit_learn_kernel_pca():
    sk = KernelPCA(n_components=3, kernel="rbf", gamma=0.5).fit(X)
    r = RoundedExpansion(threshold=1e-12, random_state=0).fit(sk)
    np.testing.assert_allclose(r.predict(XT), sk.transform(XT), atol=1e-8)
    r = RoundedExpansion(budget=100, random_state=0).fit(sk)
    assert r.predict(XT).shape == (60, 3)
    assert r.n_evaluations_ < 300
    assert np.all(np.abs(r.predict(XT) - sk.transform(XT)) <= r.error_bound(1e-6)[None, :])


def test_from_sparsified_kernel_pca_and_explicit_arrays():
    kp = SparsifiedKernelPCA(n_components=2, gamma=0.5, p=0.5, tile_rows=200, random_state=0).fit(X)
    r = RoundedExpansion(threshold=1e-14, random_state=0).fit(kp)
    np.testing.assert_allclose(r.predict(XT), kp.transform(XT), atol=1e-8)
    coef = RNG.normal(size=50)
    r2 = RoundedExpansion(kernel="polynomial", gamma=0.3, degree=2, threshold=0.5,
                          random_state=1).fit(X[:50], coef, intercept=2.0)
    K = pairwise_kernel(XT, X[:50][r2.support_], "polynomial", gamma=0.3, coef0=1.0, degree=2)
    np.testing.assert_allclose(r2.predict(XT), K @ r2.coef_[:, 0] + 2.0, rtol=1e-12)
    diag = np.diag(pairwise_kernel(X[:50], X[:50], "polynomial", gamma=0.3, coef0=1.0, degree=2))
    assert r2.kernel_bound_ == pytest.approx(diag.max())


def test_dask_save_and_errors(tmp_path):
    r = RoundedExpansion(budget=50, random_state=0).fit(KRR)
    out = r.predict(da.from_array(XT, chunks=(25, 3)))
    assert isinstance(out, da.Array)
    np.testing.assert_allclose(out.compute(), r.predict(XT), rtol=1e-12)
    r.save(tmp_path / "r.zarr")
    np.testing.assert_array_equal(load(tmp_path / "r.zarr").predict(XT), r.predict(XT))
    with pytest.raises(ConfigError, match="not both"):
        RoundedExpansion(threshold=1.0, budget=3.0).fit(KRR)
    with pytest.raises(InputError, match="no kernel expansion"):
        RoundedExpansion().fit(KernelRidge())
    with pytest.raises(InputError, match="one coefficient"):
        RoundedExpansion().fit(X, np.ones(3))


# ------------------------------------------------- total budget shared across outputs

RNG8 = np.random.default_rng(8)
S8 = RNG8.normal(size=(4000, 3))
XT8 = RNG8.normal(size=(40, 3))
# heavy-tailed coefficients on eight outputs of different scales
COEF8 = RNG8.standard_t(3, size=(4000, 8)) * np.logspace(0, 2, 8)[None, :]


def test_total_budget_bounds_distinct_evaluations_across_outputs():
    seeds = range(20)
    total = [RoundedExpansion(budget=400, gamma=0.5, budget_scope="total",
                              random_state=s).fit(S8, COEF8) for s in seeds]
    r = total[0]
    assert r.expected_evaluations_ == pytest.approx(400.0, rel=1e-9)
    # distinct evaluations are a sum of independent Bernoulli(pᵢ): sd = sqrt(Σ pᵢ(1 − pᵢ))
    p = np.minimum(1.0, (np.abs(COEF8) / r.threshold_[None, :]).max(axis=1))
    assert p.sum() == pytest.approx(400.0, rel=1e-9)
    sd = np.sqrt((p * (1 - p)).sum())
    evals = np.array([t.n_evaluations_ for t in total])
    assert np.all(evals <= 400 + 5 * sd)
    assert abs(evals.mean() - 400) <= 5 * sd / np.sqrt(len(evals))
    # the support kept is what predict evaluates: one kernel column per kept point
    assert r.support_vectors_.shape == (r.n_evaluations_, 3)
    # per output scope at the same budget evaluates several times more points
    per = RoundedExpansion(budget=400, gamma=0.5, random_state=0).fit(S8, COEF8)
    assert per.expected_evaluations_ > 1500 and per.n_evaluations_ > 1500
    np.testing.assert_allclose(per.expected_evaluations_per_output_, 400.0, rtol=1e-9)


def test_total_budget_unbiased_and_within_hoeffding_bound():
    delta, S = 0.05, 100
    K = pairwise_kernel(XT8, S8, "rbf", gamma=0.5)
    exact = K @ COEF8
    preds = []
    for seed in range(S):
        r = RoundedExpansion(budget=400, gamma=0.5, delta=delta, budget_scope="total",
                             random_state=seed).fit(S8, COEF8)
        preds.append(r.predict(XT8))
        assert np.mean(np.abs(preds[-1] - exact) > r.hoeffding_bound_[None, :]) <= delta
    preds = np.array(preds)
    # Var f̂ⱼ(x) = Σᵢ αᵢⱼ² k(xᵢ, x)² (1 − pᵢ)/pᵢ exactly; the mean of S seeds is within 5 sd
    p = np.minimum(1.0, (np.abs(COEF8) / r.threshold_[None, :]).max(axis=1))
    var = (K ** 2) @ (COEF8 ** 2 * ((1 - p) / p)[:, None])
    z = np.abs(preds.mean(axis=0) - exact) / np.sqrt(var / S)
    assert np.max(z) < 5
    # not trivially: one seed is off by many of those standard deviations
    assert np.max(np.abs(preds[0] - exact) / np.sqrt(var / S)) > 5
    np.testing.assert_allclose(r.error_bound(delta), r.hoeffding_bound_)


def test_total_scope_with_one_output_is_the_per_output_rounding(tmp_path):
    a = RoundedExpansion(budget=80, random_state=4).fit(KRR)
    b = RoundedExpansion(budget=80, budget_scope="total", random_state=4).fit(KRR)
    np.testing.assert_array_equal(a.support_, b.support_)
    np.testing.assert_allclose(b.coef_, a.coef_, rtol=1e-12)
    np.testing.assert_allclose(b.threshold_, a.threshold_, rtol=1e-12)
    np.testing.assert_allclose(b.hoeffding_bound_, a.hoeffding_bound_, rtol=1e-12)
    assert b.expected_evaluations_ == pytest.approx(a.expected_evaluations_, rel=1e-12)
    b.save(tmp_path / "b.zarr")
    back = load(tmp_path / "b.zarr")
    assert back.budget_scope == "total"
    np.testing.assert_array_equal(back.predict(XT), b.predict(XT))
    with pytest.raises(ConfigError, match="budget_scope"):
        RoundedExpansion(budget_scope="shared").fit(KRR)
