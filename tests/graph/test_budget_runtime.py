import dask
import dask.array as da
import numpy as np
import pytest
from threadpoolctl import threadpool_info

from distsketch.errors import ConfigError
from distsketch.graph import compute, map_rows, rows_for_budget, task_memory_budget


def test_budget_from_config_and_env(monkeypatch):
    monkeypatch.setenv("DISTSKETCH_TASK_MEMORY", "3MiB")
    assert task_memory_budget() == 3 * 2**20
    with dask.config.set({"distsketch.task-memory": 12345}):
        assert task_memory_budget() == 12345
    with dask.config.set({"distsketch.task-memory": "lots"}), pytest.raises(ConfigError):
        task_memory_budget()


def test_rows_for_budget():
    assert rows_for_budget(100, 0, budget=10_000) == 100
    assert rows_for_budget(100, 5_000, budget=10_000) == 50
    assert rows_for_budget(100, 20_000, budget=10_000) == 0


def _blas_threads(block, offset):
    n = max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")
    return np.full((block.shape[0], 1), float(n))


def test_blas_pinned_to_one_thread_inside_tasks():
    X = da.ones((40, 2), chunks=(10, 2))
    out = map_rows(_blas_threads, X, n_out=1, dtype=np.float64)
    for sched in ("sync", "threads"):
        (res,) = compute(out, progress=False, scheduler=sched)
        assert np.all(res == 1.0)
