"""Sizes from an error target: ``n_components="auto"`` (``n_landmarks="auto"``) with
``target_error``, for every public feature map.

Each map chooses its size on the rows it is fitted on; the relative kernel error
‖K − K̂‖_F / ‖K‖_F is then measured on held-out rows against the exact Gram.  The
error of a fixed map on s sampled rows is a ratio of two U-statistic means, so its
relative standard error is about sd(r_i)/√s, r_i the row contributions (delta
method); the tolerances below are three of those, for the held-out rows and for
the fit's own evaluation rows."""

import numpy as np
import pytest
from sklearn.base import clone

import distsketch as ds
from distsketch.errors import ConfigError
from distsketch.estimators.autosize import EVAL_ROWS, choose_size, fit_power_law
from distsketch.metrics import model_kernel
from distsketch.ops.kernels import pairwise_kernel

RNG = np.random.default_rng(7)
X = RNG.normal(size=(1300, 6))
TRAIN, HELD = X[:1000], X[1000:]

# (map, target): gamma and targets keep every chosen size within a few thousand
CASES = [
    (ds.RandomFourierFeatures(gamma=0.1), 0.15),
    (ds.RandomFourierFeatures(gamma=0.1, form="paired"), 0.15),
    (ds.CountSketch(), 0.3),
    (ds.SRHT(), 0.3),
    (ds.DatabaseFriendlyProjection(), 0.3),
    (ds.TensorSketch(degree=2, gamma=0.2, coef0=1.0), 0.15),
    (ds.TensorSRHT(degree=2, gamma=0.2, coef0=1.0), 0.15),
    (ds.PolySketch(degree=2, gamma=0.2, coef0=1.0), 0.15),
    (ds.GaussianSketch(gamma=0.05), 0.15),
    (ds.DotProductKernelSketch(kernel="arccos1"), 0.15),
    (ds.NystromFeatures(gamma=0.1), 0.05),
]
IDS = [f"{type(e).__name__}-{i}" for i, (e, _) in enumerate(CASES)]


def _size_param(est):
    return "n_landmarks" if isinstance(est, ds.NystromFeatures) else "n_components"


def _auto(est, target):
    return clone(est).set_params(**{_size_param(est): "auto"}, target_error=target,
                                 random_state=0)


def _error(model, rows):
    """Relative kernel error on ``rows`` and its relative standard error."""
    spec = dict(model_kernel(model))
    K = pairwise_kernel(rows, rows, spec.pop("kernel"), **spec)
    E2 = (K - model.kernel_approx(rows)) ** 2
    G2 = K ** 2
    r = E2.mean(axis=1) / E2.mean() - G2.mean(axis=1) / G2.mean()
    return float(np.sqrt(E2.sum() / G2.sum())), float(r.std() / np.sqrt(rows.shape[0]))


@pytest.fixture(scope="module")
def fitted():
    return [_auto(est, target).fit(TRAIN) for est, target in CASES]


@pytest.mark.parametrize("i", range(len(CASES)), ids=IDS)
def test_held_out_error_meets_the_target(i, fitted):
    model, target = fitted[i], CASES[i][1]
    err, se = _error(model, HELD)
    # sampling error of the held-out estimate and of the fit's 500-row certificate
    tol = 3.0 * se * (1.0 + np.sqrt(HELD.shape[0] / EVAL_ROWS))
    assert err <= target * (1.0 + tol), (err, se, model.kernel_error_)
    # the reported error is the one measured, and the held-out rows see the same map
    assert model.kernel_error_ <= target
    assert abs(err - model.kernel_error_) <= err * tol + 1e-9


@pytest.mark.parametrize("i", range(len(CASES)), ids=IDS)
def test_half_the_size_misses_the_target(i, fitted):
    model, target = fitted[i], CASES[i][1]
    param = _size_param(model)
    m = getattr(model, param + "_")
    if m <= 1 or model.kernel_error_ < 1e-10:
        # an exact map (SRHT at the padded dimension, CountSketch without collisions):
        # every smaller size the pilot measured missed
        assert np.all(model.pilot_errors_[model.pilot_sizes_ < m] > target)
        return
    h = m // 2 - (m // 2) % 2 if getattr(model, "form", None) == "paired" else m // 2
    err, se = _error(clone(model).set_params(**{param: h}).fit(TRAIN), HELD)
    # the size half as large misses, or (where the error is noisier than the change of
    # size, as for a few Taylor terms) the error model fitted to the pilot says it does
    c, a = fit_power_law(model.pilot_sizes_, model.pilot_errors_, model._auto_slope)
    assert err > target * (1.0 - 3.0 * se) or c * h ** -a > target, (m, err, c, a)


@pytest.mark.parametrize("i", range(len(CASES)), ids=IDS)
def test_auto_fit_is_the_explicit_fit_of_its_size(i, fitted):
    model = fitted[i]
    param = _size_param(model)
    m = getattr(model, param + "_")
    explicit = clone(model).set_params(**{param: m}).fit(TRAIN)
    assert getattr(explicit, param + "_") == m
    assert not hasattr(explicit, "kernel_error_")
    np.testing.assert_array_equal(np.asarray(model.transform(HELD)),
                                  np.asarray(explicit.transform(HELD)))
    if not isinstance(model, (ds.NystromFeatures, ds.GaussianSketch)):
        # data-oblivious maps: the pilot measured this very map on the same rows
        assert model.kernel_error_ == model.pilot_errors_[model.pilot_sizes_ == m][0]


def test_sizes_respect_the_map_structure(fitted):
    by_name = {IDS[i]: f for i, f in enumerate(fitted)}
    assert by_name["RandomFourierFeatures-1"].n_components_ % 2 == 0
    srht = by_name["SRHT-3"]
    assert srht.n_components_ <= 8  # the padded dimension of 6 features


def test_an_unreachable_target_raises_with_the_numbers():
    Xs = RNG.normal(size=(300, 6))
    # gamma = 5 on 6 dimensions: a kernel close to the identity, beyond 150 landmarks
    est = ds.NystromFeatures(gamma=5.0, n_landmarks="auto", target_error=1e-3, random_state=0)
    with pytest.raises(ConfigError, match=r"n_landmarks='auto' cannot reach target_error=0\.001"):
        est.fit(Xs)


def test_nystrom_refuses_auto_where_it_draws_no_landmarks():
    with pytest.raises(ConfigError, match="precomputed"):
        ds.NystromFeatures(kernel="precomputed", n_landmarks="auto").fit(np.eye(5))
    with pytest.raises(ConfigError, match="as an array"):
        ds.NystromFeatures(landmarks=TRAIN[:10], n_landmarks="auto").fit(TRAIN)


def test_projection_auto_without_a_target_keeps_the_jl_bound():
    p = ds.DatabaseFriendlyProjection(random_state=0).fit(TRAIN)
    assert p.n_components_ == ds.DatabaseFriendlyProjection(
        n_components=p.n_components_, random_state=0).fit(TRAIN).n_components_
    assert not hasattr(p, "kernel_error_")


def test_the_choice_does_not_depend_on_chunking():
    da = pytest.importorskip("dask.array")
    est = ds.RandomFourierFeatures(gamma=0.1, n_components="auto", target_error=0.2,
                                   random_state=3)
    a = clone(est).fit(TRAIN)
    b = clone(est).fit(da.from_array(TRAIN, chunks=(137, 6)))
    assert a.n_components_ == b.n_components_
    assert a.kernel_error_ == b.kernel_error_


def test_partial_fit_keeps_the_chosen_number_of_landmarks():
    est = ds.NystromFeatures(gamma=0.1, n_landmarks="auto", target_error=0.2, random_state=0)
    est.fit(TRAIN[:600])
    m = est.n_landmarks_
    est.partial_fit(TRAIN[600:])
    assert est.landmarks_.shape[0] == m and est.n_samples_seen_ == TRAIN.shape[0]


def test_power_law_fit_recovers_the_exponent():
    m = np.array([32, 64, 128])
    c, a = fit_power_law(m, 2.0 * m ** -0.8, None)
    assert a == pytest.approx(0.8) and c == pytest.approx(2.0)
    c, a = fit_power_law(m, 3.0 * m ** -0.5, 0.5)
    assert (c, a) == (pytest.approx(3.0), 0.5)


def test_choose_size_finds_the_smallest_size_of_an_exact_law():
    # e(m) = 4/sqrt(m): the target 0.1 needs m = 1600 exactly
    choice = choose_size(lambda m: 4.0 / np.sqrt(m), 0.1, start=32, cap=10**6,
                         admissible=int, slope=0.5, owner="T", param="n_components")
    assert choice.size == 1600 and choice.error == pytest.approx(0.1)
    with pytest.raises(ConfigError, match="n_components=1000"):
        choose_size(lambda m: 4.0 / np.sqrt(m), 0.1, start=32, cap=1000,
                    admissible=int, slope=0.5, owner="T", param="n_components")


def test_a_data_dependent_map_that_misses_on_all_rows_is_refitted_larger():
    # landmarks drawn from all 600 rows are a different sample from the pilot's: here the
    # pilot's size (14) gives 0.12 on the evaluation rows, so fit grows it
    Xs = np.random.default_rng(0).normal(size=(600, 5))
    est = ds.NystromFeatures(gamma=0.1, n_landmarks="auto", target_error=0.1,
                             random_state=0).fit(Xs)
    pilot_choice = est.pilot_sizes_[est.pilot_errors_ <= 0.1].min()
    assert est.n_landmarks_ > pilot_choice
    assert est.kernel_error_ <= 0.1
    miss = ds.NystromFeatures(gamma=0.1, n_landmarks=int(pilot_choice), random_state=0).fit(Xs)
    err, _ = _error(miss, Xs[np.isin(np.arange(600), miss.landmark_indices_, invert=True)])
    assert err > 0.1
