"""Checkpoint state: formats this version no longer reads are refused with the fix."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
import zarr

from distsketch.errors import WorkflowError
from distsketch.workflow import load_workflow_spec, run_workflow
from distsketch.workflow.segments import segment_bounds


def test_old_rnca_checkpoint_asks_for_full(tmp_path):
    X = np.random.default_rng(0).normal(size=(300, 3))
    arr = zarr.create_array(store=str(tmp_path / "X.zarr"), shape=X.shape, dtype=X.dtype,
                            chunks=(100, 3))
    arr[...] = X
    cfg = {"input": str(tmp_path / "X.zarr"), "segment_rows": 100, "cluster": "sync",
           "method": {"name": "StreamingKernelPCA", "params": {"method": "rnca", "n_random_features": 16,
                                                                "n_components": 2}},
           "outputs": {"dir": str(tmp_path / "out")}, "report": {"kernel_error": False}}
    # what the former built-in rnca method left: state.json keyed by its spec (method name
    # 'rnca', which no spec may name now, so no current spec has its key) and an np.savez
    # covariance
    state = tmp_path / "out" / "state"
    (state / "summary").mkdir(parents=True)
    (tmp_path / "out" / ".lock").write_text("")  # the former run's lock file
    npz = state / "summary" / "covariance.npz"
    np.savez(npz, n=np.int64(100), ztz=np.eye(16), sum=np.ones(16))
    old = {k: cfg.get(k) for k in ("input", "targets", "seed", "segment_rows", "preprocessing")}
    old["method"] = {"name": "rnca", "params": {"n_random_features": 16, "n_components": 2}}
    old_key = hashlib.blake2b(json.dumps(old, sort_keys=True, default=str).encode(),
                              digest_size=12).hexdigest()
    assert old_key != load_workflow_spec(cfg).key()
    (state / "state.json").write_text(json.dumps({
        "version": 1, "spec_key": old_key, "input": cfg["input"], "n_features": 3,
        "dtype": "float64", "segment_rows": 100, "seed": 0, "scaler": None, "rows_done": 100,
        "in_progress": True, "prefix_fingerprint": "0" * 32}))
    body = npz.read_bytes()
    with pytest.raises(WorkflowError, match=r"different spec.*--full"):
        run_workflow(cfg, log=lambda m: None)
    assert npz.read_bytes() == body  # refused before anything is read or replaced
    res = run_workflow(cfg, full=True, log=lambda m: None)
    assert res.status == "full" and res.rows_after == 300
    assert not npz.exists()


@pytest.mark.parametrize("done, n, seg, expected", [
    (0, 500, 200, [(0, 200), (200, 400), (400, 500)]),
    (450, 1000, 200, [(450, 600), (600, 800), (800, 1000)]),  # resumes on the global grid
    (600, 600, 200, []),                                      # nothing new
])
def test_segment_bounds_follow_the_global_grid(done, n, seg, expected):
    assert segment_bounds(done, n, seg) == expected
