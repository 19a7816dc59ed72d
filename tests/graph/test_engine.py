"""The device pass engine: bitwise the dask path, bounded reads, the dask path's errors.

NumPy is the device here (no GPU in these tests): the reader pool, the ring,
the merge tree, the per-worker split and the error paths are what run.
"""

from __future__ import annotations

import re
import threading

import dask
import dask.array as da
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distsketch.errors import ConfigError, InputError, StoreError
from distsketch.graph.blocks import merge_tree
from distsketch.graph.engine import (
    ENGINE_KEY,
    TreeFold,
    engine_choice,
    merge_levels,
    range_level,
    reduce_with_engine,
)
from distsketch.graph.plan import plan_rows, reduce_blocks
from distsketch.graph.planner import record_plans
from distsketch.io import open_array, write_array
from distsketch.summaries.base import Summary
from distsketch.summaries.covariance import Covariance
from distsketch.summaries.frequent_directions import FrequentDirectionsSummary
from distsketch.summaries.landmarks import UniformLandmarks
from distsketch.summaries.moments import ColumnMoments
from distsketch.summaries.rff_covariance import BlockedCovariance, RFFRows

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

RNG = np.random.default_rng(0)
X = RNG.normal(size=(3000, 6)).astype(np.float32)
W = RNG.normal(size=(6, 24)).astype(np.float32)
B = RNG.uniform(0, 2 * np.pi, size=24).astype(np.float32)

SUMMARIES = {
    "covariance": (lambda: Covariance(), ()),
    "moments": (lambda: ColumnMoments(), ()),
    "rff-covariance": (lambda: BlockedCovariance(RFFRows(), n_columns=24), (W, B)),
    "fd": (lambda: FrequentDirectionsSummary(6, RFFRows(), n_columns=24), (W, B)),
    "landmarks": (lambda: UniformLandmarks(17, seed=3), ()),
}


def _equal(a, b) -> bool:
    # bitwise: same structure, same dtypes, same bits
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _both(summary, data, operands, **kw):
    """(dask path's state, engine's state, whether the engine ran)."""
    ref = reduce_blocks(summary, data, *operands, **kw)
    with dask.config.set({ENGINE_KEY: "device"}), record_plans() as plans:
        got = reduce_blocks(summary, data, *operands, **kw)
    return ref, got, any(p.name.endswith("-engine") for p in plans)


@pytest.fixture(scope="module")
def zarr_x(tmp_path_factory):
    return str(write_array(X, tmp_path_factory.mktemp("engine") / "x.zarr", chunk_rows=250))


@pytest.mark.parametrize("kind", list(SUMMARIES))
@pytest.mark.parametrize("block_rows", [None, 100, 250, 333, 3000])
def test_engine_on_a_zarr_store_is_bitwise_the_dask_path(zarr_x, kind, block_rows):
    make, operands = SUMMARIES[kind]
    ref, got, ran = _both(make(), open_array(zarr_x), operands, block_rows=block_rows,
                          split_every=2)
    assert ran
    assert _equal(ref, got)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 700), chunk=st.integers(1, 200), block=st.integers(1, 300),
       split=st.integers(2, 5), kind=st.sampled_from(sorted(SUMMARIES)),
       start=st.integers(0, 10**6))
def test_engine_on_in_memory_dask_is_bitwise_the_dask_path(n, chunk, block, split, kind, start):
    make, operands = SUMMARIES[kind]
    data = da.from_array(X[:n], chunks=(chunk, 4))  # two column blocks: joined per row block
    ref, got, ran = _both(make(), data, operands, block_rows=block, split_every=split,
                          row_start=start)
    assert ran
    assert _equal(ref, got)


def test_the_merge_order_is_the_trees_not_a_running_sum():
    # float64 sums in another order differ in their last bits here: equality above is the tree's
    X64 = np.random.default_rng(1).lognormal(size=(3000, 6))
    data = da.from_array(X64, chunks=(75, 6))
    summary = Covariance()
    ref, got, _ = _both(summary, data, (), split_every=3)
    states = [summary.chunk(X64[i:i + 75], i) for i in range(0, 3000, 75)]
    running = states[0]
    for s in states[1:]:
        running = summary.merge([running, s])
    assert _equal(ref, got)
    assert not _equal(running["ztz"], got["ztz"])


class _Sym(Summary):
    """States are the merge tree itself: leaves are ints, a merge is a tuple of its inputs."""

    def chunk(self, block, row_offset, *operands):
        return row_offset

    def merge(self, states):
        return tuple(states)


@pytest.mark.parametrize("fan", [2, 3, 8])
@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 9, 26, 64, 65, 100])
def test_tree_fold_builds_merge_tree_and_worker_ranges_keep_it(n, fan):
    dsk, root = merge_tree([("leaf", i) for i in range(n)], fan, tuple, tuple, "root")

    def build(key):  # the dask tree, evaluated symbolically
        if isinstance(key, tuple) and key[0] == "leaf":
            return key[1]
        return tuple(build(k) for k in dsk[key][1])

    want = build(root)
    fold = TreeFold(tuple, fan, merge_levels(n, fan))
    for i in range(n):
        fold.push(i)
    assert fold.root() == want
    for workers in (1, 2, 3, 5):  # workers' nodes at the range level, merged at the top
        level = range_level(n, fan, workers)
        top = TreeFold(tuple, fan, merge_levels(n, fan))
        for a in range(0, n, fan ** level):
            part = TreeFold(tuple, fan, level)
            for i in range(a, min(n, a + fan ** level)):
                part.push(i)
            (node,) = part.result()
            top.push(node, level)
        assert top.root() == want


class _Counting:
    """An array-like whose reads count how many blocks were read and not yet reduced."""

    def __init__(self, values):
        self.values = values
        self.shape, self.dtype, self.ndim = values.shape, values.dtype, values.ndim
        self.lock = threading.Lock()
        self.read = 0
        self.reduced = 0
        self.peak = 0

    def __getitem__(self, key):
        with self.lock:
            self.read += 1
            self.peak = max(self.peak, self.read - self.reduced)
        return self.values[key]


class _CountingSum(Summary):
    def __init__(self, source):
        self.source = source

    def chunk(self, block, row_offset, *operands):
        with self.source.lock:
            self.source.reduced += 1
        return block.sum(axis=0, dtype=np.float64)

    def merge(self, states):
        return np.sum(states, axis=0)

    def __dask_tokenize__(self):
        return id(self)


@pytest.mark.parametrize("readers, ring", [(1, 1), (2, 3), (4, 4)])
def test_at_most_ring_blocks_are_in_flight(readers, ring):
    source = _Counting(X)
    data = da.from_array(source, chunks=(50, 6), asarray=False, lock=False)
    blocks = plan_rows(data)
    source.read = 0  # dask reads an empty slice for the array's meta
    state = reduce_with_engine(blocks, _CountingSum(source), readers=readers, ring=ring)
    assert source.read == source.reduced == 60  # each block read once
    assert 1 <= source.peak <= ring
    np.testing.assert_allclose(state, X.sum(axis=0, dtype=np.float64), rtol=1e-12)


def test_a_chunk_shared_by_two_blocks_is_read_once():
    source = _Counting(X)
    data = da.from_array(source, chunks=(50, 6), asarray=False, lock=False)
    blocks = plan_rows(data, block_rows=30)  # blocks straddle chunks: 100 blocks, 60 chunks
    source.read = 0
    state = reduce_with_engine(blocks, _CountingSum(source), readers=3, ring=4)
    assert source.reduced == 100
    assert source.read == 60
    np.testing.assert_allclose(state, X.sum(axis=0, dtype=np.float64), rtol=1e-12)


def _engine_threads():
    return [t for t in threading.enumerate() if t.name.startswith("distsketch-engine-reader")]


def test_a_corrupt_chunk_is_the_dask_paths_store_error_and_no_reader_is_left(tmp_path):
    path = write_array(X, tmp_path / "bad.zarr", chunk_rows=100)
    (path / "X" / "c" / "17" / "0").write_bytes(b"garbage" * 5)
    with pytest.raises(StoreError) as dask_err:
        reduce_blocks(Covariance(), open_array(str(path)), block_rows=100)
    before = set(threading.enumerate())
    with dask.config.set({ENGINE_KEY: "device"}), pytest.raises(StoreError) as engine_err:
        reduce_blocks(Covariance(), open_array(str(path)), block_rows=100)
    assert str(engine_err.value) == str(dask_err.value)
    assert "rows 1700..1800" in str(engine_err.value)
    assert not _engine_threads()
    assert set(threading.enumerate()) <= before


def test_a_nan_row_is_the_dask_paths_input_error_and_no_reader_is_left():
    bad = X.copy()
    bad[1234, 2] = np.nan
    data = da.from_array(bad, chunks=(100, 6))
    with pytest.raises(InputError) as dask_err:
        reduce_blocks(Covariance(), data)
    with dask.config.set({ENGINE_KEY: "device"}), pytest.raises(InputError) as engine_err:
        reduce_blocks(Covariance(), data)
    assert str(engine_err.value) == str(dask_err.value)
    assert "1234" in str(engine_err.value)
    assert not _engine_threads()


@pytest.mark.parametrize("value", ["gpu", 3, "devices"])
def test_an_unknown_engine_is_a_config_error_naming_the_choices(value):
    with dask.config.set({ENGINE_KEY: value}), pytest.raises(ConfigError) as err:
        reduce_blocks(Covariance(), da.from_array(X, chunks=(500, 6)))
    assert repr(value) in str(err.value)
    for name in ("'dask'", "'device'", "'auto'"):
        assert name in str(err.value)


def test_engine_choice_reads_the_config_and_auto_keeps_numpy_blocks_on_dask():
    assert engine_choice() == "dask"
    with dask.config.set({ENGINE_KEY: " Auto "}):
        assert engine_choice() == "auto"
        with record_plans() as plans:
            reduce_blocks(Covariance(), da.from_array(X, chunks=(500, 6)))
    assert plans and not any(p.name.endswith("-engine") for p in plans)


def test_one_engine_task_per_worker_is_bitwise_the_dask_path():
    distributed = pytest.importorskip("distributed")
    data = da.from_array(X, chunks=(60, 6))
    summary = BlockedCovariance(RFFRows(), n_columns=24)
    with distributed.LocalCluster(n_workers=3, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        ref = reduce_blocks(summary, data, W, B, split_every=2)
        with dask.config.set({ENGINE_KEY: "device"}), \
                distributed.get_task_stream(client) as stream:
            got = reduce_blocks(summary, data, W, B, split_every=2)
    assert _equal(ref, got)
    engines = [t for t in stream.data if "_engine_task" in str(t["key"])]
    assert len(engines) == len(stream.data) == 3  # one engine task per worker, nothing else
    assert len({t["worker"] for t in engines}) == 3


def test_estimator_fits_from_a_store_are_bitwise_those_of_the_dask_path(zarr_x, tmp_path):
    from distsketch import RandomFourierFeatures, SketchedKernelRidge, StreamingKernelPCA

    y = str(write_array(X @ W[:, 0], tmp_path / "y.zarr", chunk_rows=250))

    def fits():
        krr = SketchedKernelRidge(features=RandomFourierFeatures(n_components=24, random_state=0),
                                  random_state=0).fit(zarr_x, y)
        pca = StreamingKernelPCA(n_components=3, n_random_features=24, sketch_size=8,
                                 method="fd", random_state=0).fit(zarr_x)
        return krr, pca

    ref = fits()
    with dask.config.set({ENGINE_KEY: "device"}), record_plans() as plans:
        got = fits()
    assert sum(p.name.endswith("-engine") for p in plans) >= 2
    for a, b in zip(ref, got):
        learned = [k for k, v in vars(a).items() if k.endswith("_") and isinstance(v, np.ndarray)]
        assert learned
        for k in learned:
            assert _equal(getattr(a, k), getattr(b, k)), k
    np.testing.assert_array_equal(ref[0].predict(X), got[0].predict(X))


class _Event:
    def __init__(self, counts, name):
        self.counts, self.name = counts, name

    def synchronize(self):
        self.counts[f"sync-{self.name}"] += 1


class _Stream:
    def __init__(self, counts, non_blocking=False):
        self.counts, self.non_blocking = counts, non_blocking
        self.name = None

    def record(self):
        return _Event(self.counts, self.name)

    def wait_event(self, event):
        self.counts[f"{self.name}-waits-{event.name}"] += 1

    def synchronize(self):
        self.counts[f"sync-stream-{self.name}"] += 1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _DeviceArray(np.ndarray):
    def set(self, arr, stream=None):
        assert stream is not None and stream.non_blocking and stream.name == "copy"
        assert not arr.flags.owndata  # a view of the ring's pinned buffer
        np.copyto(self, arr)


def _stand_in_cupy(monkeypatch, pinned=bytearray):
    """A synchronous stand-in of CuPy's pinned memory, streams and events, installed as
    ``cupy``; returns the counter of the waits it saw.  It checks the stage's data path
    and which waits it issues, not CUDA's own semantics."""
    import sys
    import types
    from collections import Counter

    counts: Counter = Counter()
    streams = iter(["copy", "compute"])

    def stream(non_blocking=False):
        s = _Stream(counts, non_blocking)
        s.name = next(streams)
        return s

    fake = types.SimpleNamespace(
        cuda=types.SimpleNamespace(Stream=stream, alloc_pinned_memory=lambda n: pinned(n),
                                   get_current_stream=lambda: _Stream(counts)),
        empty=lambda n, dtype: np.empty(n, dtype).view(_DeviceArray))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    return counts


def test_the_cuda_stage_wiring_with_a_stand_in_cupy(monkeypatch):
    counts = _stand_in_cupy(monkeypatch)
    data = da.from_array(X, chunks=(100, 6))
    ref = reduce_blocks(Covariance(), data)
    blocks = plan_rows(data)
    with dask.config.set({"distsketch.device": "cuda"}):
        got = reduce_with_engine(blocks, Covariance(), readers=2, ring=3)
    assert _equal(ref, got)
    n, ring = 30, 3
    assert counts["compute-waits-copy"] == n  # each chunk waits for its block's copy
    assert counts["copy-waits-compute"] == n - ring  # a device slot is refilled after its compute
    assert counts["sync-copy"] == n - ring  # a pinned slot is refilled after its copy
    assert counts["sync-stream-compute"] == 1  # one wait for the state, at the end


class _DeviceBlock:
    """A device block stand-in (not a NumPy array): ``get`` copies it into a host buffer."""

    def __init__(self, values, counts):
        self.values, self.counts = values, counts
        self.shape, self.dtype, self.size, self.nbytes = (values.shape, values.dtype,
                                                          values.size, values.nbytes)

    def get(self, stream=None, out=None, blocking=True):
        assert stream is not None and stream.non_blocking and stream.name == "copy"
        assert not blocking and not out.flags.owndata  # asynchronous, into a pinned buffer
        self.counts["copies"] += 1
        np.copyto(out, self.values)


def test_the_cuda_stage_writes_back_through_pinned_buffers_with_a_stand_in_cupy(monkeypatch):
    # the writer's data path with a synchronous stand-in of CuPy: device blocks are copied on
    # the copy stream into the ring's pinned buffers, each write waits for its copy's event
    from distsketch.graph.engine import write_with_engine

    def pinned(n):
        counts["pinned"] += 1
        return bytearray(n)

    counts = _stand_in_cupy(monkeypatch, pinned)
    data = da.from_array(X, chunks=(100, 6)).map_blocks(
        lambda b: _DeviceBlock(b, counts), dtype=X.dtype, meta=np.empty((0, 0), X.dtype))
    out = np.zeros_like(X)
    with dask.config.set({"distsketch.device": "cuda"}):
        write_with_engine(data, out, readers=2, writers=2, ring=3)
    np.testing.assert_array_equal(out, X)
    n = 30
    assert counts["copies"] == n
    assert counts["sync-copy"] == n  # each write waits for its block's copy
    assert counts["sync-stream-None"] == n  # each reader finishes its block's device work
    assert counts["pinned"] == 3  # one pinned buffer per ring slot, reused


def test_an_engine_pass_without_a_fit_is_shown_as_dasks_bar(capsys):
    data = da.from_array(X, chunks=(300, 6))
    capsys.readouterr()
    with dask.config.set({ENGINE_KEY: "device"}), record_plans() as plans:
        reduce_blocks(Covariance(), data, progress=True)
        quiet = reduce_blocks(Covariance(), data, progress=False)
    (plan, _) = plans
    err = capsys.readouterr().err
    assert plan.n_blocks == 10
    assert re.fullmatch(r"\[#{40}\] \| 100% Completed \| .+ \| covariance-engine: 10 block\(s\)\n",
                        err), err
    assert _equal(quiet, reduce_blocks(Covariance(), data))
