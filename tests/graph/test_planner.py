"""The block planner: memory and task-count rules, the cluster's budget and
threads, override precedence, splitting of NumPy and dask inputs, store
alignment, merge fan-in and depth, lean graphs and the visible plan."""

from __future__ import annotations

import logging

import dask
import dask.array as da
import numpy as np
import pytest

from distsketch.errors import MemoryBudgetError
from distsketch.footprint import Footprint
from distsketch.graph import (
    BlockPlan,
    check_task_memory,
    choose_block_rows,
    choose_fan_in,
    cluster_resources,
    compute,
    last_plan,
    map_blocks,
    plan_rows,
    record_plans,
    reduce_blocks,
    task_memory_budget,
    tree_reduce,
)
from distsketch.graph import budget as budget_mod
from distsketch.graph.planner import tree_depth
from distsketch.io import open_array, write_array
from distsketch.summaries.sums import SumSummary

MiB = 2**20


def _double(block, offset):
    return 2.0 * np.asarray(block, dtype=np.float64)


def _colsum(block, offset):
    return {"s": np.asarray(block, dtype=np.float64).sum(axis=0), "n": block.shape[0]}


class _FakeClient:
    """What the planner asks of a distributed Client: its workers."""

    def __init__(self, workers):
        self.workers = workers

    def scheduler_info(self, n_workers=5):
        return {"workers": {f"tcp://w{i}": w for i, w in enumerate(self.workers)}}


@pytest.fixture
def cluster(monkeypatch):
    def attach(*workers):
        monkeypatch.setattr(budget_mod, "active_client", lambda: _FakeClient(list(workers)))
    return attach


# ----------------------------------------------------------------------------- memory rule

@pytest.mark.parametrize("bytes_per_row", [100.0, 4_096.0, 17_184.0, 3 * MiB])
@pytest.mark.parametrize("budget", [2 * MiB, 40 * MiB, 2 * 2**30])
@pytest.mark.parametrize("fixed", [0.0, 1.5 * MiB])
def test_planned_task_fits_the_budget_and_is_as_large_as_it_may(bytes_per_row, budget, fixed):
    plan = choose_block_rows(10**7, 400, bytes_per_row, fixed, budget=budget, n_threads=1)
    per_task = plan.block_rows * bytes_per_row + fixed
    if bytes_per_row + fixed > budget:
        # no block size fits: the plan says so and the check refuses
        assert plan.block_rows == 1 and plan.task_bytes > budget
        with pytest.raises(MemoryBudgetError, match="no block size fits"):
            check_task_memory("stage", plan.block_rows, bytes_per_row, fixed, budget=budget)
        return
    assert per_task <= budget and plan.task_bytes == int(per_task)
    if plan.limit == "memory budget":
        assert (plan.block_rows + 1) * bytes_per_row + fixed > min(budget, 256 * MiB)


def test_budget_error_names_the_cli_option_the_api_and_the_operator():
    with pytest.raises(MemoryBudgetError) as err:
        check_task_memory("rff", 150_000, 17_184.0, 0.0, budget=2 * 2**30)
    rows = (2 * 2**30) // 17_184
    assert f"--block-rows {rows}" in str(err.value) and f"block_rows={rows}" in str(err.value)
    with pytest.raises(MemoryBudgetError) as err:
        check_task_memory("fd", 10, 8.0, 3 * MiB, budget=2 * MiB)
    assert "operator itself needs 3.00 MiB" in str(err.value)
    assert "n_components" in str(err.value)


# ----------------------------------------------------------------------------- task-count rule

@pytest.mark.parametrize("threads", [1, 2, 16])
def test_enough_blocks_for_every_thread_when_rows_allow(threads):
    plan = choose_block_rows(4 * 10**6, 400, 4_400.0, budget=2 * 2**30, n_threads=threads)
    assert plan.n_blocks >= 4 * threads
    assert plan.block_rows * 4_400 <= 256 * MiB


def test_small_inputs_are_not_split_for_parallelism():
    # 2000 rows of 80 bytes: one 160 KB block beats 64 tiny tasks
    assert choose_block_rows(2000, 80, 160.0, budget=2 * 2**30, n_threads=16).n_blocks == 1
    # a split stops at 4 MiB of working set per block
    plan = choose_block_rows(200_000, 80, 160.0, budget=2 * 2**30, n_threads=16)
    assert plan.block_rows == -(-4 * MiB // 160) and plan.limit == "parallelism"


# ----------------------------------------------------------------------------- budget sources

def test_override_beats_workers_and_local_memory(cluster, monkeypatch):
    cluster({"memory_limit": 400 * MiB, "nthreads": 2, "metrics": {"memory": 0}})
    monkeypatch.delenv("DISTSKETCH_TASK_MEMORY", raising=False)
    res = cluster_resources()
    assert res.task_bytes == 100 * MiB and res.threads == 2  # 0.5 x 400 MiB / 2 threads
    monkeypatch.setenv("DISTSKETCH_TASK_MEMORY", "7MiB")
    assert task_memory_budget() == 7 * MiB
    with dask.config.set({"distsketch.task-memory": "5MiB"}):
        assert cluster_resources().task_bytes == 5 * MiB
        assert cluster_resources().source == "distsketch.task-memory"


def test_smallest_worker_and_its_own_memory_set_the_budget(cluster, monkeypatch):
    monkeypatch.delenv("DISTSKETCH_TASK_MEMORY", raising=False)
    cluster({"memory_limit": 4000 * MiB, "nthreads": 4, "metrics": {"memory": 100 * MiB}},
            {"memory_limit": 300 * MiB, "nthreads": 1, "metrics": {"memory": 190 * MiB}})
    res = cluster_resources()
    # the 300 MB worker pauses at 240 MiB and already holds 190 MiB
    assert res.task_bytes == 50 * MiB and res.threads == 5
    cluster({"memory_limit": 300 * MiB, "nthreads": 1, "metrics": {"memory": 290 * MiB}})
    assert cluster_resources().task_bytes == 30 * MiB  # never below 10 % of the limit
    cluster({"memory_limit": 0, "nthreads": 3})  # unlimited workers
    assert cluster_resources().task_bytes == 2 * 2**30 and cluster_resources().threads == 3


def test_local_budget_is_memory_per_core_at_most_two_gib(monkeypatch):
    monkeypatch.delenv("DISTSKETCH_TASK_MEMORY", raising=False)
    monkeypatch.setattr(budget_mod.os, "cpu_count", lambda: 4)
    monkeypatch.setattr(budget_mod, "_local_memory", lambda: 4 * 1000 * MiB)
    assert cluster_resources().task_bytes == 500 * MiB and cluster_resources().threads == 4
    monkeypatch.setattr(budget_mod, "_local_memory", lambda: 4 * 64 * 2**30)
    assert task_memory_budget() == 2 * 2**30


# ----------------------------------------------------------------------------- applying plans

def test_numpy_input_is_split_to_fit_the_budget():
    X = np.random.default_rng(0).standard_normal((20_000, 50))
    with dask.config.set({"distsketch.task-memory": "1MiB"}), record_plans() as plans:
        out = map_blocks(X, _double, n_out=50, dtype=np.float64, footprint=Footprint(per_row=800.0),
                         name="double")
    np.testing.assert_array_equal(out, 2.0 * X)
    (plan,) = plans
    assert plan.block_rows == MiB // 800 and plan.n_blocks == -(-20_000 // (MiB // 800))
    assert plan.task_bytes <= MiB and plan.name == "double"


def test_large_dask_blocks_are_split_evenly_small_ones_kept():
    X = np.arange(48_000.0).reshape(12_000, 4)
    Xd = da.from_array(X, chunks=(6_000, 4))
    with dask.config.set({"distsketch.task-memory": "64KiB"}):
        blocks = plan_rows(Xd, footprint=Footprint(per_row=32.0))
    assert blocks.data.chunks[0] == (2_000,) * 6 and blocks.plan.limit == "memory budget"
    # uneven blocks are split inside each block: no task reads two old blocks
    Xu = da.from_array(X, chunks=((5_000, 7_000), (4,)))
    with dask.config.set({"distsketch.task-memory": "64KiB"}):
        uneven = plan_rows(Xu, footprint=Footprint(per_row=32.0))
    assert uneven.data.chunks[0] == (1_667, 1_667, 1_666, 1_750, 1_750, 1_750, 1_750)
    np.testing.assert_array_equal(uneven.data.compute(scheduler="sync"), X)
    kept = plan_rows(da.from_array(X, chunks=(500, 4)), footprint=Footprint(per_row=32.0))
    assert kept.data.chunks[0] == (500,) * 24 and kept.plan.limit == "chunks"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    X = np.random.default_rng(1).standard_normal((40_000, 16)).astype(np.float32)
    path = tmp_path_factory.mktemp("plan") / "x.zarr"
    write_array(X, path, chunk_rows=1_000)
    return X, str(path)


def test_store_is_reread_at_the_planned_size_aligned_to_its_chunks(store):
    X, path = store
    Xd = open_array(path, block_rows=20_000)
    with dask.config.set({"distsketch.task-memory": "200KiB"}):
        blocks = plan_rows(Xd, footprint=Footprint(per_row=64.0))
    # 200 KiB / 64 B = 3200 rows, down to whole 1000-row store chunks
    assert blocks.data.chunks[0] == (3_000,) * 13 + (1_000,)
    # read at that size (one read task per block), not sliced out of 20 000-row reads
    graph = dict(blocks.data.__dask_graph__())
    assert not any("rechunk" in str(k) for k in graph)
    np.testing.assert_array_equal(blocks.data.compute(scheduler="sync"), X)


def test_block_rows_override_wins(store):
    _, path = store
    with dask.config.set({"distsketch.task-memory": "200KiB"}):
        blocks = plan_rows(open_array(path), footprint=Footprint(per_row=64.0), block_rows=5_000)
    assert blocks.data.chunks[0] == (5_000,) * 8 and blocks.plan.limit == "block_rows"


# ----------------------------------------------------------------------------- reduction tree

@pytest.mark.parametrize("n_blocks, split_every, want", [
    (100, 8, (8, 3)), (512, 8, (8, 3)), (513, 8, (9, 3)), (10**5, 8, (47, 3)),
    (1, 8, (8, 0)), (3, 2, (2, 2)),
])
def test_fan_in_keeps_depth_at_most_three(n_blocks, split_every, want):
    assert choose_fan_in(n_blocks, split_every) == want
    assert tree_depth(n_blocks, want[0]) == want[1] <= 3


def test_fan_in_held_to_the_budget_by_the_state_size():
    # a merge holds fan_in states and its result: 10 MiB states in a 50 MiB budget -> 4
    fan, depth = choose_fan_in(100, 8, state_bytes=10 * MiB, budget=50 * MiB)
    assert fan == 4 and depth == tree_depth(100, 4)
    with pytest.raises(MemoryBudgetError, match="merging two states"):
        choose_fan_in(100, 8, state_bytes=20 * MiB, budget=50 * MiB)


def test_tree_reduce_uses_the_chosen_fan_in_and_sums_exactly():
    X = np.arange(2_000 * 3, dtype=np.float64).reshape(2_000, 3)
    Xd = da.from_array(X, chunks=(2, 3))  # 1000 blocks: fan-in 10, depth 3
    red = tree_reduce(SumSummary(_colsum), Xd, split_every=4)
    deps = red.__dask_graph__().get_all_dependencies()
    fan = max(len(deps[k]) for k in deps if "merge" in str(k))
    assert fan == choose_fan_in(1000, 4)[0] == 10
    state = compute(red, progress=False, scheduler="sync")[0]
    np.testing.assert_array_equal(state["s"], X.sum(axis=0))  # integers: exact
    assert state["n"] == 2_000


# ----------------------------------------------------------------------------- lean graphs

class _Counting:
    def __init__(self):
        self.tasks = []

    def __call__(self, dsk, keys, **kwargs):
        self.tasks.append(len(dict(dsk.__dask_graph__())))
        return dask.get(dsk, keys, **kwargs)


def test_a_fit_on_100_blocks_is_about_one_task_per_block(store):
    from distsketch import FrequentDirections

    X, path = store
    Xd = open_array(path, block_rows=400)
    assert Xd.npartitions == 100
    counting = _Counting()
    with dask.config.set(scheduler=counting):
        fd = FrequentDirections(sketch_size=8).fit(Xd)
    # 100 read+sketch tasks, the merges of a fan-in 8 tree (13 + 2 + 1) and the source
    assert counting.tasks == [100 + 16 + 1]
    ref = FrequentDirections(sketch_size=8).fit(X.astype(np.float64))
    assert fd.sketch_.shape == ref.sketch_.shape


def test_a_map_written_to_zarr_is_one_task_per_block(store, tmp_path):
    X, path = store
    Xd = open_array(path, block_rows=400)
    counting = _Counting()
    with dask.config.set(scheduler=counting):
        write_array(map_blocks(Xd, _double, n_out=16, dtype=np.float64), tmp_path / "y.zarr")
    assert counting.tasks[0] <= 100 + 3  # read+map+store fused per block, plus the sources
    got = open_array(str(tmp_path / "y.zarr")).compute(scheduler="sync")
    np.testing.assert_array_equal(got, 2.0 * X.astype(np.float64))


# ----------------------------------------------------------------------------- visible plan

def test_plan_is_logged_recorded_and_readable(caplog):
    X = np.ones((5_000, 4))
    with caplog.at_level(logging.INFO, logger="distsketch"), record_plans() as plans:
        reduce_blocks(SumSummary(_colsum), X, block_rows=1_000, name="colsum")
    (plan,) = plans
    assert plan is last_plan() and plan == BlockPlan(block_rows=1_000, n_blocks=5,
                                                     task_bytes=1_000 * 32)
    assert (plan.fan_in, plan.depth, plan.limit) == (8, 1, "block_rows")
    text = str(plan)
    assert text.startswith("colsum: 5 blocks of 1000 rows (set by block_rows), 31.25 kiB per task")
    assert "budget" in text and "merge fan-in 8, depth 1" in text
    assert any("block plan colsum: 5 blocks" in r.getMessage() for r in caplog.records)


# ----------------------------------------------------------------------------- a planned estimator

def test_kernel_ridge_on_dask_input_plans_its_blocks_and_merges():
    from distsketch import RandomFourierFeatures, SketchedKernelRidge

    rng = np.random.default_rng(3)
    X = rng.normal(size=(4_000, 5))
    y = np.sin(X[:, 0])
    Xd = da.from_array(X, chunks=(250, 5))  # 16 blocks
    feats = RandomFourierFeatures(gamma=0.5, n_components=64, random_state=0)
    m, t = 64, 1
    state = 8.0 * (m * m + m * (t + 1) + t * t + t)
    with record_plans() as plans:
        model = SketchedKernelRidge(features=feats, alpha=1e-2).fit(Xd, y)
    (plan,) = [p for p in plans if p.name == "ridge-summary"]
    assert plan.merge_bytes == int((plan.fan_in + 1) * state)
    assert plan.task_bytes == int(plan.block_rows * 8.0 * (5 + 1 + 2 * m) + state)
    ref = SketchedKernelRidge(features=feats, alpha=1e-2).fit(X, y)
    np.testing.assert_allclose(model.predict(X[:50]), ref.predict(X[:50]), rtol=1e-8, atol=1e-10)
    # a budget that holds one block but not a merge of two states is refused up front
    with dask.config.set({"distsketch.task-memory": int(2.5 * state)}), \
            pytest.raises(MemoryBudgetError, match="merging two states"):
        SketchedKernelRidge(features=feats, alpha=1e-2).fit(Xd, y)


def test_cli_verbose_shows_the_plan(store, tmp_path, capsys):
    from distsketch import RandomFourierFeatures, cli

    _, path = store
    RandomFourierFeatures(n_components=32, random_state=0).fit(np.zeros((2, 16))).save(
        tmp_path / "rff.zarr")
    log = logging.getLogger("distsketch")
    handlers, level = list(log.handlers), log.level
    try:
        assert cli.main(["-v", "transform", str(tmp_path / "rff.zarr"), path,
                         str(tmp_path / "f.zarr"), "--cluster", "sync"]) == 0
    finally:
        for h in log.handlers[len(handlers):]:
            log.removeHandler(h)
        log.setLevel(level)
    err = capsys.readouterr().err
    assert "distsketch: block plan randomfourierfeatures: " in err and "per task" in err


def _reads(blocks) -> list:
    graph = dict(blocks.data.__dask_graph__())
    return [key for key in graph if isinstance(key, tuple) and str(key[0]).startswith("zarr-")]


def _inside_chunks(chunks: tuple[int, ...], unit: int) -> bool:
    # every block lies inside one store chunk (reads no part of a second one)
    start = 0
    for c in chunks:
        if c and start // unit != (start + c - 1) // unit:
            return False
        start += c
    return True


@pytest.mark.parametrize(("n_chunks", "threads"), [(2, 2), (4, 2), (3, 3), (6, 3)])
def test_chunks_spread_evenly_are_read_once_and_cut(tmp_path, n_chunks, threads):
    # chunks that share out evenly over the task threads, a stage wanting 4 blocks per
    # thread: each chunk is read in one task and cut into equal blocks inside it (a
    # partial read decodes all of it)
    X = np.random.default_rng(2).standard_normal((10_000 * n_chunks, 16)).astype(np.float32)
    write_array(X, tmp_path / "x.zarr", chunk_rows=10_000)
    Xd = open_array(str(tmp_path / "x.zarr"))
    with dask.config.set(scheduler="threads", num_workers=threads):
        blocks = plan_rows(Xd, footprint=Footprint(per_row=4096.0))
    assert blocks.plan.limit == "parallelism" and blocks.plan.block_rows < 10_000
    assert set(blocks.data.chunks[0]) == {blocks.plan.block_rows}  # one size, dividing a chunk
    assert 10_000 % blocks.plan.block_rows == 0
    assert _inside_chunks(blocks.data.chunks[0], 10_000)
    assert len(_reads(blocks)) == n_chunks
    np.testing.assert_array_equal(blocks.data.compute(scheduler="sync"), X)


@pytest.mark.parametrize(("n_chunks", "threads"), [(2, 4), (3, 2), (5, 4), (40, 16)])
def test_chunks_spread_unevenly_are_read_per_block(tmp_path, n_chunks, threads):
    # a chunk read once keeps its blocks on the worker that read it; where the chunks
    # do not share out evenly over the threads, each block reads its own rows (one
    # task each, its chunk decoded again) and no block reads two chunks
    rows = 1_000 if n_chunks > 10 else 10_000
    X = np.random.default_rng(2).standard_normal((rows * n_chunks, 16)).astype(np.float32)
    write_array(X, tmp_path / "x.zarr", chunk_rows=rows)
    Xd = open_array(str(tmp_path / "x.zarr"))
    with dask.config.set(scheduler="threads", num_workers=threads):
        blocks = plan_rows(Xd, footprint=Footprint(per_row=65536.0))
    assert blocks.plan.limit == "parallelism" and blocks.plan.n_blocks >= 4 * threads
    assert blocks.plan.block_rows < rows and rows % blocks.plan.block_rows == 0
    assert _inside_chunks(blocks.data.chunks[0], rows)
    assert len(_reads(blocks)) == blocks.plan.n_blocks
    assert not any("rechunk" in str(key) for key in dict(blocks.data.__dask_graph__()))
    np.testing.assert_array_equal(blocks.data.compute(scheduler="sync"), X)


def test_blocks_split_by_memory_read_their_rows_in_equal_parts_of_a_chunk(tmp_path):
    # split by the memory budget, a chunk held beside a block would not fit: read per
    # block, in equal parts of the chunk (2000 rows, not 2048: no block reads two chunks)
    X = np.random.default_rng(2).standard_normal((20_000, 16)).astype(np.float32)
    write_array(X, tmp_path / "x.zarr", chunk_rows=10_000)
    Xd = open_array(str(tmp_path / "x.zarr"))
    with dask.config.set({"distsketch.task-memory": "1MiB"}):
        small = plan_rows(Xd, footprint=Footprint(per_row=512.0))
    assert small.plan.limit == "memory budget" and small.data.chunks[0] == (2000,) * 10
    assert not any("rechunk" in str(key) for key in dict(small.data.__dask_graph__()))
    np.testing.assert_array_equal(small.data.compute(scheduler="sync"), X)
    # rows the caller asked for are kept as asked
    asked = plan_rows(Xd, footprint=Footprint(per_row=512.0), block_rows=2048)
    assert asked.plan.limit == "block_rows" and asked.data.chunks[0][:9] == (2048,) * 9


def test_a_chunk_read_once_is_cut_into_equal_blocks_that_a_write_keeps(tmp_path):
    # split by the working set (256 MiB / 64 KiB a row: 4096 rows), each 10 000-row chunk
    # read once: four blocks of 2500, not 3334 + 3333 + 3333, so every block has one
    # size and a map of them written to Zarr takes them as its chunks; blocks of
    # several sizes were rechunked to the first one's rows on the way out (slivers of
    # the next block in every chunk, joined across workers)
    X = np.random.default_rng(2).standard_normal((30_000, 16)).astype(np.float32)
    write_array(X, tmp_path / "x.zarr", chunk_rows=10_000)
    Xd = open_array(str(tmp_path / "x.zarr"))
    with dask.config.set(scheduler="threads", num_workers=1):
        blocks = plan_rows(Xd, footprint=Footprint(per_row=65536.0))
        assert blocks.plan.limit == "working set"
        assert blocks.data.chunks[0] == (2500,) * 12
        assert len(_reads(blocks)) == 3  # each chunk read once
        np.testing.assert_array_equal(blocks.data.compute(scheduler="sync"), X)
        counting = _Counting()
        with dask.config.set(scheduler=counting):
            out = write_array(map_blocks(Xd, _double, n_out=16, dtype=np.float64,
                                         footprint=Footprint(per_row=65536.0)), tmp_path / "y.zarr")
    assert counting.tasks[0] <= 3 + 12 + 3  # reads, map+store per block, the sources
    from distsketch.io.arrays.stores import open_zarr

    assert open_zarr(str(out)).chunks == (2500, 16)
    got = open_array(str(out)).compute(scheduler="sync")
    np.testing.assert_array_equal(got, 2.0 * X.astype(np.float64))


@pytest.mark.parametrize("threads", [3, 2])
def test_a_derived_array_is_re_read_through_its_store(tmp_path, threads):
    # Y = [X | t] made block by block from a store: planned on blocks smaller than the
    # chunks, X is re-read at that size and stacked again (its read in the block's
    # task), or read once and cut where the chunks spread evenly
    from distsketch.graph import derive_row_source, hstack_blocks

    X = np.random.default_rng(2).standard_normal((30_000, 16)).astype(np.float32)
    t = np.arange(30_000, dtype=np.float32)[:, None]
    write_array(X, tmp_path / "x.zarr", chunk_rows=10_000)
    Xd = open_array(str(tmp_path / "x.zarr"))
    T = da.from_array(t, chunks=(10_000, 1))

    def stack(A):
        return hstack_blocks(A, T)

    Y = derive_row_source(stack(Xd), Xd, stack)
    with dask.config.set(scheduler="threads", num_workers=threads):
        blocks = plan_rows(Y, footprint=Footprint(per_row=65536.0))
    assert blocks.plan.limit == "parallelism" and blocks.plan.block_rows < 10_000
    assert _inside_chunks(blocks.data.chunks[0], 10_000)
    reads = {key[1] for key in _reads(blocks)}
    assert len(reads) == (blocks.plan.n_blocks if 3 % threads else 3)
    np.testing.assert_array_equal(blocks.data.compute(scheduler="sync"), np.hstack([X, t]))
    # an array not read from a store has nothing to re-read: Y comes back as it was
    Xm = da.from_array(X, chunks=(10_000, 16))
    assert derive_row_source(stack(Xm), Xm, stack).name == stack(Xm).name
