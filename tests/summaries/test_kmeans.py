"""k-means sufficient statistics: conformance, Lloyd steps, chunking independence."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distsketch.errors import InputError
from distsketch.estimators.nystrom.features import fit_kmeans
from distsketch.summaries.kmeans import KMeansStats, kmeans_on_sample, lloyd_update
from distsketch.testing import MergeableSummaryTests

TRUE = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0], [6.0, 6.0]])


def _blobs(n_per: int = 80, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = np.vstack([c + 0.5 * rng.normal(size=(n_per, 2)) for c in TRUE])
    return X[rng.permutation(X.shape[0])]


class TestKMeansStats(MergeableSummaryTests):
    def make_summary(self):
        return KMeansStats(4)

    def make_data(self, rng):
        return _blobs(40)

    def operands(self):
        return (TRUE + 0.3,)

    def test_matches_brute_force(self):
        X = self._data()
        st_ = KMeansStats(4).chunk(X, 0, TRUE)
        d = ((X[:, None, :] - TRUE[None]) ** 2).sum(-1)
        lab = d.argmin(1)
        np.testing.assert_array_equal(st_["count"], np.bincount(lab, minlength=4))
        for c in range(4):
            np.testing.assert_allclose(st_["sum"][c], X[lab == c].sum(0), rtol=1e-12)
        np.testing.assert_allclose(st_["inertia"], d.min(1).sum(), rtol=1e-10)


def test_lloyd_update_keeps_empty_cluster():
    X = np.array([[0.0, 0.0], [2.0, 0.0]])
    centres = np.array([[1.0, 0.0], [100.0, 100.0]])
    new = lloyd_update(KMeansStats(2).chunk(X, 0, centres), centres)
    np.testing.assert_allclose(new, [[1.0, 0.0], [100.0, 100.0]])


def test_kmeans_on_sample_recovers_blobs():
    X = _blobs(100)
    centres, inertia = kmeans_on_sample(X, 4, seed=0)
    # each true centre has a found centre within 4 standard errors (0.5/sqrt(100))
    dist = np.sqrt(((centres[:, None] - TRUE[None]) ** 2).sum(-1))
    assert np.all(dist.min(axis=0) < 4 * 0.5 / np.sqrt(100) * np.sqrt(2))
    assert inertia < 1.5 * X.shape[0] * 2 * 0.25


def test_kmeans_needs_enough_rows():
    with pytest.raises(InputError, match="n_clusters"):
        kmeans_on_sample(np.zeros((3, 2)), 4, seed=0)


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(block=st.integers(7, 320))
def test_full_lloyd_same_centres_for_any_chunking(block):
    X = _blobs(80)
    ref, ref_in = fit_kmeans(X, 4, seed=1, sample_size=100, full_iter=3)
    got, got_in = fit_kmeans(da.from_array(X, chunks=(block, 2)), 4, seed=1, sample_size=100,
                             full_iter=3)
    # the sample and labels are exact; sums differ only in summation order
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_in, ref_in, rtol=1e-10)
