"""Incremental runs: appended rows are merged; nothing new is a no-op; in-place changes refuse."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

import distsketch
from distsketch.errors import WorkflowError
from distsketch.io import read_manifest
from distsketch.workflow import run_workflow

GAMMA, M, K = 0.3, 40, 3


def make_input(path, X, chunk_rows=100):
    arr = zarr.create_array(store=str(path), shape=X.shape, dtype=X.dtype,
                            chunks=(chunk_rows, X.shape[1]), overwrite=True)
    arr[...] = X


def append_rows(path, new):
    """What a nightly ingest does: resize the Zarr array and write the new rows."""
    arr = zarr.open_array(str(path), mode="r+")
    n = arr.shape[0]
    arr.resize((n + new.shape[0], arr.shape[1]))
    arr[n:] = new


def data(n, seed, d=4):
    return np.random.default_rng(seed).normal(size=(n, d))


def spec(tmp, out="out", method=None, standardize=False, seg=200):
    return {
        "input": str(tmp / "X.zarr"), "seed": 11, "segment_rows": seg,
        "preprocessing": {"standardize": standardize},
        "method": method or {"name": "StreamingKernelPCA", "params": {
            "method": "rnca", "gamma": GAMMA, "n_random_features": M, "n_components": K}},
        "outputs": {"dir": str(tmp / out)}, "cluster": "sync", "report": {"n_sample": 100},
    }


def quiet(msg):
    pass


def _model(tmp, out="out"):
    return distsketch.load(tmp / out / "result" / "model.zarr")


@pytest.mark.parametrize("n1", [
    400,   # the first run ends on the segment grid: incremental == full refit bitwise
    450,   # it ends inside a segment: equal up to summation order
])
def test_incremental_rnca_equals_full_refit(tmp_path, n1):
    X = data(1000, seed=0)
    make_input(tmp_path / "X.zarr", X[:n1])
    r1 = run_workflow(spec(tmp_path), log=quiet)
    assert (r1.status, r1.rows_after) == ("full", n1)
    append_rows(tmp_path / "X.zarr", X[n1:])
    r2 = run_workflow(spec(tmp_path), log=quiet)
    assert (r2.status, r2.rows_before, r2.rows_after) == ("incremental", n1, 1000)
    assert r2.segments == len(range(n1 // 200, 5))
    ref = run_workflow(spec(tmp_path, out="ref"), log=quiet)
    assert ref.status == "full" and ref.segments == 5
    inc, full = _model(tmp_path), _model(tmp_path, "ref")
    assert inc.n_samples_seen_ == full.n_samples_seen_ == 1000  # no row lost or counted twice
    if n1 % 200 == 0:
        np.testing.assert_array_equal(inc.covariance_, full.covariance_)
        np.testing.assert_array_equal(inc.singular_values_, full.singular_values_)
        np.testing.assert_array_equal(inc.components_, full.components_)
    else:
        np.testing.assert_allclose(inc.singular_values_ ** 2 / 1000, full.singular_values_ ** 2 / 1000,
                                   rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(inc.components_, full.components_, rtol=1e-8, atol=1e-10)
    feats = zarr.open_array(str(tmp_path / "out" / "result" / "features.zarr"), path="X")[...]
    assert feats.shape == (1000, K)
    np.testing.assert_allclose(feats, inc.transform(X), rtol=1e-10, atol=1e-12)
    man = read_manifest(tmp_path / "out" / "result")
    assert man["rows"] == {"before": n1, "after": 1000, "new": 1000 - n1}
    assert man["status"] == "incremental"


def test_rerun_with_nothing_new_does_nothing(tmp_path):
    make_input(tmp_path / "X.zarr", data(500, seed=1))
    run_workflow(spec(tmp_path), log=quiet)
    man = tmp_path / "out" / "result" / "distsketch-manifest.json"
    before = (man.read_bytes(), man.stat().st_mtime_ns)
    res = run_workflow(spec(tmp_path), log=quiet)
    assert res.status == "up-to-date" and res.segments == 0
    assert res.message.startswith("nothing new")
    assert (man.read_bytes(), man.stat().st_mtime_ns) == before


def test_changed_rows_refuse_until_full(tmp_path):
    X = data(800, seed=2)
    make_input(tmp_path / "X.zarr", X)
    run_workflow(spec(tmp_path), log=quiet)
    arr = zarr.open_array(str(tmp_path / "X.zarr"), mode="r+")
    arr[799, 0] = 42.0  # a consumed row edited in place
    with pytest.raises(WorkflowError, match=r"changed in place.*--full"):
        run_workflow(spec(tmp_path), log=quiet)
    # the previous result is untouched and --full refits on the current data
    assert read_manifest(tmp_path / "out" / "result")["rows"]["after"] == 800
    res = run_workflow(spec(tmp_path), full=True, log=quiet)
    assert res.status == "full" and _model(tmp_path).n_samples_seen_ == 800


def test_truncated_input_and_changed_spec_refuse(tmp_path):
    X = data(600, seed=3)
    make_input(tmp_path / "X.zarr", X)
    run_workflow(spec(tmp_path), log=quiet)
    make_input(tmp_path / "X.zarr", X[:300])
    with pytest.raises(WorkflowError, match=r"changed in place.*only be appended"):
        run_workflow(spec(tmp_path), log=quiet)
    make_input(tmp_path / "X.zarr", X)
    other = spec(tmp_path)
    other["method"]["params"]["n_components"] = K + 1
    with pytest.raises(WorkflowError, match=r"different spec.*--full"):
        run_workflow(other, log=quiet)


def test_standardisation_is_frozen_by_the_first_run(tmp_path):
    X = data(900, seed=4) * 3 + 1
    make_input(tmp_path / "X.zarr", X[:600])
    run_workflow(spec(tmp_path, standardize=True), log=quiet)
    append_rows(tmp_path / "X.zarr", X[600:] + 5)  # drifted new rows
    run_workflow(spec(tmp_path, standardize=True), log=quiet)
    import json

    state = json.loads((tmp_path / "out" / "state" / "state.json").read_text())
    np.testing.assert_allclose(state["scaler"]["mean"], X[:600].mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(state["scaler"]["scale"], X[:600].std(axis=0), rtol=1e-12)
    assert state["rows_done"] == 900 and not state["in_progress"]


def test_incremental_frequent_directions_within_fd_guarantee(tmp_path):
    """SKPCA (FD): the merged sketch of an incremental run obeys the FD bound for all rows."""
    ell, k = 16, 3
    method = {"name": "StreamingKernelPCA", "params": {
        "n_components": k, "n_random_features": 48, "sketch_size": ell, "gamma": GAMMA}}
    X = data(1200, seed=5)
    make_input(tmp_path / "X.zarr", X[:500])
    run_workflow(spec(tmp_path, method=method), log=quiet)
    append_rows(tmp_path / "X.zarr", X[500:])
    assert run_workflow(spec(tmp_path, method=method), log=quiet).status == "incremental"
    model = _model(tmp_path)
    assert model.n_samples_seen_ == 1200
    Z = model.features_.transform(X)
    B = model.sketch_
    err = np.linalg.norm(Z.T @ Z - B.T @ B, 2)
    s = np.linalg.svd(Z, compute_uv=False)
    for kk in (0, k):
        bound = float(np.sum(s[kk:] ** 2)) / (ell - kk)
        assert err <= bound * (1 + 1e-9), (kk, err, bound)
    assert err <= model.shrinkage_ * (1 + 1e-9) + 1e-9
    # the same guarantee as a full refit (which also satisfies it)
    run_workflow(spec(tmp_path, out="ref", method=method), log=quiet)
    ref = _model(tmp_path, "ref")
    err_ref = np.linalg.norm(Z.T @ Z - ref.sketch_.T @ ref.sketch_, 2)
    assert err_ref <= float(np.sum(s ** 2)) / ell * (1 + 1e-9)


def test_estimator_without_partial_fit_is_refitted_on_all_rows(tmp_path):
    X = data(700, seed=6)
    method = {"name": "RandomFourierFeatures", "params": {"gamma": GAMMA, "n_components": 8}}
    make_input(tmp_path / "X.zarr", X[:300])
    run_workflow(spec(tmp_path, method=method), log=quiet)
    append_rows(tmp_path / "X.zarr", X[300:])
    logs = []
    res = run_workflow(spec(tmp_path, method=method), log=logs.append)
    assert (res.status, res.rows_before, res.rows_after, res.segments) == ("full", 300, 700, 1)
    assert any("no partial_fit: refitting on all 700 rows" in m for m in logs)
    feats = zarr.open_array(str(tmp_path / "out" / "result" / "features.zarr"), path="X")[...]
    np.testing.assert_allclose(feats, _model(tmp_path).transform(X), rtol=1e-12, atol=1e-12)
    assert run_workflow(spec(tmp_path, method=method), log=quiet).status == "up-to-date"


def test_nystrom_kpca_refits_instead_of_merging(tmp_path):
    # its partial_fit keeps the first landmarks; a workflow promises refit-equal results
    X = data(500, seed=8)
    method = {"name": "NystromKernelPCA", "params": {"gamma": GAMMA, "n_components": 3,
                                                      "n_landmarks": 40}}
    make_input(tmp_path / "X.zarr", X[:200])
    run_workflow(spec(tmp_path, method=method), log=quiet)
    append_rows(tmp_path / "X.zarr", X[200:])
    logs = []
    res = run_workflow(spec(tmp_path, method=method), log=logs.append)
    assert (res.status, res.rows_after, res.segments) == ("full", 500, 1)
    assert any("cannot merge new rows into a result equal to a refit: refitting on all 500 rows" in m
               for m in logs)
    model = _model(tmp_path)
    ref = distsketch.NystromKernelPCA(gamma=GAMMA, n_components=3, n_landmarks=40,
                                      random_state=model.random_state).fit(X)
    # landmarks drawn over all 500 rows, as a fit on all rows draws them (not from the first 200)
    np.testing.assert_array_equal(model.landmark_indices_, ref.landmark_indices_)
    assert model.n_samples_seen_ == 500
