"""DatabaseFriendlyProjection: JL distances, kernel approximation, chunking invariance."""

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.spatial.distance import pdist

from distsketch import DatabaseFriendlyProjection
from distsketch.errors import ConfigError
from distsketch.ops.kernels import pairwise_kernel
from distsketch.ops.projection import jl_min_dim

RNG = np.random.default_rng(31)
X = RNG.normal(size=(60, 1000))


@pytest.mark.parametrize("density", ["dense", "sparse"])
def test_pairwise_distances_within_eps_at_jl_dimension(density):
    eps = 0.3
    P = DatabaseFriendlyProjection(n_components="auto", eps=eps, density=density,
                                   random_state=0).fit(X)
    assert P.n_components_ == jl_min_dim(60, eps)
    ratio = pdist(P.transform(X), "sqeuclidean") / pdist(X, "sqeuclidean")
    assert np.all((ratio > 1 - eps) & (ratio < 1 + eps))


def test_approximate_kernels():
    Z = X / np.sqrt(1000)  # unit-scale rows so kernels are not degenerate
    P = DatabaseFriendlyProjection(n_components=800, density="sparse", random_state=1).fit(Z)
    K = pairwise_kernel(Z[:10], Z, "rbf", gamma=0.5)
    Kh = P.approximate_kernel(Z[:10], Z, kernel="rbf", gamma=0.5)
    # a projected squared distance has relative sd about sqrt(2/k) (5 sd for 600 pairs), and
    # |d exp(-g s)/ds| <= g, so |error| <= g * 5 sqrt(2/k) * s per pair
    sq = pairwise_kernel(Z[:10], Z, "linear")
    nrm = np.sum(Z**2, axis=1)
    dist2 = nrm[:10, None] + nrm[None, :] - 2 * sq
    rel = 5 * np.sqrt(2 / 800)
    assert np.all(np.abs(Kh - K) <= 0.5 * rel * dist2 + 1e-12)
    # inner products: sd of <Ra, Rb> is about sqrt((|a|^2 |b|^2 + <a,b>^2) / k); (1 + t)^2 has
    # slope 2 (1 + t)
    Kp = pairwise_kernel(Z[:10], Z, "polynomial", gamma=1.0, coef0=1.0, degree=2)
    Kph = P.approximate_kernel(Z[:10], Z, kernel="polynomial", gamma=1.0, degree=2, coef0=1.0)
    dt = 5 * np.sqrt((nrm[:10, None] * nrm[None, :] + sq**2) / 800)
    assert np.all(np.abs(Kph - Kp) <= 2 * (1 + np.abs(sq) + dt) * dt + dt**2)
    # the projected-training-set path gives the same block
    PB = P.transform(Z)
    np.testing.assert_allclose(P.approximate_kernel(Z[:10], PB, kernel="rbf", gamma=0.5,
                                                    B_projected=True), Kh, rtol=1e-14)
    with pytest.raises(ConfigError, match="laplacian"):
        P.approximate_kernel(Z[:2], kernel="laplacian")


def test_chunking_sparse_and_dtype_invariance():
    P = DatabaseFriendlyProjection(n_components=40, random_state=3).fit(X)
    ref = P.transform(X)
    for chunks in [(7, 1000), (60, 130), (13, 333)]:
        out = P.transform(da.from_array(X, chunks=chunks))
        assert isinstance(out, da.Array)
        assert np.array_equal(out.compute(), ref)
    np.testing.assert_allclose(P.transform(sp.csr_matrix(X)), ref, rtol=1e-10, atol=1e-10)
    assert P.transform(X.astype(np.float32)).dtype == np.float32
    # the operator depends only on (seed, input column): a wider input shares the first columns
    wide = DatabaseFriendlyProjection(n_components=40, random_state=3).fit(np.zeros((2, 1500)))
    assert np.array_equal(wide.components_[:, :1000], P.components_)
    assert P.components_.shape == (40, 1000)
