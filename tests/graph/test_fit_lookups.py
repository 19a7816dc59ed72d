"""Small fits pay no fixed cost they do not need.

Within one fit the cluster's resources are looked up once (a scheduler query
or a walk through the cgroup files per look-up), the loaded libraries are
scanned for BLAS pools once per process, not at every set and restore of the
one-thread limit, and a process with no cluster never imports
``distributed``.  Counted, not timed: the counts are deterministic.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import dask
import numpy as np
import pytest
import threadpoolctl
from threadpoolctl import threadpool_limits

from distsketch import NystromFeatures, RandomFourierFeatures, SketchedKernelRidge
from distsketch.blas import blas_single_thread
from distsketch.estimators.nystrom.landmark_choice import rpcholesky_landmarks
from distsketch.graph import budget as budget_mod
from distsketch.graph import cluster_resources, resources_scope

GiB = 2**30
RNG = np.random.default_rng(0)
X = RNG.normal(size=(1000, 10))
Y = X @ RNG.normal(size=10) + 0.1 * RNG.normal(size=1000)
X150 = np.random.default_rng(1).normal(size=(150, 3))


def _rpcholesky() -> tuple[np.ndarray, np.ndarray]:
    # tests/ops/test_rpcholesky.py's case: 33 pivots drawn one per round, 33 passes
    return rpcholesky_landmarks(X150, 33, 0, kernel="rbf", kernel_params={"gamma": 0.5}, rounds=33)


@pytest.fixture
def scans(monkeypatch):
    """How many times a ThreadpoolController scans the loaded libraries."""
    count = {"n": 0}
    init = threadpoolctl.ThreadpoolController.__init__

    def counting_init(self, *args, **kwargs):
        count["n"] += 1
        init(self, *args, **kwargs)

    monkeypatch.setattr(threadpoolctl.ThreadpoolController, "__init__", counting_init)
    return count


def test_setting_and_restoring_the_blas_limit_scans_the_libraries_once(scans):
    with threadpool_limits(limits=2):  # BLAS not pinned: every block below sets and restores
        # one scan of our own to read the pools (threadpool_info() would scan at each call)
        blas = threadpoolctl.ThreadpoolController().select(user_api="blas").lib_controllers
        outer = [lib.num_threads for lib in blas]
        with blas_single_thread():
            pass  # the first may scan (new imports since the last one)
        scans["n"] = 0
        for _ in range(20):
            with blas_single_thread():
                assert blas and all(lib.num_threads == 1 for lib in blas)
            assert [lib.num_threads for lib in blas] == outer  # the caller's limit is back
        assert scans["n"] == 0  # was one scan per set and one per restore


def test_a_multi_pass_landmark_choice_scans_no_libraries(scans):
    # warm-up: the first call imports lazily after its scan, the second rescans once for them
    expect = _rpcholesky()
    _rpcholesky()
    with threadpool_limits(limits=2):  # BLAS not pinned: the function sets the limit itself
        scans["n"] = 0
        got = _rpcholesky()
        assert scans["n"] == 0  # was two scans per round (a set and a restore of the limit)
    np.testing.assert_array_equal(got[0], expect[0])


class _CountingClient:
    """A client whose scheduler lists two workers and counts the queries."""

    def __init__(self):
        self.queries = 0

    def scheduler_info(self, n_workers=5):
        self.queries += 1
        return {"workers": {f"tcp://w{i}": {"memory_limit": 4 * GiB, "nthreads": 1,
                                            "metrics": {"memory": 0}} for i in range(2)}}


@pytest.fixture
def lookups(monkeypatch):
    """Count both kinds of look-up: the local memory walk and the scheduler query."""
    monkeypatch.delenv("DISTSKETCH_TASK_MEMORY", raising=False)
    count = {"local": 0}

    def local_memory():
        count["local"] += 1
        return 64 * GiB

    monkeypatch.setattr(budget_mod, "_local_memory", local_memory)
    return count


def test_one_fit_looks_the_local_resources_up_once(lookups):
    with dask.config.set({"distsketch.task-memory": None}):
        SketchedKernelRidge().fit(X, Y)
        assert lookups["local"] == 1  # was 8: one per planned stage and operator check
        lookups["local"] = 0
        NystromFeatures(landmarks="rpcholesky", gamma=0.5, random_state=0).fit(X150)
        assert lookups["local"] == 1
        lookups["local"] = 0
        _rpcholesky()
        assert lookups["local"] == 1  # was 3 per round


def test_a_segment_summary_looks_the_resources_up_once(lookups):
    # a workflow summarises each segment (in its own driver thread) before folding them
    model = SketchedKernelRidge(features=RandomFourierFeatures(n_components=256, gamma=0.1,
                                                               random_state=0), alpha=1e-3)
    with dask.config.set({"distsketch.task-memory": None}):
        model.fit(X[:500], Y[:500])
        lookups["local"] = 0
        summary = model.summarize(X[500:], Y[500:], row_offset=500)
        assert lookups["local"] == 1  # was 5: one per pass and operator check
        model.fold(summary)
    assert model.n_samples_seen_ == 1000


def test_one_fit_queries_the_scheduler_once(lookups, monkeypatch):
    client = _CountingClient()
    monkeypatch.setattr(budget_mod, "active_client", lambda: client)
    with dask.config.set({"distsketch.task-memory": None}):
        model = SketchedKernelRidge().fit(X, Y)
    assert client.queries == 1 and lookups["local"] == 0
    assert np.isfinite(model.predict(X[:5])).all()


def test_a_setting_changed_inside_the_scope_is_looked_up_anew(lookups, monkeypatch):
    client = _CountingClient()
    monkeypatch.setattr(budget_mod, "active_client", lambda: client)
    with dask.config.set({"distsketch.task-memory": None}), resources_scope():
        first = cluster_resources()
        assert cluster_resources() == first and client.queries == 1
        with dask.config.set({"distsketch.task-memory": "5MiB"}):
            assert cluster_resources().task_bytes == 5 * 2**20
        assert client.queries == 2  # the override is another setting
        monkeypatch.setattr(budget_mod, "active_client", lambda: None)
        assert cluster_resources().source != first.source and lookups["local"] == 1
        with resources_scope():  # nested: shares the outer look-ups
            cluster_resources()
        assert client.queries == 2 and lookups["local"] == 1
    cluster_resources()
    cluster_resources()
    assert lookups["local"] == 3  # outside a scope every call looks up


def test_a_process_without_a_cluster_never_imports_distributed():
    # a fresh interpreter: distributed is imported by the test session itself
    script = textwrap.dedent("""
        import sys, threading
        import dask, dask.array as da, numpy as np
        from distsketch import NystromFeatures, RandomFourierFeatures, SketchedKernelRidge
        from distsketch.graph import compute

        rng = np.random.default_rng(0)
        X = rng.normal(size=(1000, 10))
        SketchedKernelRidge().fit(X, X[:, 0])
        NystromFeatures(landmarks="rpcholesky").fit(X[:150]).transform(X)
        where = lambda b: np.full(b.shape[:1], threading.current_thread() is threading.main_thread())
        blocks = da.ones(40, chunks=10)
        pool = compute(blocks.map_blocks(where, dtype=bool))[0]
        with dask.config.set(scheduler="sync"):
            main = compute(blocks.map_blocks(where, dtype=bool))[0]
        print("distributed" in sys.modules, bool(pool.any()), bool(main.all()))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    # no import; and the schedulers are dask's own choices: its thread pool by default,
    # the main thread for scheduler="sync"
    assert out.stdout.split() == ["False", "False", "True"], out.stdout + out.stderr[-2000:]
