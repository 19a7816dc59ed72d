"""The row cache: which arrays are held, within which budget, and the config's errors."""

import dask
import dask.array as da
import numpy as np
import pytest

from distsketch.errors import ConfigError
from distsketch.graph.budget import cluster_resources, resources_scope
from distsketch.graph.row_cache import CACHE_KEY, CACHE_SHARE, cache_budget, cached_rows

X = np.arange(600, dtype=np.float64).reshape(200, 3)


class CountingRows:
    """An array-like whose row reads dask counts (by first row)."""

    def __init__(self, a):
        self.a, self.shape, self.dtype, self.ndim = a, a.shape, a.dtype, a.ndim
        self.reads = 0

    def __getitem__(self, key):
        if key[0].stop > key[0].start:
            self.reads += 1
        return self.a[key]


def _lazy():
    source = CountingRows(X)
    return source, da.from_array(source, chunks=(50, 3), asarray=False, fancy=False)


def test_a_lazy_array_is_read_once_then_served_from_memory():
    source, Xd = _lazy()
    with cached_rows(Xd, "test") as held:
        assert source.reads == 4  # the one read of each block
        for _ in range(3):
            np.testing.assert_array_equal(held.compute(), X)
            assert float(held.sum().compute()) == float(X.sum())
        assert held.chunks == Xd.chunks and held.dtype == Xd.dtype
    assert source.reads == 4  # no pass after the first read the source again


@pytest.mark.parametrize("setting", [False, "off", "0", 0, "599B"])
def test_off_or_a_budget_below_the_rows_leaves_the_array_lazy(setting):
    source, Xd = _lazy()
    assert Xd.nbytes == 4800
    with dask.config.set({CACHE_KEY: setting}), cached_rows(Xd) as held:
        assert held is Xd and source.reads == 0


def test_a_budget_of_exactly_the_rows_holds_them():
    source, Xd = _lazy()
    with dask.config.set({CACHE_KEY: "4800B"}), cached_rows(Xd) as held:
        assert held is not Xd and source.reads == 4


@pytest.mark.parametrize("value", [X, da.from_array(X, chunks=(50, 3))])
def test_rows_already_in_memory_are_not_copied(value):
    with cached_rows(value) as held:
        assert held is value


def test_auto_takes_a_share_of_the_tasks_memory():
    with dask.config.set({"distsketch.task-memory": "1MiB", "num_workers": 3}), \
            resources_scope():
        res = cluster_resources()
        assert cache_budget()[0] == int(CACHE_SHARE * res.task_bytes * res.threads) \
            == int(CACHE_SHARE * 2**20 * 3)
    with dask.config.set({CACHE_KEY: "2GiB"}):
        assert cache_budget() == (2 * 2**30, CACHE_KEY)


@pytest.mark.parametrize("value", ["lots", "-5", -1, [1]])
def test_a_setting_that_is_no_size_is_a_config_error(value):
    with dask.config.set({CACHE_KEY: value}), pytest.raises(ConfigError, match=CACHE_KEY):
        cache_budget()


def test_the_read_that_fills_the_cache_is_a_pass_of_the_fit_report(capsys):
    from distsketch.graph import PROGRESS_KEY
    from distsketch.graph.progress import fit_progress

    source, Xd = _lazy()
    capsys.readouterr()
    with dask.config.set({PROGRESS_KEY: True, "scheduler": "threads"}), fit_progress("Fit"), \
            cached_rows(Xd, "test-rows") as held:
        float(held.sum().compute())
    err = capsys.readouterr().err.splitlines()
    passes = [line for line in err if ": pass " in line]
    assert passes[0].startswith("Fit: pass 1 (test-rows-cache): 4 task(s)"), err
    assert len(passes) == 2 and source.reads == 4
