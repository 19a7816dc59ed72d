"""Segments in flight: summaries of several segments compute at once, merges commit in order.

Every case compares a run with several segments in flight against the same
spec folded one segment at a time: the checkpoint after each segment, the
model and the features must be bitwise equal.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import zarr

import distsketch
from distsketch import RandomFourierFeatures
from distsketch.errors import ConfigError, WorkflowError
from distsketch.workflow import WorkflowHooks, load_workflow_spec, run_workflow
from distsketch.workflow.methods import held_out
from distsketch.workflow.window import SummaryWindow, segments_in_flight, summary_bytes


def write(path, a, chunk=100):
    arr = zarr.create_array(store=str(path), shape=a.shape, dtype=a.dtype,
                            chunks=(chunk, *a.shape[1:]), overwrite=True)
    arr[...] = a


def quiet(msg):
    pass


def spec(tmp, out, in_flight, method=None, cluster="sync", targets=False):
    cfg = {
        "input": str(tmp / "X.zarr"), "seed": 7, "segment_rows": 150,
        "segments_in_flight": in_flight,
        "method": method or {"name": "StreamingKernelPCA",
                             "params": {"method": "fd", "gamma": 0.3, "n_random_features": 48,
                                        "sketch_size": 12, "n_components": 3}},
        "outputs": {"dir": str(tmp / out), "report": None}, "cluster": cluster,
        "report": {"kernel_error": False, "png": False},
    }
    if targets:
        cfg["targets"] = str(tmp / "y.zarr")
    return cfg


class Checkpoints(WorkflowHooks):
    """The committed summary after each segment (what a run killed there resumes from)."""

    def __init__(self, state: Path, attrs: tuple[str, ...]):
        self.state, self.attrs, self.seen = state, attrs, []

    def after_segment(self, segment):
        model = distsketch.load(self.state / "summary" / "model.zarr")
        rows = json.loads((self.state / "state.json").read_text())["rows_done"]
        self.seen.append((rows, [np.asarray(getattr(model, a)) for a in self.attrs]))


def assert_same_checkpoints(a: Checkpoints, b: Checkpoints):
    assert [r for r, _ in a.seen] == [r for r, _ in b.seen]
    for (_, xa), (_, xb) in zip(a.seen, b.seen, strict=True):
        for u, v in zip(xa, xb, strict=True):
            np.testing.assert_array_equal(u, v)


def assert_same_result(out_a: Path, out_b: Path, attr: str):
    ma = distsketch.load(out_a / "result" / "model.zarr")
    mb = distsketch.load(out_b / "result" / "model.zarr")
    np.testing.assert_array_equal(getattr(ma, attr), getattr(mb, attr))
    # supervised runs write predictions instead of features
    name = "features.zarr" if (out_a / "result" / "features.zarr").exists() else "predictions.zarr"
    array = "X" if name == "features.zarr" else "predictions"
    fa = zarr.open_array(str(out_a / "result" / name), path=array)[...]
    fb = zarr.open_array(str(out_b / "result" / name), path=array)[...]
    np.testing.assert_array_equal(fa, fb)


def run_both(tmp, attrs, **kw):
    """The same spec one segment at a time and with 4 in flight; their checkpoint hooks."""
    hooks = {}
    for out, k in (("seq", 1), ("win", 4)):
        hooks[out] = Checkpoints(tmp / out / "state", attrs)
        res = run_workflow(spec(tmp, out, k, **kw), hooks=hooks[out], log=quiet)
    return hooks["seq"], hooks["win"], res


def test_fd_in_flight_equals_one_at_a_time_after_every_segment(tmp_path):
    X = np.random.default_rng(0).normal(size=(1000, 5)).astype(np.float32)
    write(tmp_path / "X.zarr", X)
    seq, win, res = run_both(tmp_path, ("sketch_", "components_"))
    assert res.segments == 7 and res.manifest["segments_in_flight"] == 4
    assert len(seq.seen) == 7
    assert_same_checkpoints(seq, win)
    assert_same_result(tmp_path / "seq", tmp_path / "win", "components_")
    # and the FD guarantee holds for all rows (the run is not merely self-consistent)
    model = distsketch.load(tmp_path / "win" / "result" / "model.zarr")
    Z = np.asarray(model.features_.transform(X), dtype=np.float64)
    B = model.sketch_
    err = np.linalg.norm(Z.T @ Z - B.T @ B, 2)
    assert err <= np.linalg.norm(Z, "fro") ** 2 / 12 * (1 + 1e-9)


def test_incremental_rerun_in_flight_equals_one_at_a_time(tmp_path):
    X = np.random.default_rng(1).normal(size=(1100, 4))
    write(tmp_path / "X.zarr", X[:400])
    method = {"name": "StreamingKernelPCA", "params": {"method": "rnca", "gamma": 0.5,
                                                       "n_random_features": 40, "n_components": 3}}
    for out, k in (("seq", 1), ("win", 3)):
        run_workflow(spec(tmp_path, out, k, method=method), log=quiet)
    arr = zarr.open_array(str(tmp_path / "X.zarr"), mode="r+")
    arr.resize((1100, 4))
    arr[400:] = X[400:]
    seq, win, res = run_both(tmp_path, ("covariance_",), method=method)
    assert res.status == "incremental" and res.segments == 6  # 400..450, then on the 150-row grid to 1100
    assert_same_checkpoints(seq, win)
    assert_same_result(tmp_path / "seq", tmp_path / "win", "components_")
    # RNCA's state is ZᵀZ over every row: exact against NumPy
    model = distsketch.load(tmp_path / "win" / "result" / "model.zarr")
    Z = np.asarray(model.features_.transform(X), dtype=np.float64)
    np.testing.assert_allclose(model.covariance_, Z.T @ Z, rtol=1e-10, atol=1e-9)


def test_ridge_in_flight_equals_one_at_a_time(tmp_path):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(900, 3))
    write(tmp_path / "X.zarr", X)
    write(tmp_path / "y.zarr", np.sin(X[:, 0]) + 0.1 * rng.normal(size=900))
    method = {"name": "SketchedKernelRidge", "params": {
        "features": RandomFourierFeatures(gamma=0.5, n_components=30), "alpha": 0.1}}
    seq, win, _ = run_both(tmp_path, ("gram_", "zty_", "coef_"), method=method, targets=True)
    assert len(seq.seen) == 6
    assert_same_checkpoints(seq, win)
    assert_same_result(tmp_path / "seq", tmp_path / "win", "coef_")


def test_holdout_in_flight_leaves_out_the_same_rows_as_one_at_a_time(tmp_path):
    rng = np.random.default_rng(6)
    X = rng.normal(size=(900, 3))
    write(tmp_path / "X.zarr", X)
    write(tmp_path / "y.zarr", np.sin(X[:, 0]) + 0.1 * rng.normal(size=900))
    method = {"name": "SketchedKernelRidge", "holdout": 0.2, "params": {
        "features": RandomFourierFeatures(gamma=0.5, n_components=30), "alpha": 0.1}}
    seq, win, _ = run_both(tmp_path, ("gram_", "n_samples_seen_", "coef_"), method=method,
                           targets=True)
    assert_same_checkpoints(seq, win)
    # the held-out rows are out of the state (not merely the same rows in both runs)
    kept = ~held_out(7, 0, 900, 0.2)
    assert seq.seen[-1][1][1] == kept.sum() < 900


def test_classifier_in_flight_equals_one_at_a_time_and_refuses_a_new_label_in_order(tmp_path):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(800, 2))
    y = (X[:, 0] > 0).astype(np.int64) + (X[:, 1] > 0.5)
    write(tmp_path / "X.zarr", X)
    write(tmp_path / "y.zarr", y)
    method = {"name": "SketchedKernelRidgeClassifier", "params": {
        "features": RandomFourierFeatures(gamma=1.0, n_components=24), "classes": [0, 1, 2]}}
    # the calibration of predict_proba too: each segment's summary carries its row sample
    seq, win, _ = run_both(tmp_path, ("gram_", "zty_", "coef_", "proba_scale_"), method=method,
                           targets=True)
    assert len(seq.seen) == 6
    assert_same_checkpoints(seq, win)
    assert_same_result(tmp_path / "seq", tmp_path / "win", "coef_")
    # a label outside the classes in segment 4: segments 1-3 are committed, then the refusal
    bad = y.copy()
    bad[500] = 7
    write(tmp_path / "y.zarr", bad)
    hooks = Checkpoints(tmp_path / "bad" / "state", ("gram_",))
    with pytest.raises(WorkflowError, match=r"rows 450\.\.600 hold the label 7"):
        run_workflow(spec(tmp_path, "bad", 4, method=method, targets=True), hooks=hooks, log=quiet)
    assert [r for r, _ in hooks.seen] == [150, 300, 450]
    for (_, a), (_, b) in zip(hooks.seen, seq.seen[:3], strict=True):
        np.testing.assert_array_equal(a[0], b[0])


def test_in_flight_under_a_local_cluster_equals_one_at_a_time(tmp_path):
    X = np.random.default_rng(3).normal(size=(900, 6)).astype(np.float32)
    write(tmp_path / "X.zarr", X)
    cluster = {"kind": "local", "n_workers": 2, "threads_per_worker": 1, "processes": False,
               "dashboard_address": None}
    seq = Checkpoints(tmp_path / "seq" / "state", ("sketch_",))
    run_workflow(spec(tmp_path, "seq", 1, cluster=cluster), hooks=seq, log=quiet)
    win = Checkpoints(tmp_path / "win" / "state", ("sketch_",))
    res = run_workflow(spec(tmp_path, "win", None, cluster=cluster), hooks=win, log=quiet)
    assert res.manifest["segments_in_flight"] == 3  # 2 threads + 1 while the driver commits
    assert_same_checkpoints(seq, win)
    assert_same_result(tmp_path / "seq", tmp_path / "win", "components_")
    plans = res.manifest["block_plans"]
    fd = [p for p in plans if p["stage"] == "skpca-fd"]
    assert fd and sum(p["count"] for p in fd) == 6  # one reduction per segment
    assert all(p["tasks"] >= 1 and p["task_bytes"] > 0 and p["block_rows"] <= 150 for p in fd)


def test_window_runs_summaries_at_once_and_hands_them_out_in_order():
    # segment k's work waits for segment k + 1's to start: it only ends with two in flight
    started = [threading.Event() for _ in range(4)]

    def work(i):
        started[i].set()
        return started[i + 1].wait(timeout=60) if i < 3 else True

    window = SummaryWindow(size=2)
    try:
        for i in range(4):
            window.submit(i, lambda i=i: work(i))
        assert all(i in window for i in range(4))
        # each summary saw the next one start, which needs two in flight
        assert [window.take(i) for i in range(4)] == [True] * 4
        assert 0 not in window
    finally:
        window.close()


def test_window_shrinks_to_the_pending_memory_budget():
    window = SummaryWindow(size=8)
    try:
        state = {"n": 3, "ztz": np.zeros((100, 100)), "parts": [np.zeros(10), 1.5]}
        assert summary_bytes(state) == 8 + 80_000 + 80 + 8
        window.fit_memory(summary_bytes(state), budget=250_000)
        assert window.size == 3
        window.fit_memory(10**9, budget=250_000)
        assert window.size == 1  # never below one at a time
    finally:
        window.close()


def test_segments_in_flight_default_and_spec_checks(tmp_path):
    assert segments_in_flight(None) == 1  # no cluster attached: one at a time
    assert segments_in_flight(5) == 5
    cfg = spec(tmp_path, "o", 0)
    with pytest.raises(ConfigError,
                       match="segments_in_flight=0 is invalid; it must be a positive integer or null"):
        load_workflow_spec(cfg)
    cfg = spec(tmp_path, "o", 2) | {"storage_options": {"key": "AKIA", "secret": "s3cr3t"}}
    s = load_workflow_spec(cfg)
    assert s.storage_options == {"key": "AKIA", "secret": "s3cr3t"}
    # the manifest records option names, never their values; neither changes the state key
    assert s.as_dict()["storage_options"] == ["key", "secret"]
    assert "s3cr3t" not in json.dumps(s.as_dict())
    assert s.key() == load_workflow_spec(spec(tmp_path, "o", None)).key()
    with pytest.raises(ConfigError, match="storage_options='anon' is invalid; it must be a mapping"):
        load_workflow_spec(spec(tmp_path, "o", 2) | {"storage_options": "anon"})


KILL_AFTER_FIRST = """
import os, sys
from distsketch.workflow import WorkflowHooks, run_workflow

class Kill(WorkflowHooks):
    def after_segment(self, segment):
        if segment.index == 2:
            os._exit(75)

run_workflow(sys.argv[1], hooks=Kill(), log=lambda msg: None)
raise SystemExit("not killed")
"""


@pytest.mark.system
def test_run_killed_mid_window_resumes_to_the_same_result(tmp_path):
    import yaml

    X = np.random.default_rng(4).normal(size=(1000, 5))
    write(tmp_path / "X.zarr", X)
    run_workflow(spec(tmp_path, "ref", 1), log=quiet)
    p = tmp_path / "win.yaml"
    p.write_text(yaml.safe_dump(spec(tmp_path, "win", 4)))
    proc = subprocess.run([sys.executable, "-c", KILL_AFTER_FIRST, str(p)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 75, proc.stderr
    state = json.loads((tmp_path / "win" / "state" / "state.json").read_text())
    assert state["rows_done"] == 300 and state["in_progress"]  # two segments committed
    res = run_workflow(p, log=quiet)
    assert res.status == "resumed" and res.segments == 5
    assert_same_result(tmp_path / "win", tmp_path / "ref", "sketch_")
