"""Inputs that grow: appended through distsketch they are folded; grown by hand (through a
stale consolidated view, as in issue 23) they are refused, never folded as fill values; a
store growing during a run is read up to the rows the run recorded when it started."""

from __future__ import annotations

import warnings

import dask
import numpy as np
import pytest
import yaml
import zarr

import distsketch.cli as cli
from distsketch.io import append, ingest, open_array, read_manifest
from distsketch.workflow import WorkflowHooks, run_workflow

N0, N1, D = 1200, 1600, 6
rng = np.random.default_rng(7)
X = rng.normal(size=(N1, D)).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.int64) + (X[:, 1] > 0)


@pytest.fixture
def world(tmp_path):
    np.save(tmp_path / "x.npy", X[:N0])
    np.save(tmp_path / "y.npy", Y[:N0])
    # one chunk larger than the rows, as ingest chooses for a CSV: growing stays in chunk 0
    ingest(tmp_path / "x.npy", tmp_path / "s.zarr", labels=tmp_path / "y.npy", chunk_rows=2000)
    spec = {"input": str(tmp_path / "s.zarr"), "targets": str(tmp_path / "s.zarr") + "::y",
            "seed": 1, "segment_rows": 400, "cluster": "sync",
            "method": {"name": "SketchedKernelRidgeClassifier",
                       "params": {"features": {"name": "RandomFourierFeatures",
                                               "params": {"gamma": 0.5, "n_components": 32}}}},
            "outputs": {"dir": str(tmp_path / "runs")},
            "report": {"kernel_error": False, "png": False}}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert cli.main(["run", str(path), "--no-progress"]) == 0
    return tmp_path, path


def grow_through_the_stale_view(store):
    """What the issue's user did: zarr.open_group (consolidated, stale after the resize)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = zarr.open_group(str(store))
        g["X"].resize((N1, D))
        g["y"].resize((N1,))
        g["X"][N0:] = X[N0:]  # the stale view has N0 rows: nothing is written
        g["y"][N0:] = Y[N0:]


def test_hand_grown_store_with_stale_consolidated_view_is_refused(world, capsys):
    tmp, spec = world
    grow_through_the_stale_view(tmp / "s.zarr")
    capsys.readouterr()
    assert cli.main(["run", str(spec), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"recorded ({N0}, {D}), found ({N1}, {D})" in err and "--append" in err, err
    man = read_manifest(tmp / "runs" / "result")
    assert man["rows"]["after"] == N0  # nothing folded, the previous result kept


def test_hand_grown_store_with_real_rows_is_refused_too(world, capsys):
    """Rows written correctly but outside distsketch: the row count changed unrecorded."""
    tmp, spec = world
    for name, new in (("X", X), ("y", Y)):
        a = zarr.open_array(str(tmp / "s.zarr" / name), mode="r+")
        a.resize((N1, *a.shape[1:]))
        a[N0:] = new[N0:]
    zarr.consolidate_metadata(str(tmp / "s.zarr"))
    capsys.readouterr()
    assert cli.main(["run", str(spec), "--no-progress"]) == 2
    assert f"recorded ({N0}, {D}), found ({N1}, {D})" in capsys.readouterr().err
    assert read_manifest(tmp / "runs" / "result")["rows"]["after"] == N0


def test_appended_rows_are_folded(world, capsys):
    tmp, spec = world
    append(tmp / "s.zarr", X[N0:], Y[N0:])
    capsys.readouterr()
    assert cli.main(["run", str(spec), "--no-progress", "--json"]) == 0
    man = read_manifest(tmp / "runs" / "result")
    assert man["status"] == "incremental" and man["rows"] == {"before": N0, "after": N1,
                                                              "new": N1 - N0}
    pred = zarr.open_array(str(tmp / "runs" / "result" / "predictions.zarr"), path="predictions")
    assert pred.shape[0] == N1


class AppendDuringRun(WorkflowHooks):
    def __init__(self, store):
        self.store = store

    def before_outputs(self, result_tmp):
        append(self.store, X[N0:], Y[N0:])


def test_store_growing_during_a_run_is_read_to_the_recorded_rows(tmp_path):
    """Rows appended while the run writes its outputs stay out of them: the features, the
    predictions and both manifests agree on the rows the run started with."""
    np.save(tmp_path / "x.npy", X[:N0])
    np.save(tmp_path / "y.npy", Y[:N0])
    store = ingest(tmp_path / "x.npy", tmp_path / "s.zarr", labels=tmp_path / "y.npy",
                   chunk_rows=100)
    spec = {"input": str(store), "seed": 1, "segment_rows": 400, "cluster": "sync",
            "method": {"name": "RandomFourierFeatures", "params": {"n_components": 64}},
            "outputs": {"dir": str(tmp_path / "runs")},
            "report": {"kernel_error": False, "png": False}}
    # a small task budget: the planner re-reads the input in blocks smaller than it was opened
    with dask.config.set({"distsketch.task-memory": "64KiB"}):
        res = run_workflow(spec, hooks=AppendDuringRun(store), log=lambda m: None)
    assert res.rows_after == N0
    man = read_manifest(res.result_dir)
    feat = res.result_dir / "features.zarr"
    assert man["rows"]["after"] == N0 and man["input_shape"] == [N0, D]
    assert read_manifest(feat)["rows"] == N0
    assert open_array(feat).shape[0] == N0
    assert open_array(store).shape[0] == N1  # the append itself committed
