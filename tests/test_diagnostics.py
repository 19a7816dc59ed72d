"""Peak memory of the workers of a distributed cluster (worker_memory, PeakMemory(client=...)).

The reference for each worker is the worker process itself: a 200 MiB array it
holds is a lower bound of its memory, and the kernel's own peak resident set
size (``getrusage`` ``ru_maxrss`` of the worker process) an upper bound of
every sample, up to ``SLACK``: the kernel batches its RSS counters per CPU, so
two reads of the same process differ by a few dozen pages.
"""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest
import zarr

from distsketch.diagnostics import PeakMemory, WorkerMemory, worker_memory

HELD = 200 * 2**20
SLACK = 2**20


def _worker_functions():
    """Functions run on the workers, defined here so that they travel by value: a
    module-level function of this file would make every worker import the test module."""

    async def refresh(dask_worker) -> None:
        """Measure the worker's memory now and report it to the scheduler (a heartbeat)."""
        dask_worker.monitor.update()
        await dask_worker.heartbeat()

    def max_rss() -> int:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux

    return refresh, max_rss


_refresh, _max_rss = _worker_functions()


@pytest.fixture(scope="module")
def cluster():
    """Two single-threaded worker processes (memory is per process)."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      memory_limit="1GiB") as cl, Client(cl) as client:
        client.wait_for_workers(2)
        yield cl, client


def hold_on(client, address: str):
    from distributed import wait

    # np.ones touches every page: all of it is resident
    fut = client.submit(np.ones, HELD // 8, workers=[address], allow_other_workers=False,
                        pure=False)
    wait(fut)
    client.run(_refresh)
    return fut


def test_worker_memory_sees_what_one_worker_holds(cluster):
    _, client = cluster
    a, b = sorted(client.scheduler_info()["workers"])
    with worker_memory(client, interval=0.1) as wm:
        fut = hold_on(client, a)
    max_rss = client.run(_max_rss)
    peaks = wm.per_worker_peak_bytes
    assert set(peaks) == {a, b}
    assert HELD <= peaks[a] <= max_rss[a] + SLACK
    assert 0 < peaks[b] <= max_rss[b] + SLACK
    # the total is over all workers at one time: at least what a holds plus b's last sample
    assert peaks[a] <= wm.peak_bytes <= max_rss[a] + max_rss[b] + 2 * SLACK
    assert wm.peak_bytes > HELD
    summary = json.loads(json.dumps(wm.as_dict()))
    assert summary == {"workers_peak_bytes": wm.peak_bytes, "per_worker_peak_bytes": peaks,
                       "n_worker_samples": wm.n_samples}
    assert wm.n_samples >= 2  # one on entry, one on exit
    del fut


def test_peak_memory_follows_a_client_connected_inside_the_block(cluster):
    """As in the CLI: the measurement starts before the cluster connects, ends after it closes."""
    from distributed import Client

    cl, _ = cluster
    with PeakMemory(worker_interval=0.1) as pm:
        with Client(cl.scheduler_address) as inner:
            a = sorted(inner.scheduler_info()["workers"])[0]
            fut = hold_on(inner, a)
            pm.workers.sample()
            del fut
    max_rss = cluster[1].run(_max_rss)
    out = pm.as_dict()
    assert {"peak_bytes", "baseline_bytes", "n_samples"} <= set(out)  # the old keys stay
    assert out["peak_bytes"] == pm.peak_bytes and out["workers_peak_bytes"] == pm.workers_peak_bytes
    assert HELD <= out["per_worker_peak_bytes"][a] <= max_rss[a] + SLACK
    assert HELD < out["workers_peak_bytes"] <= sum(max_rss.values()) + 2 * SLACK


def test_peak_memory_without_a_client_reports_no_workers(cluster):
    with PeakMemory(client=None) as pm:
        np.ones(10)
    out = pm.as_dict()
    assert out["workers_peak_bytes"] is None and out["per_worker_peak_bytes"] == {}
    assert out["n_worker_samples"] == 0 and pm.workers_peak_bytes is None
    # "auto" follows clients connected inside the block, not one that was there before ...
    _, client = cluster
    with PeakMemory() as before:
        assert client.submit(sum, [1, 2]).result() == 3
    assert before.workers_peak_bytes is None
    # ... which is measured when passed explicitly
    with PeakMemory(client=client) as explicit:
        assert client.submit(sum, [1, 2]).result() == 3
    max_rss = client.run(_max_rss)
    assert 0 < explicit.workers_peak_bytes <= sum(max_rss.values()) + 2 * SLACK
    assert set(explicit.per_worker_peak_bytes) == set(max_rss)


def test_a_closed_client_is_skipped_quietly(cluster):
    from distributed import Client

    cl, _ = cluster
    with Client(cl.scheduler_address, set_as_default=False) as c:
        wm = WorkerMemory(c)
    wm.sample()
    assert wm.peak_bytes is None and wm.n_samples == 0
    with pytest.raises(ValueError, match=r"needs a connected distributed\.Client"):
        worker_memory(None)


def test_workflow_report_includes_the_workers(tmp_path):
    """The run manifest carries the workers' peak next to the process tree's."""
    from distsketch.workflow import run_workflow

    X = np.random.default_rng(0).normal(size=(400, 3))
    arr = zarr.create_array(store=str(tmp_path / "X.zarr"), shape=X.shape, dtype=X.dtype,
                            chunks=(100, 3))
    arr[...] = X
    cfg = {"name": "t", "input": str(tmp_path / "X.zarr"), "segment_rows": 200,
           "method": {"name": "RandomFourierFeatures", "params": {"n_components": 8}},
           "outputs": {"dir": str(tmp_path / "out")},
           "report": {"kernel_error": False, "png": False}}
    # a worker inside this process (it has distsketch imported already): its memory is
    # this process's, bounded by this process's own peak
    local = {"kind": "local", "n_workers": 1, "processes": False,
             "dashboard_address": "127.0.0.1:0"}
    messages: list[str] = []
    res = run_workflow(cfg | {"cluster": local}, log=messages.append)
    workers = res.manifest["workers_peak_memory_bytes"]
    assert 0 < workers <= _max_rss() + SLACK
    # the run's log names the dashboard of the cluster it started
    dashboards = [m for m in messages if m.startswith("Dask dashboard: http://")]
    assert len(dashboards) == (1 if importlib.util.find_spec("bokeh") else 0)
    sync = run_workflow(cfg | {"cluster": "sync", "outputs": {"dir": str(tmp_path / "o2")}},
                        log=lambda m: None)
    assert sync.manifest["workers_peak_memory_bytes"] is None
