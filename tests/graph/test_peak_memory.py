"""Measured peak memory of each map and summary task stays within the plan's projection.

Every block task carries its projected memory (``bytes_per_row × rows +
fixed_bytes``, stated by the estimator and checked against the budget before
anything runs).  Here each task runs under ``tracemalloc`` on the synchronous
scheduler, one at a time, and the bytes it allocated at its peak (NumPy
arrays register with tracemalloc) are compared with that projection.

Slack: the projection may be exceeded by 5 % plus 64 KiB: Python objects,
index arrays of a few bytes per row and allocator rounding are not modelled.
The input block itself is a view of the in-memory test data, so it is part
of the projection but not of the measurement: the comparison is one-sided.
"""

from __future__ import annotations

import tracemalloc

import dask
import dask.array as da
import numpy as np
import pytest

from distsketch import (
    MEKA,
    CountSketch,
    FrequentDirections,
    PolySketch,
    RandomFourierFeatures,
    SketchedKernelRidge,
    StreamingKernelPCA,
    TensorSketch,
)
from distsketch.estimators.nystrom.features import NystromFeatures, NystromKernelPCA, fit_kmeans
from distsketch.graph import blocks

SLACK_RATIO = 1.05
SLACK_BYTES = 64 * 2**10
N, D, ROWS = 4000, 16, 1000


@pytest.fixture
def measured(monkeypatch):
    """Records ``(rows, measured peak bytes, projected bytes)`` of every block task."""
    records: list[tuple[int, int, int]] = []

    def wrap(call):
        def measured_call(task, block, offset, *operands):
            if task.bytes_per_row is None:
                return call(task, block, offset, *operands)
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            out = call(task, block, offset, *operands)
            peak = tracemalloc.get_traced_memory()[1] - before
            projected = int(block.shape[0] * task.bytes_per_row + task.fixed_bytes)
            records.append((block.shape[0], peak, projected))
            return out
        return measured_call

    # maps and summaries' chunks run as the same block task
    monkeypatch.setattr(blocks.BlockTask, "__call__", wrap(blocks.BlockTask.__call__))
    tracemalloc.start()
    try:
        with dask.config.set(scheduler="sync"):
            yield records
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def X():
    rng = np.random.default_rng(0)
    return da.from_array(rng.standard_normal((N, D)).astype(np.float32), chunks=(ROWS, D))


@pytest.fixture(scope="module")
def y(X):
    return da.from_array(np.asarray(X[:, 0].compute(), dtype=np.float64), chunks=ROWS)


def _fitted(est, X):
    with dask.config.set(scheduler="sync"):
        return est.fit(X)


MAPS = {
    "rff": lambda X, y: RandomFourierFeatures(n_components=512, random_state=0).fit(X),
    "countsketch": lambda X, y: CountSketch(n_components=256, random_state=0).fit(X),
    "tensorsketch": lambda X, y: TensorSketch(n_components=256, degree=3, random_state=0).fit(X),
    "polysketch": lambda X, y: PolySketch(n_components=256, degree=4, random_state=0).fit(X),
    "nystrom": lambda X, y: _fitted(NystromFeatures(n_landmarks=100, random_state=0), X),
    "skpca": lambda X, y: _fitted(StreamingKernelPCA(n_components=4, n_random_features=256,
                                                     sketch_size=16, random_state=0), X),
    "nystrom-kpca": lambda X, y: _fitted(NystromKernelPCA(n_components=4, n_landmarks=100,
                                                          random_state=0), X),
}


@pytest.mark.parametrize("kind", sorted(MAPS))
def test_map_tasks_stay_within_projection(measured, X, y, kind):
    est = MAPS[kind](X, y)
    measured.clear()
    out = est.transform(X).compute()
    assert out.shape[0] == N
    _check(measured, n_tasks=N // ROWS)


def test_ridge_predict_within_projection(measured, X, y):
    model = SketchedKernelRidge(alpha=1.0, random_state=0).fit(X, y)
    measured.clear()
    assert model.predict(X).compute().shape == (N,)
    _check(measured, n_tasks=N // ROWS)


SUMMARIES = {
    "skpca-fd": lambda X: StreamingKernelPCA(n_components=4, n_random_features=256, sketch_size=16,
                                             random_state=0).fit(X),
    "skpca-rnca": lambda X: StreamingKernelPCA(n_components=4, n_random_features=256, method="rnca",
                                               random_state=0).fit(X),
    "frequent-directions": lambda X: FrequentDirections(sketch_size=8).fit(X),
    "landmarks": lambda X: NystromFeatures(n_landmarks=100, random_state=0).fit(X),
    "nystrom-kpca-gram": lambda X: NystromKernelPCA(n_components=4, n_landmarks=100,
                                                    random_state=0).fit(X),
    "kmeans": lambda X: fit_kmeans(X, 8, seed=0, sample_size=500, full_iter=1),
    "meka": lambda X: MEKA(n_clusters=4, rank=8, random_state=0).fit(X),
}


@pytest.mark.parametrize("kind", sorted(SUMMARIES))
def test_summary_chunk_tasks_stay_within_projection(measured, X, kind):
    SUMMARIES[kind](X)
    _check(measured, n_tasks=N // ROWS)


def _check(records, n_tasks):
    # every block of the pass was measured against a stated projection
    assert len(records) >= n_tasks, records
    for rows, peak, projected in records:
        assert peak > 0
        assert peak <= SLACK_RATIO * projected + SLACK_BYTES, (
            f"a {rows}-row task peaked at {peak} bytes, the plan projected {projected}")
