"""Every summary's chunk, merge and finalize on array-api-strict blocks.

Blocks are ``array_api_strict`` arrays on a non-CPU device of that library:
a hidden conversion to NumPy raises there, and an allocation on the wrong
device fails when it meets the block.  States must stay in the block's
namespace and device (so they merge on a GPU) except the leaves documented
as host data (row counts, hash priorities and global row indices); results
are compared with the NumPy path.

Tolerances: both paths compute in float64; sums and products agree to
``rtol = 1e-12``, the Frequent Directions sketch (an SVD instead of a Gram
eigendecomposition off NumPy) to ``1e-10`` of ‖A‖_F².  Sampled rows are
gathered, not computed, so they are compared exactly.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil

import array_api_compat
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import distsketch
import distsketch.summaries
from distsketch.ops.kernels import pairwise_kernel
from distsketch.ops.nystrom import inv_sqrt_map
from distsketch.ops.rpcholesky import residual_diagonal
from distsketch.summaries import Covariance, Summary, SumSummary, UniformLandmarks
from distsketch.summaries.covariance import covariance_state
from distsketch.summaries.cross_product import CrossProduct
from distsketch.summaries.dot_product import ColumnSum, GaussianStats
from distsketch.summaries.falkon import FalkonPass
from distsketch.summaries.frequent_directions import FrequentDirectionsSummary
from distsketch.summaries.kmeans import KMeansStats, kmeans_on_sample, lloyd_update
from distsketch.summaries.kspace import FactorCross, SketchGram
from distsketch.summaries.landmarks import ClusterLandmarks
from distsketch.summaries.leverage import WeightedLandmarks, ridge_leverage
from distsketch.summaries.meka import Projection
from distsketch.summaries.moments import ColumnMoments, column_scale
from distsketch.summaries.rff_covariance import BlockedCovariance
from distsketch.summaries.ridge import RidgeSummary
from distsketch.summaries.sparsified import StripSummary
from distsketch.summaries.sums import sum_states
from distsketch.testing import from_strict_device as on_device
from distsketch.testing import to_strict_device as xs

RTOL = 1e-12
RTOL_FACTOR = 1e-10

RNG = np.random.default_rng(7)
X = RNG.standard_normal((60, 5))
CENTRES = X[[0, 20, 40]] + 0.01
SPLIT = 25  # blocks X[:25] and X[25:], global offsets 0 and 25


def host_or_scalar(a):
    assert isinstance(a, (np.ndarray, int, float, np.integer, np.floating))
    return a


def run(summary, *operands, empty=None):
    """chunk both blocks, merge (with ``empty`` first when given), finalize: NumPy and strict."""
    out = []
    for wrap in (lambda a: a, xs):
        states = [summary.chunk(wrap(X[:SPLIT]), 0, *operands),
                  summary.chunk(wrap(X[SPLIT:]), SPLIT, *operands)]
        if empty is not None:
            states.insert(0, empty)
        merged = summary.merge(states)
        out.append((states, merged, summary.finalize(merged)))
    return out


def test_covariance():
    def transform(block, offset):
        xp = array_api_compat.array_namespace(block)
        return xp.cos(block[:, :3] + 0.5)

    (_, ref, _), (states, got, _) = run(Covariance(transform=transform, n_targets=2),
                                        empty={"n": 0, "sum": 0.0, "ztz": 0.0, "zty": 0.0,
                                               "ysum": 0.0, "yty": 0.0})
    for key in ("sum", "ztz", "zty", "ysum", "yty"):
        on_device(states[1][key])
        assert_allclose(on_device(got[key]), ref[key], rtol=RTOL)
    assert got["n"] == ref["n"] == 60
    Z = np.cos(X[:, :3] + 0.5)
    assert_allclose(on_device(covariance_state(xs(Z))["ztz"]), Z.T @ Z, rtol=RTOL)


def test_frequent_directions():
    fd = FrequentDirectionsSummary(4, n_columns=5, map_rows=8)
    (_, ref, _), (_, got, fin) = run(fd, empty=fd.empty())
    B, Bx = ref["sketch"], on_device(got["sketch"])
    assert_allclose(Bx.T @ Bx, B.T @ B, rtol=0, atol=RTOL_FACTOR * np.sum(X**2))
    assert got["shrinkage"] == pytest.approx(ref["shrinkage"], rel=RTOL_FACTOR)
    assert got["sq_frobenius"] == pytest.approx(ref["sq_frobenius"], rel=RTOL)
    assert got["n"] == 60 and fin is got


def test_kmeans_stats_and_lloyd_update():
    km = KMeansStats(3)
    (_, ref, _), (_, got, _) = run(km, CENTRES, empty=km.empty(5))
    assert_allclose(on_device(got["sum"]), ref["sum"], rtol=RTOL)
    assert_array_equal(on_device(got["count"]), ref["count"])
    assert got["inertia"] == pytest.approx(ref["inertia"], rel=RTOL)
    assert_allclose(on_device(lloyd_update(got, CENTRES)), lloyd_update(ref, CENTRES), rtol=RTOL)
    # an empty cluster keeps its centre on the device path too
    far = np.vstack([CENTRES, [[100.0] * 5]])
    st = KMeansStats(4).chunk(xs(X), 0, far)
    assert_array_equal(on_device(lloyd_update(st, far))[3], far[3])


def test_kmeans_on_sample_moves_the_sample_to_the_host():
    # scikit-learn runs on NumPy: the (small) sample goes to the host on purpose
    ref = kmeans_on_sample(X, 3, seed=1)
    got = kmeans_on_sample(xs(X), 3, seed=1)
    assert isinstance(got[0], np.ndarray)
    assert_array_equal(got[0], ref[0])
    assert got[1] == ref[1]


def test_uniform_landmarks():
    for order in ("index", "priority"):
        ul = UniformLandmarks(7, seed=3, purpose="t", order=order)
        (_, ref, (ri, rr)), (states, got, (gi, gr)) = run(ul, empty=ul.empty(5))
        on_device(states[1]["rows"])
        host_or_scalar(states[1]["priority"])
        assert_array_equal(gi, ri)
        assert_array_equal(on_device(gr), rr)
        assert_array_equal(on_device(got["rows"]), ref["rows"])
        rebuilt = ul.state_of(gi, gr)
        assert_array_equal(on_device(rebuilt["rows"]), ul.state_of(ri, rr)["rows"])


def test_cluster_landmarks():
    cl = ClusterLandmarks(3, [("a", 2), ("b", 4)], seed=5)
    (_, ref, rfin), (states, got, gfin) = run(cl, CENTRES, empty=cl.empty(5))
    assert_array_equal(host_or_scalar(got["count"]), ref["count"])
    for purpose in ("a", "b"):
        on_device(states[1][purpose]["rows"])
        ri, rr, rn = rfin[purpose]
        gi, gr, gn = gfin[purpose]
        assert_array_equal(gi, ri)
        assert_array_equal(gn, rn)
        assert_array_equal(on_device(gr), rr)


def test_column_moments_and_scale():
    (_, ref, _), (states, got, _) = run(ColumnMoments())
    for key in ("mean", "m2"):
        on_device(states[0][key])
        assert_allclose(on_device(got[key]), ref[key], rtol=RTOL)
    mean, scale = column_scale(got)
    rmean, rscale = column_scale(ref)
    assert_allclose(on_device(mean), rmean, rtol=RTOL)
    assert_allclose(on_device(scale), rscale, rtol=RTOL)
    const = ColumnMoments().chunk(xs(np.ones((4, 2))), 0)
    assert_array_equal(on_device(column_scale(const)[1]), [1.0, 1.0])


def test_sum_summary_and_merge_with_a_host_identity():
    def chunk_fn(block, offset):
        xp = array_api_compat.array_namespace(block)
        return {"s": xp.sum(block, axis=0), "n": block.shape[0]}

    (_, ref, _), (_, got, _) = run(SumSummary(chunk_fn), empty={"s": np.zeros(5), "n": 0})
    assert_allclose(on_device(got["s"]), ref["s"], rtol=RTOL)
    assert got["n"] == 60
    # a merged state never aliases its input
    first = {"s": xs(np.ones(2))}
    merged = sum_states([first])
    merged["s"] += 1.0
    assert_array_equal(on_device(first["s"]), [1.0, 1.0])


def test_weighted_landmarks():
    # the weights (ridge leverage, RPCholesky residual) are computed on the block's device,
    # keys and indices on the host, rows gathered on the device: the NumPy path's sample
    L = X[[1, 7, 30]]
    M, _ = inv_sqrt_map(pairwise_kernel(L, None, "rbf", gamma=0.2))
    kw = {"kernel": "rbf", "params": {"gamma": 0.2}}
    for weight, ops in ((functools.partial(ridge_leverage, **kw), (L, M, 0.5 * np.eye(3), 0.3)),
                        (functools.partial(residual_diagonal, **kw), (L, M, np.array([1, 7, 30])))):
        wl = WeightedLandmarks(9, seed=2, purpose="t", weight=weight)
        (_, ref, (ri, rr)), (states, got, (gi, gr)) = run(wl, *ops, empty=wl.empty(5))
        on_device(states[1]["rows"])
        host_or_scalar(states[1]["priority"])
        assert_array_equal(gi, ri)
        assert_array_equal(on_device(gr), rr)
        assert_array_equal(on_device(got["rows"]), ref["rows"])


COVERED = {
    Covariance: test_covariance,
    FrequentDirectionsSummary: test_frequent_directions,
    KMeansStats: test_kmeans_stats_and_lloyd_update,
    UniformLandmarks: test_uniform_landmarks,
    WeightedLandmarks: test_weighted_landmarks,
    ClusterLandmarks: test_cluster_landmarks,
    ColumnMoments: test_column_moments_and_scale,
    SumSummary: test_sum_summary_and_merge_with_a_host_identity,
}

# The estimators' own passes: their namespace behaviour is tested through the estimator
# that runs them (tests/estimators/test_array_namespace.py fits every public estimator on
# strict arrays), each named here.
THROUGH_ESTIMATOR = {
    BlockedCovariance: "StreamingKernelPCA",
    ColumnSum: "GaussianSketch",
    CrossProduct: "MEKAKernelRidge",
    FactorCross: "KSpaceKernelPCA",
    FalkonPass: "NystromKernelRidge",
    GaussianStats: "GaussianSketch",
    Projection: "MEKA",
    RidgeSummary: "SketchedKernelRidge",
    SketchGram: "KSpaceKernelPCA",
    StripSummary: "SparsifiedGram",
}


def test_summaries_tested_through_an_estimator_name_a_public_one():
    assert set(THROUGH_ESTIMATOR.values()) <= set(distsketch.__all__)
    assert not set(THROUGH_ESTIMATOR) & set(COVERED)


def test_every_summary_of_the_package_is_covered():
    found = set()
    for mod in pkgutil.iter_modules(distsketch.summaries.__path__, "distsketch.summaries."):
        module = importlib.import_module(mod.name)
        found |= {c for _, c in inspect.getmembers(module, inspect.isclass)
                  if issubclass(c, Summary) and c is not Summary
                  and c.__module__.startswith("distsketch.summaries.")}
    assert {Covariance, ClusterLandmarks, KMeansStats} <= found  # discovery really walked
    missing = sorted(c.__qualname__ for c in found - set(COVERED) - set(THROUGH_ESTIMATOR))
    assert not missing, f"summaries without a strict-namespace test: {missing}"
