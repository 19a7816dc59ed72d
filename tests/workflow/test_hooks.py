"""Hooks: called in order at their points; a failing hook leaves the previous result intact."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import zarr

import distsketch
from distsketch.io import read_manifest
from distsketch.workflow import Segment, WorkflowHooks, run_workflow


def make_input(path, X):
    arr = zarr.create_array(store=str(path), shape=X.shape, dtype=X.dtype, chunks=(100, X.shape[1]),
                            overwrite=True)
    arr[...] = X


def spec(tmp):
    return {
        "input": str(tmp / "X.zarr"), "seed": 3, "segment_rows": 200,
        "method": {"name": "StreamingKernelPCA", "params": {"method": "rnca", "gamma": 0.3,
                                                             "n_random_features": 32, "n_components": 2}},
        "outputs": {"dir": str(tmp / "out")}, "cluster": "sync",
        "report": {"kernel_error": False, "png": False},
    }


class Recorder(WorkflowHooks):
    """Records every call; checks what is on disk when each point is reached."""

    def __init__(self, state: Path, fail_at: str | None = None):
        self.state = state
        self.fail_at = fail_at
        self.calls: list[tuple] = []

    def before_segment(self, segment: Segment) -> None:
        self.calls.append(("before_segment", segment.index, segment.start, segment.stop))

    def after_segment(self, segment: Segment) -> None:
        # the checkpoint of this segment is committed when the hook runs
        rows = json.loads((self.state / "state.json").read_text())["rows_done"]
        self.calls.append(("after_segment", segment.index, rows, segment.n_rows))

    def before_outputs(self, result_tmp: Path) -> None:
        self.calls.append(("before_outputs", sorted(p.name for p in result_tmp.iterdir())))

    def before_commit(self, result_tmp: Path) -> None:
        self.calls.append(("before_commit", (result_tmp / "distsketch-manifest.json").exists()))
        if self.fail_at == "before_commit":
            raise RuntimeError("injected failure before the commit")

    def on_error(self, exc: BaseException) -> None:
        self.calls.append(("on_error", str(exc)))


def test_hooks_are_called_in_order_at_their_points(tmp_path):
    make_input(tmp_path / "X.zarr", np.random.default_rng(0).normal(size=(500, 4)))
    rec = Recorder(tmp_path / "out" / "state")
    res = run_workflow(spec(tmp_path), hooks=rec, log=lambda m: None)
    assert res.status == "full" and res.segments == 3
    assert rec.calls == [
        ("before_segment", 1, 0, 200), ("after_segment", 1, 200, 500),
        ("before_segment", 2, 200, 400), ("after_segment", 2, 400, 500),
        ("before_segment", 3, 400, 500), ("after_segment", 3, 500, 500),
        ("before_outputs", []),
        ("before_commit", False),  # the manifest comes after the hook
    ]


def test_failing_hook_reports_the_error_and_keeps_the_previous_result(tmp_path):
    X = np.random.default_rng(1).normal(size=(600, 4))
    make_input(tmp_path / "X.zarr", X[:300])
    run_workflow(spec(tmp_path), log=lambda m: None)
    arr = zarr.open_array(str(tmp_path / "X.zarr"), mode="r+")
    arr.resize((600, 4))
    arr[300:] = X[300:]
    rec = Recorder(tmp_path / "out" / "state", fail_at="before_commit")
    with pytest.raises(RuntimeError, match="injected failure"):
        run_workflow(spec(tmp_path), hooks=rec, log=lambda m: None)
    assert rec.calls[-1] == ("on_error", "injected failure before the commit")
    assert read_manifest(tmp_path / "out" / "result")["rows"]["after"] == 300
    assert not list((tmp_path / "out").glob(".result.*"))
    res = run_workflow(spec(tmp_path), log=lambda m: None)  # every segment was checkpointed
    assert res.status == "refreshed" and res.rows_after == 600
    model = distsketch.load(tmp_path / "out" / "result" / "model.zarr")
    assert model.n_samples_seen_ == 600


def test_no_module_reads_fault_switches_from_the_environment():
    root = Path(distsketch.__file__).parent
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if "DISTSKETCH_FAULT" in p.read_text()]
    assert offenders == []
