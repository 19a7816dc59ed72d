"""Workflow storage on an object store (fsspec's in-memory file system): checkpoints
committed by state.json, leftovers of a killed run, foreign and damaged state, the lock."""

from __future__ import annotations

import json
import uuid

import fsspec
import numpy as np
import pytest
import zarr

import distsketch
from distsketch.errors import StoreError, WorkflowError
from distsketch.io import write_array
from distsketch.workflow import WorkflowHooks, run_workflow
from distsketch.workflow.storage import ObjectLock, open_storage

FS = fsspec.filesystem("memory")


def quiet(msg):
    pass


@pytest.fixture
def where(tmp_path):
    """An input on memory:// and a local copy, a fresh memory:// outputs.dir."""
    root = f"memory://wf-{uuid.uuid4().hex[:8]}"
    X = np.random.default_rng(0).normal(size=(700, 4))
    write_array(X, f"{root}/X.zarr")
    arr = zarr.create_array(store=str(tmp_path / "X.zarr"), shape=X.shape, dtype=X.dtype,
                            chunks=(100, 4))
    arr[...] = X
    yield root
    FS.rm(root[len("memory://"):], recursive=True)


def spec(inp, out, **over):
    return {"input": inp, "seed": 3, "segment_rows": 200,
            "method": {"name": "StreamingKernelPCA", "params": {
                "method": "rnca", "gamma": 0.4, "n_random_features": 24, "n_components": 2}},
            "outputs": {"dir": out, "report": None}, "cluster": "sync",
            "report": {"kernel_error": False, "png": False}} | over


def names(url):
    return sorted(p.rsplit("/", 1)[-1] for p in FS.ls(url[len("memory://"):], detail=False))


class Stop(WorkflowHooks):
    def after_segment(self, segment):
        if segment.index == 2:
            raise RuntimeError("stopped")


def test_checkpoints_on_an_object_store_resume_bitwise(where, tmp_path):
    out = f"{where}/run"
    with pytest.raises(RuntimeError, match="stopped"):
        run_workflow(spec(f"{where}/X.zarr", out), hooks=Stop(), log=quiet)
    state = json.loads(FS.cat_file(f"{out}/state/state.json"[len("memory://"):]))
    assert state["rows_done"] == 400 and state["summary"].startswith("summary-000000000400-")
    # one committed summary; the lock is released on the error; no result yet
    assert names(f"{out}/state") == sorted(["state.json", state["summary"]])
    assert names(out) == ["state"]
    # a summary a killed run wrote but never committed is removed by the next run
    FS.pipe_file(f"{out}/state/summary-000000000600-deadbeef.zarr/zarr.json"[9:], b"{}")
    res = run_workflow(spec(f"{where}/X.zarr", out), log=quiet)
    assert res.status == "resumed" and res.segments == 2
    ref = run_workflow(spec(str(tmp_path / "X.zarr"), str(tmp_path / "ref")), log=quiet)
    a = distsketch.load(f"{out}/result/model.zarr")
    b = distsketch.load(ref.result_dir / "model.zarr")
    np.testing.assert_array_equal(a.covariance_, b.covariance_)
    assert len([n for n in names(f"{out}/state") if n.startswith("summary-")]) == 1


def test_foreign_state_prefix_is_refused_and_left_alone(where):
    out = f"{where}/run"
    FS.pipe_file(f"{out}/state/notes.txt"[9:], b"mine")
    with pytest.raises(StoreError, match=r"which distsketch did not write.*notes.txt"):
        run_workflow(spec(f"{where}/X.zarr", out), log=quiet)
    assert names(f"{out}/state") == ["notes.txt"] and names(out) == ["state"]  # no lock left


def test_damaged_state_json_names_the_fix(where):
    out = f"{where}/run"
    run_workflow(spec(f"{where}/X.zarr", out), log=quiet)
    FS.pipe_file(f"{out}/state/state.json"[9:], b"[1, 2")
    with pytest.raises(StoreError, match=r"state.json is damaged.*--full"):
        run_workflow(spec(f"{where}/X.zarr", out), log=quiet)
    assert run_workflow(spec(f"{where}/X.zarr", out), full=True, log=quiet).status == "full"


def test_interrupted_result_publication_is_published_again(where):
    out = f"{where}/run"
    run_workflow(spec(f"{where}/X.zarr", out), log=quiet)
    FS.rm_file(f"{out}/result/distsketch-manifest.json"[9:])  # killed while publishing
    res = run_workflow(spec(f"{where}/X.zarr", out), log=quiet)
    assert res.status == "refreshed" and res.segments == 0
    assert "distsketch-manifest.json" in names(f"{out}/result")


def test_lock_object_refuses_a_second_holder_and_is_released():
    loc = open_storage(f"memory://lock-{uuid.uuid4().hex[:8]}", None).loc
    first = ObjectLock(loc)
    first.acquire()
    try:
        with pytest.raises(WorkflowError, match=r"holds the lock object.*--force-unlock"):
            ObjectLock(loc).acquire(wait=False)
        second = ObjectLock(loc)
        second.acquire(force=True)  # taken over: the first run notices and stops
        first._beat_once()
        with pytest.raises(WorkflowError, match="taken over"):
            first.check()
        second.release()
    finally:
        first.release()
    assert not FS.exists(loc.child(".lock").path)


def test_a_rerun_reports_the_median_gamma_its_checkpoint_holds(where):
    # the value gamma: median chose when the state was created is read back with the
    # checkpoint on an object store as on a local folder (a refresh folds no segment)
    median = {"method": {"name": "StreamingKernelPCA", "params": {
        "method": "rnca", "gamma": "median", "n_random_features": 24, "n_components": 2}}}
    out = f"{where}/run"
    first = run_workflow(spec(f"{where}/X.zarr", out, **median), log=quiet)
    gamma = first.manifest["resolved_params"]["gamma"]
    FS.rm_file(f"{out}/result/distsketch-manifest.json"[9:])  # killed while publishing
    res = run_workflow(spec(f"{where}/X.zarr", out, **median), log=quiet)
    assert res.status == "refreshed" and res.segments == 0
    assert res.manifest["resolved_params"] == {"gamma": gamma}
    assert distsketch.load(f"{out}/result/model.zarr").gamma == gamma
