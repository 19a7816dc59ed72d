"""One vocabulary for kernel PCA: every estimator exposes ``n_samples_seen_`` and
``components_`` of shape (n_components, features), and ``transform`` is the
(centred, where the estimator centres) projection onto ``components_``."""

import numpy as np
import pytest

import distsketch as ds
from distsketch.ops.kernels import pairwise_kernel

RNG = np.random.default_rng(0)
X = RNG.normal(size=(300, 5))
GAMMA = 0.3


def _skpca_features(model, A):
    return model.features_.transform(A) @ model.components_.T


def _nystrom_features(model, A):
    Z = pairwise_kernel(A, model.landmarks_, "rbf", gamma=GAMMA) @ model.normalization_
    return (Z - model.mean_) @ model.components_.T


def _kspace_features(model, A):
    return model.sketch_S_.transform(A) @ model.components_.T


def _sparsified_features(model, A):
    K = pairwise_kernel(A, model.X_fit_, "rbf", gamma=GAMMA)
    Kc = K - K.mean(axis=1, keepdims=True) - model.K_fit_rows_ + model.K_fit_rows_.mean()
    return Kc @ model.components_.T


CASES = [
    # (estimator, width of the space the components live in, projection by hand)
    (ds.StreamingKernelPCA(n_components=3, n_random_features=64, sketch_size=12, gamma=GAMMA,
                           random_state=0), 64, _skpca_features),
    (ds.StreamingKernelPCA(n_components=3, n_random_features=64, method="rnca", gamma=GAMMA,
                           random_state=0), 64, _skpca_features),
    (ds.NystromKernelPCA(n_components=3, n_landmarks=40, gamma=GAMMA, random_state=0), 40,
     _nystrom_features),
    (ds.NystromKernelPCA(n_components=3, n_landmarks=40, gamma=GAMMA, center=True,
                         random_state=0), 40, _nystrom_features),
    (ds.KSpaceKernelPCA(n_components=3, degree=2, sketch_dim=24, random_state=0), 24,
     _kspace_features),
    (ds.SparsifiedKernelPCA(n_components=3, gamma=GAMMA, p=0.5, tile_rows=100,
                            random_state=0), X.shape[0], _sparsified_features),
]


@pytest.mark.parametrize("model,width,project", CASES,
                         ids=[f"{type(c[0]).__name__}-{i}" for i, c in enumerate(CASES)])
def test_kernel_pca_exposes_rows_seen_and_row_components(model, width, project):
    assert not hasattr(model, "components_")
    model.fit(X)
    assert model.n_samples_seen_ == X.shape[0]
    assert model.components_.shape == (model.n_components, width)
    np.testing.assert_allclose(model.transform(X), project(model, X), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("model", [CASES[0][0], CASES[2][0]], ids=["StreamingKernelPCA",
                                                                   "NystromKernelPCA"])
def test_partial_fit_counts_every_row(model):
    model = model.__class__(**model.get_params())
    model.partial_fit(X[:120]).partial_fit(X[120:])
    assert model.n_samples_seen_ == X.shape[0]
    assert model.components_.shape[0] == model.n_components


def test_frequent_directions_components_are_orthonormal_rows():
    fd = ds.FrequentDirections(sketch_size=4).fit(X)
    assert fd.n_samples_seen_ == X.shape[0]
    assert fd.components_.shape == (4, X.shape[1])
    np.testing.assert_allclose(fd.components_ @ fd.components_.T, np.eye(4), atol=1e-12)
