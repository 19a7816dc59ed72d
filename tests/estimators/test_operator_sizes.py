"""Every estimator states the bytes of its operators and states before it allocates them (issue 26).

A width parameter far beyond memory (2**63, 10**12) must end in one
MemoryBudgetError (or ConfigError) naming the parameter, the bytes and the
budget, both from ``fit`` (once X's shape is known, before any pass over X) and
from the CLI's ``check_before_cluster`` (the shape alone), within a second and
without allocating.
"""

from __future__ import annotations

import time
import tracemalloc

import dask
import dask.array as da
import numpy as np
import pytest

import distsketch as ds
from distsketch import registry
from distsketch.cli.common import check_before_cluster
from distsketch.errors import ConfigError, MemoryBudgetError
from distsketch.testing import raise_on_compute

#: estimators with no operator or state sized by a parameter, and why
NOTHING_SIZED = {
    "RoundedExpansion": "budget counts expected kernel evaluations: probabilities are capped at "
                        "1, so a huge budget keeps the fitted model's support and allocates nothing",
}

N, D = 10**4, 6  # rows and features of the (lazy, never computed) input
BIG_N = 10**8    # where a state grows with the rows: the parameter is capped by them


def _cases(huge: int) -> list[tuple[str, object, int, str]]:
    """(id, estimator, n_samples, the parameter the message must name)."""
    rff = ds.RandomFourierFeatures
    return [
        ("RandomFourierFeatures", rff(n_components=huge), N, "n_components"),
        ("FrequentDirections", ds.FrequentDirections(sketch_size=huge), N, "sketch_size"),
        ("StreamingKernelPCA", ds.StreamingKernelPCA(n_components=2, sketch_size=4,
                                                     n_random_features=huge), N,
         "n_random_features"),
        ("StreamingKernelPCA-sketch", ds.StreamingKernelPCA(n_components=2, sketch_size=huge),
         N, "sketch_size"),
        ("CountSketch", ds.CountSketch(n_components=huge), N, "n_components"),
        ("TensorSketch", ds.TensorSketch(n_components=huge), N, "n_components"),
        ("SRHT", ds.SRHT(n_components=huge), N, "n_components"),
        ("TensorSRHT", ds.TensorSRHT(n_components=huge), N, "n_components"),
        ("PolySketch", ds.PolySketch(n_components=huge), N, "n_components"),
        ("GaussianSketch", ds.GaussianSketch(gamma=0.01, n_components=huge), N, "n_components"),
        ("DotProductKernelSketch", ds.DotProductKernelSketch(kernel="arccos1", n_components=huge),
         N, "n_components"),
        ("KSpaceKernelPCA", ds.KSpaceKernelPCA(n_components=2, sketch_dim=huge), N,
         "sketch_dim"),
        ("KernelPCR", ds.KernelPCR(n_components=2, n_landmarks=huge), BIG_N, "n_landmarks"),
        ("KernelPCRClassifier", ds.KernelPCRClassifier(n_components=2, embed_size=huge), N,
         "embed_size"),
        ("NystromFeatures", ds.NystromFeatures(n_landmarks=huge), N, "n_landmarks"),
        ("NystromKernelPCA", ds.NystromKernelPCA(n_components=2, n_landmarks=huge), N,
         "n_landmarks"),
        ("BlockKernelApproximation", ds.BlockKernelApproximation(n_clusters=2,
                                                                 kmeans_sample=huge), BIG_N,
         "kmeans_sample"),
        ("MEKA", ds.MEKA(n_clusters=2, rank=huge), N, "rank"),
        ("MEKA-landmarks", ds.MEKA(n_clusters=2, n_landmarks=huge), N, "n_landmarks"),
        ("SketchedKernelRidge", ds.SketchedKernelRidge(features=ds.TensorSketch(
            n_components=huge)), N, "n_components"),
        ("SketchedKernelRidgeClassifier", ds.SketchedKernelRidgeClassifier(
            features=rff(n_components=huge)), N, "n_components"),
        ("KernelSolver", ds.KernelSolver(block_rows=huge), BIG_N, "block_rows"),
        ("KernelSolver-sketch", ds.KernelSolver(preconditioner="sketch", preconditioner_size=huge), N,
         "preconditioner_size"),
        ("MEKAKernelRidge", ds.MEKAKernelRidge(meka=ds.MEKA(n_clusters=2, rank=huge)), N, "rank"),
        ("NystromKernelRidge", ds.NystromKernelRidge(n_centers=huge), BIG_N, "n_centers"),
        ("NystromKernelRidgeClassifier", ds.NystromKernelRidgeClassifier(n_centers=huge), BIG_N,
         "n_centers"),
        ("SparsifiedGram", ds.SparsifiedGram(p=0.5, tile_rows=huge), BIG_N, "tile_rows"),
        ("SparsifiedKernelPCA", ds.SparsifiedKernelPCA(n_components=2, tile_rows=huge), BIG_N,
         "tile_rows"),
        ("DatabaseFriendlyProjection", ds.DatabaseFriendlyProjection(n_components=huge), N,
         "n_components"),
        ("DatabaseFriendlyProjection-auto", ds.DatabaseFriendlyProjection(eps=1.0 / huge), N,
         "n_components='auto'"),
    ]


CASES = [(f"{cid}-{label}", est, n, param)
         for huge, label in ((2**63, "2**63"), (10**12, "10**12"))
         for cid, est, n, param in _cases(huge)]


def test_every_public_estimator_has_a_size_case():
    names = {type(est).__name__ for _, est, _, _ in CASES}
    assert names | set(NOTHING_SIZED) == set(registry.ESTIMATORS)
    assert not names & set(NOTHING_SIZED)


@pytest.fixture(scope="module", autouse=True)
def _warm() -> None:
    # the first budget look-up imports the host-memory probes: not part of the check's time
    with dask.config.set({"distsketch.task-memory": "1GiB"}):
        check_before_cluster(ds.CountSketch(n_components=1), 1, 1)


def _assert_refused(call, param: str) -> None:
    start = time.perf_counter()
    tracemalloc.start()
    try:
        with raise_on_compute(), pytest.raises((MemoryBudgetError, ConfigError)) as info:
            call()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    seconds = time.perf_counter() - start
    msg = str(info.value)
    assert param in msg, msg
    if info.type is MemoryBudgetError:
        assert "per-task budget of 1.00 GiB" in msg and "need " in msg, msg
    assert seconds < 1.0, f"took {seconds:.2f} s"
    assert peak < 64 * 2**20, f"allocated {peak} bytes at peak"


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize(("est", "n", "param"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_huge_width_is_refused_before_allocation(est, n, param):
    X = da.zeros((n, D), chunks=(min(n, 10**7), D))
    y = da.zeros(n, chunks=min(n, 10**7))
    if type(est).__name__.endswith("Classifier") and n <= N:  # they read their labels first
        y = np.arange(n) % 2
    with dask.config.set({"distsketch.task-memory": "1GiB"}):
        # the CLI's check: the shape only, before a cluster starts
        _assert_refused(lambda: check_before_cluster(est, n, D), param)
        # fit: the same refusal once X's shape is known, before any pass over X (y is ignored
        # by the estimators that take none)
        _assert_refused(lambda: est.fit(X, y), param)
