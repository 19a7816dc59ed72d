"""Fitted models do not depend on the caller's BLAS thread count.

LAPACK factorisations (eigh, svd, Cholesky, QR) round differently with one and
with several BLAS threads; a model fitted in a process whose BLAS runs 2
threads must equal, bit for bit, one fitted where BLAS is pinned to 1 (a
workflow's CLI process against a pytest process, a driver against a worker).
"""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import distsketch.blas as blas_control
from distsketch import (
    MEKA,
    KSpaceKernelPCA,
    NystromKernelPCA,
    RandomFourierFeatures,
    SketchedKernelRidge,
    StreamingKernelPCA,
)
from distsketch.datasets import random_noisy
from distsketch.metrics import kernel_errors

RNG = np.random.default_rng(0)
X = RNG.normal(size=(900, 12))
Y = np.sin(X[:, 0]) + 0.1 * RNG.normal(size=900)


def _models():
    return {
        "skpca-rnca": (lambda: StreamingKernelPCA(method="rnca", n_components=5, n_random_features=384,
                                                  gamma=0.1, random_state=0), False),
        "skpca-fd": (lambda: StreamingKernelPCA(n_components=5, n_random_features=384, sketch_size=32,
                                                gamma=0.1, random_state=0), False),
        "nystrom-kpca": (lambda: NystromKernelPCA(n_components=5, n_landmarks=300, gamma=0.1,
                                                  random_state=0), False),
        "krr": (lambda: SketchedKernelRidge(
            features=RandomFourierFeatures(n_components=384, gamma=0.1, random_state=0),
            alpha=1e-3), True),
        "kspace": (lambda: KSpaceKernelPCA(n_components=4, degree=2, gamma=0.1, sketch_dim=300,
                                           n_landmarks=200, random_state=0), False),
        "meka": (lambda: MEKA(n_clusters=3, rank=64, gamma=0.1, random_state=0), False),
    }


def _learned(est):
    return {k: v for k, v in vars(est).items()
            if k.endswith("_") and not k.startswith("_") and isinstance(v, np.ndarray)}


@pytest.mark.parametrize("name", list(_models()))
def test_fit_is_bitwise_independent_of_blas_threads(name):
    make, supervised = _models()[name]
    fitted = {}
    for threads in (1, 2):
        with threadpool_limits(limits=threads):
            est = make()
            est.fit(X, Y) if supervised else est.fit(X)
        fitted[threads] = _learned(est)
    assert fitted[1].keys() == fitted[2].keys() and fitted[1]
    for key in fitted[1]:
        np.testing.assert_array_equal(fitted[1][key], fitted[2][key], err_msg=key)


def test_data_generation_and_error_metrics_independent_of_blas_threads():
    out = {}
    for threads in (1, 2):
        with threadpool_limits(limits=threads):
            A = np.asarray(random_noisy(600, 300, signal_dim=50, random_state=1))
            model = StreamingKernelPCA(method="rnca", n_components=5, n_random_features=256, gamma=0.01,
                                       random_state=0).fit(A)
            out[threads] = (A, kernel_errors(A, model, gamma=0.01, n_sample=None))
    np.testing.assert_array_equal(out[1][0], out[2][0])
    assert out[1][1] == out[2][1]


def test_one_blas_pin_for_every_layer():
    import distsketch.graph as graph
    import distsketch.graph.runtime as runtime

    for name in ("blas_single_thread", "pin_blas_for_tasks", "single_threaded_blas", "task_blas"):
        assert getattr(runtime, name) is getattr(blas_control, name)
    assert graph.blas_single_thread is blas_control.blas_single_thread
    assert graph.single_threaded_blas is blas_control.single_threaded_blas


def test_task_blas_limits_the_main_thread_for_the_block():
    from threadpoolctl import threadpool_info

    with blas_control.task_blas():
        blas = [p for p in threadpool_info() if p["user_api"] == "blas"]
        assert blas and all(p["num_threads"] == 1 for p in blas)
