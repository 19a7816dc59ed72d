"""Writers on the pass engine: the dask path's store bit for bit, its errors, bounded blocks.

NumPy is the device here: the reader pool, the ring, the writer pool, the
per-worker split and the error paths are what run.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import threading
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
import zarr

from distsketch.errors import InputError
from distsketch.graph.engine import ENGINE_KEY, write_blocks, write_with_engine
from distsketch.graph.engine.source import BlockSource
from distsketch.graph.engine.stages import HostStage
from distsketch.graph.progress import PROGRESS_KEY, fit_progress
from distsketch.io import open_array, write_array

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

RNG = np.random.default_rng(4)
X64 = RNG.normal(size=(1000, 6))
ENGINE = {ENGINE_KEY: "device"}


def _files(path: Path) -> dict[str, bytes]:
    """Every chunk file of the written array, and its metadata without the attributes (which
    hold the provenance: the output's path and the write's time)."""
    root = Path(path) / "X"
    out = {p.relative_to(root).as_posix(): p.read_bytes()
           for p in sorted((root / "c").rglob("*")) if p.is_file()}
    meta = json.loads((root / "zarr.json").read_text())
    meta.pop("attributes")
    out["zarr.json"] = json.dumps(meta, sort_keys=True).encode()
    return out


def _engine_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("distsketch-engine-")]


def _both(make, where: Path, **kw) -> tuple[Path, Path]:
    """(the dask path's store, the engine's store) of ``write_array(make(), ...)``."""
    ref = write_array(make(), where / "dask.zarr", **kw)
    with dask.config.set(ENGINE):
        got = write_array(make(), where / "engine.zarr", progress=True, **kw)
    return ref, got


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """Zarr stores of X (1-D and 2-D, float32 and float64) in 130-row chunks."""
    d = tmp_path_factory.mktemp("sources")
    out = {}
    for dtype in (np.float32, np.float64):
        for ndim in (1, 2):
            values = (X64 if ndim == 2 else X64[:, 0]).astype(dtype)
            out[dtype, ndim] = str(write_array(values, d / f"{np.dtype(dtype).name}-{ndim}.zarr",
                                               chunk_rows=130))
    return out


@pytest.mark.parametrize("chunk_rows", [None, 64, 130, 333, 1000])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ndim", [1, 2])
@pytest.mark.parametrize("backing", ["zarr", "memory"])
def test_engine_store_is_bitwise_the_dask_paths(stores, tmp_path, capsys, chunk_rows, dtype,
                                                ndim, backing):
    def make():
        if backing == "zarr":
            return open_array(stores[dtype, ndim], targets=ndim == 1)
        values = (X64 if ndim == 2 else X64[:, 0]).astype(dtype)
        return da.from_array(values, chunks=(90, 4)[:ndim])  # two column blocks when 2-D

    capsys.readouterr()
    ref, got = _both(make, tmp_path, chunk_rows=chunk_rows)
    # the engine wrote it: its pass line, with the number of row chunks
    rows = chunk_rows or make().chunks[0][0]  # default: the first dask block's rows
    assert f"write-engine: {-(-1000 // rows)} block(s)" in capsys.readouterr().err
    a, b = _files(ref), _files(got)
    assert a.keys() == b.keys() and len(a) >= 2
    assert a == b
    arr = zarr.open_array(str(got), path="X", mode="r")
    assert arr.dtype == dtype and arr.chunks[0] == rows
    np.testing.assert_array_equal(arr[...], make().compute())


def test_rff_features_written_by_the_cli_are_bitwise_the_dask_paths(stores, tmp_path, capsys):
    import distsketch.cli as cli
    from distsketch import RandomFourierFeatures

    X = open_array(stores[np.float32, 2]).compute()
    RandomFourierFeatures(n_components=40, gamma=0.3, random_state=2).fit(X).save(
        tmp_path / "rff.zarr")
    args = ["transform", str(tmp_path / "rff.zarr"), stores[np.float32, 2]]
    extra = ["--chunk-rows", "300", "--cluster", "sync", "--progress"]
    capsys.readouterr()
    assert cli.main([*args, str(tmp_path / "dask.zarr"), *extra]) == 0
    assert "write-engine" not in capsys.readouterr().err
    with dask.config.set(ENGINE):
        assert cli.main([*args, str(tmp_path / "engine.zarr"), *extra]) == 0
    assert "write-engine: 4 block(s)" in capsys.readouterr().err
    a, b = _files(tmp_path / "dask.zarr"), _files(tmp_path / "engine.zarr")
    assert a.keys() == b.keys() and a == b
    want = RandomFourierFeatures(n_components=40, gamma=0.3, random_state=2).fit(X).transform(X)
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "engine.zarr"), path="X")[...],
                                  want)


def test_a_nan_row_is_the_dask_paths_input_error_and_leaves_nothing(tmp_path):
    bad = X64.astype(np.float32)
    bad[613, 4] = np.nan
    for path in ("dask", "engine"):
        (tmp_path / path).mkdir()
    with pytest.raises(InputError) as dask_err:
        write_array(da.from_array(bad, chunks=(100, 6)), tmp_path / "dask" / "out.zarr",
                    chunk_rows=70, stage="writing features")
    with dask.config.set(ENGINE), pytest.raises(InputError) as engine_err:
        write_array(da.from_array(bad, chunks=(100, 6)), tmp_path / "engine" / "out.zarr",
                    chunk_rows=70, stage="writing features")
    assert str(engine_err.value) == str(dask_err.value)
    assert "first bad row 613" in str(engine_err.value) and "rows 560..630" in str(engine_err.value)
    assert list((tmp_path / "engine").iterdir()) == []  # no output, no temporary
    assert not _engine_threads()


class _Boom(Exception):
    pass


def _fail_at(first_row: int):
    def func(block, block_info=None):
        if block_info[0]["array-location"][0][0] == first_row:
            raise _Boom(f"cannot compute the block at row {first_row}")
        return block
    return func


def test_a_failing_reader_is_raised_unchanged_and_leaves_no_thread_or_output(tmp_path):
    data = da.from_array(X64, chunks=(100, 6)).map_blocks(_fail_at(700), dtype=X64.dtype)
    with pytest.raises(_Boom) as dask_err:
        write_array(data, tmp_path / "dask.zarr", chunk_rows=100)
    (tmp_path / "engine").mkdir()
    before = set(threading.enumerate())
    with dask.config.set(ENGINE), pytest.raises(_Boom) as engine_err:
        write_array(data, tmp_path / "engine" / "out.zarr", chunk_rows=100)
    assert str(engine_err.value) == str(dask_err.value)
    assert list((tmp_path / "engine").iterdir()) == []
    assert not _engine_threads() and set(threading.enumerate()) <= before


def test_a_failing_writer_is_raised_unchanged_and_leaves_no_thread_or_output(tmp_path,
                                                                             monkeypatch):
    real = zarr.Array.__setitem__

    def setitem(self, key, value):
        rows = key[0] if isinstance(key, tuple) else key
        if isinstance(rows, slice) and rows.start == 400:
            raise OSError(f"no space left writing rows {rows.start}..{rows.stop}")
        return real(self, key, value)

    monkeypatch.setattr(zarr.Array, "__setitem__", setitem)
    data = da.from_array(X64, chunks=(100, 6))
    with pytest.raises(OSError) as dask_err:
        write_array(data, tmp_path / "dask.zarr", chunk_rows=100)
    (tmp_path / "engine").mkdir()
    with dask.config.set(ENGINE), pytest.raises(OSError) as engine_err:
        write_array(data, tmp_path / "engine" / "out.zarr", chunk_rows=100)
    assert str(engine_err.value) == str(dask_err.value) == "no space left writing rows 400..500"
    assert list((tmp_path / "engine").iterdir()) == []
    assert not _engine_threads()


class _CountingRows:
    """A getter counting the blocks read, and a target counting those written."""

    def __init__(self, values: np.ndarray, rows: int, ring: int):
        self.values, self.rows, self.ring = values, rows, ring
        self.shape, self.dtype, self.ndim = values.shape, values.dtype, values.ndim
        self.out = np.zeros_like(values)
        self.cond = threading.Condition()
        self.read = self.written = self.peak = 0

    def __getitem__(self, key):
        with self.cond:
            self.read += 1
            self.peak = max(self.peak, self.read - self.written)
            self.cond.notify_all()
        return self.values[key]

    def __setitem__(self, key, block):
        i = key.start // self.rows
        n = -(-self.shape[0] // self.rows)
        with self.cond:
            # hold block i's write until the pipeline is full: blocks i..i+ring-1 read
            assert self.cond.wait_for(lambda: self.read >= min(n, i + self.ring), timeout=60)
        self.out[key] = block
        with self.cond:
            self.written += 1


@pytest.mark.parametrize("readers, writers, ring", [(1, 1, 1), (2, 3, 3), (4, 2, 5)])
def test_at_most_ring_blocks_are_held(readers, writers, ring):
    counting = _CountingRows(X64, 40, ring)
    data = da.from_array(counting, chunks=(40, 6), asarray=False, lock=False)
    counting.read = 0  # dask reads an empty slice for the array's meta
    write_with_engine(data, counting, readers=readers, writers=writers, ring=ring)
    assert counting.read == counting.written == 25  # each block read and written once
    assert counting.peak == ring  # the ring fills and never overflows
    np.testing.assert_array_equal(counting.out, X64)


def test_write_blocks_checks_each_block_at_its_rows_in_the_writer_threads():
    seen = []

    def check(block, start):
        seen.append((start, block.shape[0], threading.current_thread().name))

    out = np.zeros_like(X64)
    data = da.from_array(X64, chunks=(300, 6))
    write_blocks(BlockSource.of_array(data), [0, 300, 600, 900], out, HostStage(), check=check,
                 readers=2, writers=2, ring=3)
    np.testing.assert_array_equal(out, X64)
    assert sorted(s[:2] for s in seen) == [(0, 300), (300, 300), (600, 300), (900, 100)]
    assert all(s[2].startswith("distsketch-engine-writer") for s in seen)


def test_one_writer_task_per_worker_writes_the_dask_paths_store(tmp_path):
    distributed = pytest.importorskip("distributed")
    data = da.from_array(X64.astype(np.float32), chunks=(100, 6))
    out = io.StringIO()
    with distributed.LocalCluster(n_workers=3, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        ref = write_array(data, tmp_path / "dask.zarr", chunk_rows=70)
        with dask.config.set({**ENGINE, PROGRESS_KEY: True}), contextlib.redirect_stderr(out), \
                distributed.get_task_stream(client) as stream, fit_progress("fit"):
            got = write_array(data, tmp_path / "engine.zarr", chunk_rows=70)
    a, b = _files(ref), _files(got)
    assert a.keys() == b.keys() and a == b
    writers = [t for t in stream.data if "_write_task" in str(t["key"])]
    assert len(writers) == len(stream.data) == 3  # one engine writer per worker, nothing else
    assert len({t["worker"] for t in writers}) == 3
    # on a cluster the fit's report shows the pass with its duration
    assert re.search(r"^fit: pass 1 \(write-engine\): in [\d.]+ s$", out.getvalue(), re.M)


def test_progress_off_shows_nothing(tmp_path):
    err = io.StringIO()
    with dask.config.set(ENGINE), contextlib.redirect_stderr(err):
        write_array(X64, tmp_path / "quiet.zarr", chunk_rows=100, progress=False)
    assert err.getvalue() == ""
