"""Planned blocks on a real cluster: a 2-worker ``LocalCluster`` (processes) whose
workers have 300 MB each (more where the libraries alone take more: see ``limit``).

* The RFF → Zarr pipeline ``write_array(RandomFourierFeatures(n_components=1024)
  .fit(path).transform(open_array(path)), out)`` on 300 000 × 100 float32 runs
  with the defaults.  With the store's ~64 MiB input blocks one task would need
  2.9 GB (167 772 rows × 17 KiB); the planner makes blocks that fit what a worker
  thread has, and enough of them for both workers.
* The 1.2 GB feature store it writes, more than both workers' memory together, is
  reduced by the same workers with planned blocks.

No worker is restarted on the way: the same two workers finish both.
"""

from __future__ import annotations

import dask
import numpy as np
import pytest
import zarr

from distsketch import RandomFourierFeatures
from distsketch.footprint import Footprint
from distsketch.graph import record_plans, reduce_blocks
from distsketch.io import open_array, write_array
from distsketch.summaries.sums import SumSummary

pytestmark = [pytest.mark.system, pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]

N, D, M = 300_000, 100, 1024

def _imported_rss() -> int:
    # a worker's memory once it holds what the tasks below import
    import psutil
    import sklearn  # noqa: F401

    import distsketch.estimators
    import distsketch.io  # noqa: F401

    return int(psutil.Process().memory_info().rss)


@pytest.fixture(scope="module")
def limit() -> int:
    """300 MB, or what leaves a worker the same 45 MB below distributed's 80 % pause.

    A worker's own memory (interpreter, NumPy, Dask, SciPy, scikit-learn: ~195 MB) is
    measured on a worker of a first cluster; where pandas and pyarrow are installed,
    dask's imports pull them in (~35 MB more), and a 300 MB worker would pause for good.
    """
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, memory_limit=0,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        rss = max(client.run(_imported_rss).values())
    return max(300 * 10**6, int((rss + 45 * 10**6) / 0.8))


def _colsum(block, offset):
    return {"s": np.asarray(block, dtype=np.float64).sum(axis=0), "n": block.shape[0]}


@pytest.fixture(scope="module")
def workers(limit):
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=limit,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        client.wait_for_workers(2, timeout=120)
        yield client


@pytest.fixture(scope="module")
def features(workers, tmp_path_factory):
    folder = tmp_path_factory.mktemp("planned")
    X = np.random.default_rng(0).standard_normal((N, D), dtype=np.float32)
    # the input store is written from this process's memory by local threads: shipping
    # 120 MB of in-graph NumPy through 300 MB workers (about 195 MB each once NumPy,
    # Dask, SciPy and scikit-learn are imported) would pause them, and it is not what
    # these tests are about
    with dask.config.set(scheduler="threads"):
        path = str(write_array(X, folder / "x.zarr"))
    out = folder / "z.zarr"
    before = set(workers.scheduler_info(n_workers=-1)["workers"])
    with record_plans() as plans:
        est = RandomFourierFeatures(n_components=M, random_state=0).fit(path)
        write_array(est.transform(open_array(path)), out)
    return X, est, str(out), plans, before


def test_rff_to_zarr_runs_with_defaults_in_300mb_workers(workers, features, limit):
    X, est, out, plans, before = features
    (plan,) = [p for p in plans if p.name == "randomfourierfeatures"]
    # what a 300 MB worker's thread may use, and blocks that fit it
    assert plan.budget <= 0.5 * limit and plan.task_bytes <= plan.budget
    assert plan.task_bytes == plan.block_rows * 8 * (D + 2 * M)
    assert plan.n_blocks >= 4 * 2 and plan.threads == 2
    Z = zarr.open_array(out, path="X", mode="r")
    assert Z.shape == (N, M) and Z.nchunks_initialized == Z.nchunks
    assert Z.chunks[0] == plan.block_rows
    # rows at the start, across a block boundary and at the end, against float64 NumPy
    W = est.random_weights_.astype(np.float64)
    b = est.random_offset_.astype(np.float64)
    for a in (0, plan.block_rows - 50, N - 100):
        x = X[a:a + 100].astype(np.float64)
        ref = np.sqrt(2.0 / M) * np.cos(x @ W + b)
        # float32 products: |error of x.w| <= (d + 2) eps32 sum|x||w| (+ the offset)
        tol = np.sqrt(2.0 / M) * (D + 2) * np.finfo(np.float32).eps * (np.abs(x) @ np.abs(W)
                                                                       + np.abs(b) + 1.0)
        assert np.all(np.abs(Z[a:a + 100] - ref) <= tol)
    # the same two workers did it all: none was restarted
    assert set(workers.scheduler_info(n_workers=-1)["workers"]) == before


def test_a_store_larger_than_the_workers_memory_is_reduced_with_planned_blocks(workers, features,
                                                                              limit):
    _, _, out, _, before = features
    Z = zarr.open_array(out, path="X", mode="r")
    assert Z.nbytes > 2 * limit  # more than both workers may hold together
    Zd = open_array(out)
    with record_plans() as plans:
        state = reduce_blocks(SumSummary(_colsum), Zd, footprint=Footprint(per_row=4.0 * M + 8.0 * M),
                              name="feature-sums")
    (plan,) = plans
    assert plan.task_bytes <= plan.budget <= 0.5 * limit
    assert plan.block_rows % Z.chunks[0] == 0 or plan.block_rows < Z.chunks[0]
    ref = np.zeros(M)
    for a in range(0, N, 50_000):
        ref += np.asarray(Z[a:a + 50_000], dtype=np.float64).sum(axis=0)
    assert state["n"] == N
    # float64 sums of 3e5 values below 0.045: orders differ by at most n eps max|z| each
    np.testing.assert_allclose(state["s"], ref, rtol=0, atol=N * np.finfo(float).eps * 0.05)
    assert set(workers.scheduler_info(n_workers=-1)["workers"]) == before
