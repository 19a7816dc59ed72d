"""The workflow's preprocessing as a transformer (Standardizer) and the median heuristic."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from scipy.spatial.distance import pdist
from sklearn.pipeline import Pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

import distsketch
from distsketch import RandomFourierFeatures, registry
from distsketch.errors import InputError
from distsketch.io.model.store import save_model
from distsketch.metrics import sample_rows
from distsketch.workflow.preprocess import (
    Standardizer,
    apply_scaler,
    learn_scaler,
    median_gamma,
    with_preprocessing,
)


def data(n=500, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * [1.0, 100.0, 0.01, 1.0] + [0.0, 5.0, -3.0, 0.0]
    X[:, 3] = 2.5  # a constant column is centred only
    return X


@parametrize_with_checks([Standardizer()])
def test_standardizer_follows_sklearn_conventions(estimator, check):
    check(estimator)


def test_fit_equals_numpy_moments_and_transform_is_lazy_and_bitwise():
    X = data()
    st = Standardizer().fit(da.from_array(X, chunks=77))
    np.testing.assert_allclose(st.mean_, X.mean(axis=0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(st.scale_[:3], X[:, :3].std(axis=0), rtol=1e-12)
    assert st.scale_[3] == 1.0 and st.n_samples_seen_ == 500 and st.n_features_in_ == 4
    X32 = X.astype(np.float32)
    lazy = st.transform(da.from_array(X32, chunks=130))
    assert hasattr(lazy, "dask") and lazy.dtype == np.float32
    eager = st.transform(X32)
    # the workflow's own function, same float32 rounding, any chunking
    np.testing.assert_array_equal(lazy.compute(), eager)
    np.testing.assert_array_equal(eager, apply_scaler(X32, learn_scaler(da.from_array(X, 77))))
    with pytest.raises(InputError, match="expecting 4 features"):
        st.transform(X[:, :3])


def test_pipeline_with_the_scaler_saves_and_loads_as_one_store(tmp_path):
    X = data(seed=1)
    scaler = learn_scaler(da.from_array(X, chunks=100))
    rff = RandomFourierFeatures(n_components=16, gamma=0.3, random_state=0).fit(X)
    pipe = with_preprocessing(rff, scaler, 500)
    assert with_preprocessing(rff, None, 500) is rff
    assert registry.qualified_name(Standardizer) == "distsketch.workflow.preprocess.Standardizer"
    back = distsketch.load(save_model(pipe, tmp_path / "m.zarr"))
    assert isinstance(back, Pipeline) and [n for n, _ in back.steps] == ["scale", "model"]
    np.testing.assert_array_equal(back[0].mean_, np.asarray(scaler["mean"]))
    np.testing.assert_array_equal(back.transform(X), rff.transform(apply_scaler(X, scaler)))


def test_median_gamma_equals_the_pairwise_reference():
    X = data(1500, seed=2)[:, :3]
    gamma = median_gamma(da.from_array(X, chunks=400), n_sample=300, random_state=4)
    _, S = sample_rows(X, 300, 4)  # the same hashed sample, whatever the chunking
    assert gamma == pytest.approx(1.0 / np.median(pdist(S, "sqeuclidean")), rel=1e-9)
    with pytest.raises(InputError, match="all identical"):
        median_gamma(np.ones((50, 3)))
