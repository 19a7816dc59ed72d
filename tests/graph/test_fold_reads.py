"""Reads folded into the task that uses them: a map or summary with operands (a
block and W, b) is one task per block, not a read task and a compute task whose
block may travel between workers."""

from __future__ import annotations

from collections import Counter

import dask
import numpy as np
import pytest
from dask._task_spec import DataNode, Task, TaskRef

from distsketch.graph import map_blocks, reduce_blocks
from distsketch.graph.runtime import fold_reads
from distsketch.io import open_array, write_array
from distsketch.summaries.sums import SumSummary


def _project(block, offset, W):
    return np.asarray(block, dtype=np.float64) @ W


def _projected_sums(block, offset, W):
    Z = np.asarray(block, dtype=np.float64) @ W
    return {"s": Z.sum(axis=0), "n": block.shape[0], "first": np.array([offset])}


class _Counting:
    """A scheduler that records how many tasks (not data) each graph holds."""

    def __init__(self):
        self.tasks: list[int] = []

    def __call__(self, dsk, keys, **kwargs):
        graph = dict(dsk.__dask_graph__()) if hasattr(dsk, "__dask_graph__") else dict(dsk)
        self.tasks.append(sum(not isinstance(v, DataNode) for v in graph.values()))
        return dask.get(dsk, keys, **kwargs)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    X = np.random.default_rng(2).standard_normal((20_000, 8)).astype(np.float32)
    path = tmp_path_factory.mktemp("fold") / "x.zarr"
    write_array(X, path, chunk_rows=200)
    return X, str(path)


def test_a_reduction_with_an_operand_is_one_task_per_block(store):
    X, path = store
    W = np.random.default_rng(3).standard_normal((8, 3))
    Xd = open_array(path, block_rows=200)
    assert Xd.npartitions == 100
    counting = _Counting()
    with dask.config.set(scheduler=counting):
        state = reduce_blocks(SumSummary(_projected_sums), Xd, W, block_rows=200)
    # 100 read+chunk tasks and the merges of a fan-in 8 tree (13 + 2 + 1); without
    # folding each block's read would be a task of its own (216)
    assert counting.tasks == [100 + 16]
    assert state["n"] == 20_000
    assert state["first"].item() == sum(range(0, 20_000, 200))
    ref = (X.astype(np.float64) @ W).sum(axis=0)
    # float64 sums of 2e4 terms |z| < 20 in different orders
    np.testing.assert_allclose(state["s"], ref, rtol=0, atol=20_000 * 20 * np.finfo(float).eps)


def test_a_map_with_an_operand_written_to_zarr_is_one_task_per_block(store, tmp_path):
    X, path = store
    W = np.random.default_rng(4).standard_normal((8, 5))
    Xd = open_array(path, block_rows=200)
    counting = _Counting()
    with dask.config.set(scheduler=counting):
        write_array(map_blocks(Xd, _project, W, n_out=5, dtype=np.float64, block_rows=200),
                    tmp_path / "z.zarr")
    assert counting.tasks[0] <= 100 + 2  # read+map+store per block, plus the commit checks
    got = open_array(str(tmp_path / "z.zarr")).compute(scheduler="sync")
    # the same float64 products row by row, whatever the task they run in
    np.testing.assert_array_equal(got, X.astype(np.float64) @ W)


def _read(x):
    return x + 1


def _use(a, b):
    return a * b


def test_fold_reads_joins_only_a_read_with_one_user():
    dsk = {
        "src": DataNode("src", 2),
        "op": DataNode("op", 10),
        "read": Task("read", _read, TaskRef("src")),
        "use": Task("use", _use, TaskRef("read"), TaskRef("op")),
    }
    out = fold_reads(dsk, ["use"])
    assert set(out) == {"src", "op", "use"}
    assert dask.get(out, "use") == dask.get(dsk, "use") == 30


def test_fold_reads_keeps_shared_requested_and_derived_tasks():
    shared = {
        "src": DataNode("src", 2), "op": DataNode("op", 10),
        "read": Task("read", _read, TaskRef("src")),
        "u1": Task("u1", _use, TaskRef("read"), TaskRef("op")),
        "u2": Task("u2", _use, TaskRef("read"), TaskRef("op")),
    }
    # two users: folding would read twice
    assert set(fold_reads(shared, ["u1", "u2"])) == set(shared)
    # the read itself requested: it must stay a key of its own
    single = {k: v for k, v in shared.items() if k != "u2"}
    assert set(fold_reads(single, ["u1", "read"])) == set(single)
    # a task that depends on another task is not a read: merges are never folded up a tree
    chain = {
        "src": DataNode("src", 2), "op": DataNode("op", 10),
        "read": Task("read", _read, TaskRef("src")),
        "mid": Task("mid", _read, TaskRef("read")),
        "use": Task("use", _use, TaskRef("mid"), TaskRef("op")),
    }
    folded = fold_reads(chain, ["use"])
    assert "mid" in folded and dask.get(folded, "use") == 40


def _cat(*parts):
    return sum(parts)


def test_fold_reads_joins_a_cut_of_a_shared_input_into_its_block():
    # targets read in one block ("y"), cut per row block (column piece 1 of "xy"),
    # beside the block's read (piece 0): the block's task ends up depending only on
    # the shared y (chains of one dependency are dask's linear fusion's, not here)
    dsk = {
        "src": DataNode("src", 2), "op": DataNode("op", 10),
        "y": Task("y", _read, TaskRef("src")),
        ("xy", 0, 0): Task(("xy", 0, 0), _read, TaskRef("src")),
        ("xy", 0, 1): Task(("xy", 0, 1), _read, TaskRef("y")),
        ("xy", 1, 0): Task(("xy", 1, 0), _read, TaskRef("src")),
        ("xy", 1, 1): Task(("xy", 1, 1), _read, TaskRef("y")),
        ("use", 0): Task(("use", 0), _cat, TaskRef(("xy", 0, 0)), TaskRef(("xy", 0, 1)),
                         TaskRef("op")),
        ("use", 1): Task(("use", 1), _cat, TaskRef(("xy", 1, 0)), TaskRef(("xy", 1, 1)),
                         TaskRef("op")),
        # a merge of the two blocks' states: two row blocks of one array stay tasks
        "merge": Task("merge", _use, TaskRef(("use", 0)), TaskRef(("use", 1))),
    }
    out = fold_reads(dsk, ["merge"])
    assert set(out) == {"src", "op", "y", ("use", 0), ("use", 1), "merge"}
    assert out[("use", 0)].dependencies == {"src", "op", "y"}
    assert out["merge"].dependencies == {("use", 0), ("use", 1)}
    assert dask.get(out, "merge") == dask.get(dsk, "merge")


@pytest.mark.parametrize("threads", [1, 3, 16])
def test_kernel_ridge_blocks_depend_only_on_shared_inputs(tmp_path, threads):
    # a fit from a store with targets from another store: every block's task reads its
    # rows and cuts its targets itself, so it waits on no task of its own (the
    # scheduler then shares blocks out one by one, not by where pieces were made)
    from distsketch import RandomFourierFeatures, SketchedKernelRidge

    X = np.random.default_rng(5).standard_normal((40_000, 256)).astype(np.float32)
    write_array(X, tmp_path / "x.zarr", chunk_rows=10_000)
    write_array(X[:, :1] ** 2, tmp_path / "y.zarr", chunk_rows=10_000)
    y = open_array(str(tmp_path / "y.zarr"))[:, 0]
    seen: list[dict] = []

    def record(dsk, keys, **kwargs):
        graph = dict(dsk.__dask_graph__()) if hasattr(dsk, "__dask_graph__") else dict(dsk)
        seen.append(graph)
        return dask.get(dsk, keys, **kwargs)

    est = SketchedKernelRidge(standardize=False, random_state=0,
                              features=RandomFourierFeatures(n_components=256, random_state=0))
    with dask.config.set(scheduler=record, num_workers=threads):
        est.fit(str(tmp_path / "x.zarr"), y)
    graph = seen[-1]
    users = Counter(d for node in graph.values() for d in getattr(node, "dependencies", ()))
    blocks = [k for k in graph if isinstance(k, tuple) and "ridge-summary-chunk" in str(k[0])]
    assert len(blocks) >= min(4, 4 * threads)
    for key in blocks:
        own = [d for d in graph[key].dependencies
               if not isinstance(graph[d], DataNode) and users[d] == 1]
        assert not own, (key, own)
    # and the fit is the one a single in-memory block gives, to float32 rounding of ZᵀZ
    ref = SketchedKernelRidge(standardize=False, random_state=0,
                              features=RandomFourierFeatures(n_components=256, random_state=0)
                              ).fit(X, (X[:, 0] ** 2))
    np.testing.assert_allclose(est.predict(X[:500]), ref.predict(X[:500]), rtol=0, atol=1e-3)
