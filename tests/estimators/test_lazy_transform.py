"""transform/predict of a dask array build a graph and compute nothing.

Each estimator is fitted first (fitting computes); then, under a scheduler that
raises on any computation, the method must return a dask array; computed
afterwards, it equals the method applied to the NumPy rows.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

import distsketch as ds
from distsketch.estimators.ridge.statistical_dimension import StatisticalDimensionSketch
from distsketch.testing import ComputeError, raise_on_compute

rng = np.random.default_rng(3)
X = rng.normal(size=(90, 5))
y = X[:, 0] - 0.5 * X[:, 1] ** 2
Xd = da.from_array(X, chunks=(25, 5))

# (estimator, needs y, method)
CASES = [
    (ds.RandomFourierFeatures(n_components=16, random_state=0), False, "transform"),
    (ds.CountSketch(n_components=8, random_state=0), False, "transform"),
    (ds.TensorSketch(degree=2, n_components=16, random_state=0), False, "transform"),
    (ds.SRHT(n_components=4, random_state=0), False, "transform"),
    (ds.TensorSRHT(degree=2, n_components=16, random_state=0), False, "transform"),
    (ds.PolySketch(degree=3, n_components=16, random_state=0), False, "transform"),
    (ds.GaussianSketch(gamma=0.05, n_components=32, random_state=0), False, "transform"),
    (ds.DotProductKernelSketch(kernel="arccos1", n_components=32, random_state=0), False,
     "transform"),
    (ds.NystromFeatures(n_landmarks=10, random_state=0), False, "transform"),
    (ds.DatabaseFriendlyProjection(n_components=4, random_state=0), False, "transform"),
    (StatisticalDimensionSketch(base=ds.RandomFourierFeatures(n_components=32), alpha=0.1,
                                random_state=0), False, "transform"),
    (ds.StreamingKernelPCA(n_components=3, n_random_features=32, sketch_size=8, random_state=0), False,
     "transform"),
    (ds.NystromKernelPCA(n_components=3, n_landmarks=12, random_state=0), False, "transform"),
    (ds.KSpaceKernelPCA(n_components=3, degree=2, random_state=0), False, "transform"),
    (ds.MEKA(n_clusters=2, rank=3, random_state=0), False, "transform"),
    (ds.SparsifiedKernelPCA(n_components=3, p=0.5, random_state=0), False, "transform"),
    (ds.SketchedKernelRidge(alpha=0.1, random_state=0), True, "predict"),
    (ds.KernelSolver(alpha=0.1, random_state=0), True, "predict"),
    (ds.MEKAKernelRidge(alpha=0.5, random_state=0), True, "predict"),
    (ds.KernelPCR(n_components=4, degree=2, random_state=0), True, "predict"),
    (ds.RoundedExpansion(), True, "predict"),
]


def test_guard_refuses_every_scheduler():
    for scheduler in (None, "sync", "threads", "processes"):
        with raise_on_compute(), pytest.raises(ComputeError):
            Xd.sum().compute(scheduler=scheduler)
    assert float(Xd.sum().compute()) == pytest.approx(X.sum())  # restored afterwards


@pytest.mark.parametrize("est,supervised,method", CASES,
                         ids=[f"{type(c[0]).__name__}.{c[2]}" for c in CASES])
def test_method_of_dask_input_is_lazy(est, supervised, method):
    est.fit(X, y) if supervised else est.fit(X)
    with raise_on_compute():
        out = getattr(est, method)(Xd)
    assert isinstance(out, da.Array) and out.shape[0] == X.shape[0]
    with dask.config.set(scheduler="sync"):
        got = out.compute()
    np.testing.assert_allclose(got, np.asarray(getattr(est, method)(X)), rtol=1e-6, atol=1e-8)
