"""Planned blocks on a real cluster: a 2-worker ``LocalCluster`` (processes) whose
workers have 300 MB each (more where the libraries alone take more: see ``LIMIT``).

* The RFF → Zarr pipeline ``write_array(RandomFourierFeatures(n_components=1024)
  .fit(path).transform(open_array(path)), out)`` on 300 000 × 100 float32 runs
  with the defaults.  With the store's ~64 MiB input blocks one task would need
  2.9 GB (167 772 rows × 17 KiB); the planner makes blocks that fit what a worker
  thread has, and enough of them for both workers.
* The 1.2 GB feature store it writes, several times one worker's memory limit, is
  reduced by the same workers with planned blocks.

No worker is restarted on the way: the same two workers finish both.
"""

from __future__ import annotations

import subprocess
import sys

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

def _worker_limit() -> int:
    """300 MB, or more where a process importing what a worker imports is already large.

    A worker's own memory (interpreter, NumPy, Dask, SciPy, scikit-learn: ~195 MB) leaves
    its tasks about 45 MB below distributed's 80 % pause; with pandas and pyarrow
    installed, dask's imports pull them in too (~35 MB more) and a 300 MB worker would
    pause for good.  The tasks get the same room either way.
    """
    code = ("import resource, distributed, distsketch.io, distsketch.ops.rff; "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    kib = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True).stdout)
    # a bare import is ~185 MB where a worker is ~195 MB: room of 300 MB less 195 MB
    return max(300 * 10**6, kib * 1024 + 115 * 10**6)


LIMIT = _worker_limit()


def _colsum(block, offset):
    return {"s": np.asarray(block, dtype=np.float64).sum(axis=0), "n": block.shape[0]}


@pytest.fixture(scope="module")
def workers():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=LIMIT,
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


def test_rff_to_zarr_runs_with_defaults_in_300mb_workers(workers, features):
    X, est, out, plans, before = features
    (plan,) = [p for p in plans if p.name == "randomfourierfeatures"]
    # what a 300 MB worker's thread may use, and blocks that fit it
    assert plan.budget <= 0.5 * LIMIT and plan.task_bytes <= plan.budget
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


def test_a_store_four_times_worker_memory_is_reduced_with_planned_blocks(workers, features):
    _, _, out, _, before = features
    Z = zarr.open_array(out, path="X", mode="r")
    assert Z.nbytes > 3.5 * LIMIT
    Zd = open_array(out)
    with record_plans() as plans:
        state = reduce_blocks(SumSummary(_colsum), Zd, footprint=Footprint(per_row=4.0 * M + 8.0 * M),
                              name="feature-sums")
    (plan,) = plans
    assert plan.task_bytes <= plan.budget <= 0.5 * LIMIT
    assert plan.block_rows % Z.chunks[0] == 0 or plan.block_rows < Z.chunks[0]
    ref = np.zeros(M)
    for a in range(0, N, 50_000):
        ref += np.asarray(Z[a:a + 50_000], dtype=np.float64).sum(axis=0)
    assert state["n"] == N
    # float64 sums of 3e5 values below 0.045: orders differ by at most n eps max|z| each
    np.testing.assert_allclose(state["s"], ref, rtol=0, atol=N * np.finfo(float).eps * 0.05)
    assert set(workers.scheduler_info(n_workers=-1)["workers"]) == before
