"""A default ridge fit reads its sample's chunks, then every chunk once.

The standardisation and the rows of the leave-one-out choice come from
whole strips of rows chosen from the input's shape alone
(:func:`~distsketch.estimators.ridge.scaling.default_sample_index`); the
ridge pass maps raw rows through the random Fourier operator with the
scaling folded in.  Reads are counted at the source: a dask array's getter,
and the chunk keys a Zarr store is asked for.
"""

from collections import Counter

import dask.array as da
import numpy as np
import pytest
from zarr.storage import LocalStore

import distsketch.estimators.ridge.scaling as scaling
from distsketch import SketchedKernelRidge, SketchedKernelRidgeClassifier
from distsketch.estimators.ridge.scaling import default_sample_index, default_sample_size
from distsketch.io import ingest, open_array

N, D, CHUNK = 4000, 5, 25


class CountingRows:
    """An array whose row reads are counted by first row (empty meta reads are not reads)."""

    def __init__(self, a: np.ndarray):
        self.a, self.shape, self.dtype, self.ndim = a, a.shape, a.dtype, a.ndim
        self.reads: Counter = Counter()

    def __getitem__(self, key):
        rows = key[0]
        if rows.stop > rows.start:
            self.reads[rows.start] += 1
        return self.a[key]


def _data(seed=0, n=N):
    rng = np.random.default_rng(seed)
    X = (rng.normal(size=(n, D)) * np.array([1.0, 4.0, 0.5, 2.0, 1.0]) + 3.0)
    y = np.sin(X[:, 0]) + 0.1 * X[:, 1] + 0.05 * rng.normal(size=n)
    return X.astype(np.float32), y


@pytest.fixture
def small_minimum(monkeypatch):
    # a sample smaller than the input at a size a test fits quickly: 1000 rows
    # (the floor, the leave-one-out's rows) in 32 strips of 32
    monkeypatch.setattr(scaling, "MIN_SAMPLE_ROWS", 1000)
    assert default_sample_size(N, D) == default_sample_size(2 * N, D) == 1000


def _sample_chunks() -> set[int]:
    return set((default_sample_index(N, D) // CHUNK).tolist())


def _reference_predictions(model, X):
    # the standardised map the folded operator stands for, and the fitted weights
    Xs = (X.astype(np.float64) - model.x_mean_) / model.x_scale_
    Z = model.features_.transform(Xs.astype(np.float32)).astype(np.float64)
    return Z @ np.asarray(model.coef_).T + model.intercept_


@pytest.mark.parametrize("estimator", [SketchedKernelRidge, SketchedKernelRidgeClassifier])
def test_default_fit_reads_each_chunk_once_plus_the_sample(estimator, small_minimum):
    X, y = _data()
    if estimator is SketchedKernelRidgeClassifier:
        y = (y > np.median(y)).astype(np.int64)
    source = CountingRows(X)
    Xd = da.from_array(source, chunks=(CHUNK, D), asarray=False, fancy=False)
    model = estimator(random_state=0).fit(Xd, y)
    n_chunks = N // CHUNK
    sample = _sample_chunks()
    # the sample is a few strips: far from every chunk
    assert len(sample) <= n_chunks // 2
    expected = {c * CHUNK: 1 + (c in sample) for c in range(n_chunks)}
    assert dict(source.reads) == expected
    # the statistics are the sample's (exact float64 references on its rows)
    rows = X[default_sample_index(N, D)].astype(np.float64)
    np.testing.assert_allclose(model.x_mean_, rows.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(model.x_scale_, rows.std(axis=0), rtol=1e-12)
    assert model.cv_results_["loo_rows"] == 1000
    if estimator is SketchedKernelRidge:
        # the folded operator predicts as the standardised map: float32 features whose
        # phases differ by float32 rounding, ~1e-6 of a feature, summed with ‖coef‖₁
        ref = _reference_predictions(model, X)
        tol = 1e-5 * np.sqrt(2.0 / model.features_.n_output_features_) * np.abs(model.coef_).sum()
        assert np.max(np.abs(model.predict(X) - ref)) <= tol


def test_default_fit_of_a_zarr_store_reads_each_chunk_once_plus_the_sample(
        tmp_path, monkeypatch, small_minimum):
    # blocks of 40 chunks: the sample is read in the store's own chunks, not whole blocks
    n = 2 * N
    X, y = _data(seed=1, n=n)
    np.save(tmp_path / "x.npy", X)
    store = ingest(tmp_path / "x.npy", tmp_path / "x.zarr", chunk_rows=CHUNK)
    Xz = open_array(store, block_rows=1000)
    keys: Counter = Counter()
    real = LocalStore.get

    async def counted(self, key, *args, **kwargs):
        keys[key] += 1
        return await real(self, key, *args, **kwargs)

    monkeypatch.setattr(LocalStore, "get", counted)
    model = SketchedKernelRidge(random_state=0).fit(Xz, y)
    chunk_reads = {int(k.split("/c/")[1].split("/")[0]): v for k, v in keys.items()
                   if "/c/" in k}
    index = default_sample_index(n, D)
    sample = set((index // CHUNK).tolist())
    assert len(sample) <= (n // CHUNK) // 2
    # an opened store (a path would add the reads of the model's input fingerprint)
    assert chunk_reads == {c: 1 + (c in sample) for c in range(n // CHUNK)}
    rows = X[index].astype(np.float64)
    np.testing.assert_allclose(model.x_mean_, rows.mean(axis=0), rtol=1e-12)
