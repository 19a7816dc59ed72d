"""Row sources travel with the array they re-read, with no registry to fill or bound."""

from __future__ import annotations

import io
import pickle
import sys
import threading

import cloudpickle
import dask
import dask.array as da
import numpy as np
import pytest

from distsketch.footprint import Footprint
from distsketch.graph import (
    PROGRESS_KEY,
    RowSource,
    derive_row_source,
    hstack_blocks,
    plan_rows,
    progress_enabled,
    register_row_source,
    row_source_of,
)
from distsketch.io import open_array, write_array


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    X = np.random.default_rng(3).standard_normal((40_000, 16)).astype(np.float32)
    path = tmp_path_factory.mktemp("sources") / "x.zarr"
    write_array(X, path, chunk_rows=1_000)
    return X, str(path)


def test_an_opened_store_carries_its_row_source(store):
    _, path = store
    Xd = open_array(path)
    source = row_source_of(Xd)
    assert isinstance(source, RowSource)
    assert source.unit == 1_000 and source.where == path and source.row_bytes == 16 * 4
    # an array derived from it reaches the store (its chunk rows), but cannot re-read itself
    cast = Xd.astype(np.float64)
    assert row_source_of(cast) is source
    assert row_source_of(cast, derived=False) is None
    assert row_source_of(np.zeros((3, 2))) is None
    assert row_source_of(da.zeros((4, 2), chunks=2)) is None


def test_a_store_is_still_re_read_after_many_other_arrays_got_sources(store):
    # a bounded registry forgot the first stores once 256 others were registered: their
    # blocks were then sliced out of large reads and no longer aligned to the chunks
    X, path = store
    Xd = open_array(path, block_rows=20_000)
    for i in range(300):
        other = da.zeros((10, 2), chunks=5) + i
        register_row_source(other, lambda rows, o=other: o.rechunk({0: rows}), 5, where=f"#{i}")
    with dask.config.set({"distsketch.task-memory": "200KiB"}):
        blocks = plan_rows(Xd, footprint=Footprint(per_row=64.0))
    assert blocks.data.chunks[0] == (3_000,) * 13 + (1_000,)
    assert not any("rechunk" in str(key) for key in dict(blocks.data.__dask_graph__()))
    np.testing.assert_array_equal(blocks.data.compute(scheduler="sync"), X)


def test_a_row_source_stays_on_the_client_when_its_graph_is_pickled(store):
    # a graph sent to a distributed scheduler is pickled with its layers; a source (whose
    # derive step may hold anything, here a lock) must not travel with it
    X, path = store
    Xd = open_array(path)
    lock = threading.Lock()

    def stack(A, held=lock):
        return hstack_blocks(A, np.ones((A.shape[0], 1), dtype=np.float32))

    Y = derive_row_source(stack(Xd), Xd, stack)
    assert row_source_of(Y, derived=False) is not None
    with pytest.raises(TypeError, match="lock"):
        pickle.dumps(lock)
    shipped = pickle.loads(cloudpickle.dumps(Y.dask))
    assert all(getattr(layer, "distsketch_row_source", None) is None
               for layer in shipped.layers.values())
    assert pickle.loads(pickle.dumps(row_source_of(Xd))) is None
    # the client's own arrays keep their sources
    assert row_source_of(Xd) is not None and row_source_of(Y, derived=False) is not None
    got = da.Array(shipped, Y.name, Y.chunks, meta=Y._meta).compute(scheduler="sync")
    np.testing.assert_array_equal(got[:, :16], X)


def test_progress_default_is_the_dask_config(monkeypatch):
    monkeypatch.delenv("DISTSKETCH_PROGRESS", raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # not a terminal: off by default
    assert progress_enabled(None) is False
    with dask.config.set({PROGRESS_KEY: True}):
        assert progress_enabled(None) is True
        assert progress_enabled(False) is False  # an explicit argument wins
    with dask.config.set({PROGRESS_KEY: "false"}):  # as DASK_DISTSKETCH__PROGRESS=false gives
        monkeypatch.setenv("DISTSKETCH_PROGRESS", "1")  # the old variable only where unset
        assert progress_enabled(None) is False
    assert progress_enabled(None) is True  # config unset: the deprecated variable is read
