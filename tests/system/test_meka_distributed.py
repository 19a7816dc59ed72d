"""MEKA fitted under a real multi-process ``distributed`` cluster on a Zarr input
several times larger than each worker's memory limit."""

from __future__ import annotations

import time

import dask
import numpy as np
import pytest

from distsketch.io import create_array, open_array, write_manifest

pytestmark = pytest.mark.system

N_ROWS, N_COLS, CHUNK = 1_200_000, 256, 5_000   # 1.23 GB of float32
# A worker process holds ~198 MiB once NumPy, Dask, SciPy, scikit-learn and
# distsketch are imported, and peaked at ~232 MiB in this fit (12 MiB tasks).
LIMIT = 280 * 2**20                             # per worker: store / limit = 4.2
CENTRES = np.random.default_rng(0).normal(scale=3.0, size=(6, N_COLS))


def _write_store(path) -> None:
    arr = create_array(path, (N_ROWS, N_COLS), np.float32, chunk_rows=CHUNK, compressor=None)
    for start in range(0, N_ROWS, CHUNK):
        rng = np.random.default_rng(start)
        lab = rng.integers(0, len(CENTRES), size=CHUNK)
        noise = rng.random((CHUNK, N_COLS), dtype=np.float32)
        arr[start:start + CHUNK] = CENTRES[lab].astype(np.float32) + 2 * noise - 1
    write_manifest(path, {"kind": "array"})


def _start_rss_sampler(dask_worker) -> None:
    # ru_maxrss would include the parent's pages from before the worker's exec,
    # so the worker samples its own RSS every 10 ms instead
    import threading

    import psutil

    stop = threading.Event()
    state = {"peak": 0, "stop": stop}

    def loop() -> None:
        proc = psutil.Process()
        # sample every 10 ms until told to stop
        while not stop.wait(0.01):
            state["peak"] = max(state["peak"], proc.memory_info().rss)

    dask_worker._meka_test_rss = state
    threading.Thread(target=loop, daemon=True).start()


def _peak_rss(dask_worker) -> int:
    state = dask_worker._meka_test_rss
    state["stop"].set()
    return int(state["peak"])


def test_meka_fit_out_of_core_under_distributed(tmp_path):
    from distributed import Client, LocalCluster

    from distsketch import MEKA
    from distsketch.metrics import relative_kernel_error

    path = tmp_path / "X.zarr"
    _write_store(path)
    store_bytes = N_ROWS * N_COLS * 4
    assert store_bytes > 4 * LIMIT
    X = open_array(str(path), block_rows=CHUNK)
    # no pausing or spilling: the limit is enforced by the nanny killing a worker
    # above 95% of it, which the test detects as a changed worker set
    cfg = {"distributed.worker.memory.pause": False, "distributed.worker.memory.spill": False,
           "distributed.worker.memory.target": False, "distributed.worker.memory.terminate": 0.95}
    with dask.config.set(cfg), LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                            memory_limit=LIMIT, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        workers = sorted(client.scheduler_info()["workers"])
        client.run(_start_rss_sampler)
        t0 = time.perf_counter()
        mk = MEKA(n_clusters=6, rank=16, gamma=0.002, kmeans_sample=500,
                  random_state=0).fit(X)
        seconds = time.perf_counter() - t0
        peaks = client.run(_peak_rss)
        # no worker was killed and restarted for exceeding its limit
        assert sorted(client.scheduler_info()["workers"]) == workers
    assert max(peaks.values()) < LIMIT, (peaks, LIMIT)
    assert mk.cluster_sizes_.sum() == N_ROWS
    # the six generating clusters are found: sizes near N/6 (multinomial sd ~ 410)
    np.testing.assert_allclose(np.sort(mk.cluster_sizes_), N_ROWS / 6, rtol=0.01)
    err = relative_kernel_error(X, mk, gamma=0.002, n_sample=1500)
    assert err < 0.1, err
    print(f"MEKA fit on {store_bytes / 2**20:.0f} MiB in {seconds:.1f} s, "
          f"worker peak RSS {max(peaks.values()) / 2**20:.0f} MiB (limit {LIMIT / 2**20:.0f} MiB)")
