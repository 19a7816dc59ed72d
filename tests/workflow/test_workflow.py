"""Workflow specs and full runs: validation, outputs, manifest, report, lock, chunking."""

from __future__ import annotations

import dataclasses
import fcntl
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
import zarr
from hypothesis import given, settings
from hypothesis import strategies as st

import distsketch
from distsketch.errors import ConfigError, StoreError, WorkflowError
from distsketch.estimators.decomposition.streaming_kpca import StreamingKernelPCA
from distsketch.estimators.features.rff import RandomFourierFeatures
from distsketch.io import read_manifest
from distsketch.workflow import load_workflow_spec, run_workflow
from distsketch.workflow.spec import MethodSpec

GAMMA, M, K = 0.2, 48, 4
RNCA = {"method": "rnca", "gamma": GAMMA, "n_random_features": M, "n_components": K}


def make_input(path: Path, X: np.ndarray, chunk_rows: int = 100) -> str:
    arr = zarr.create_array(store=str(path), shape=X.shape, dtype=X.dtype,
                            chunks=(chunk_rows, X.shape[1]), overwrite=True)
    arr[...] = X
    return str(path)


def data(n: int = 900, d: int = 5, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(n, d)) * np.arange(1, d + 1) + 3.0).astype(np.float64)


def spec(tmp: Path, **over) -> dict:
    cfg = {
        "input": str(tmp / "X.zarr"), "seed": 7, "segment_rows": 300,
        "preprocessing": {"standardize": True},
        "method": {"name": "StreamingKernelPCA", "params": RNCA},
        "outputs": {"dir": str(tmp / "out")}, "cluster": "sync", "report": {"n_sample": 200},
    }
    cfg.update(over)
    return cfg


def rnca_reference(X: np.ndarray, seed: int, standardize: bool = True):
    """Single-block NumPy RNCA: standardise, RFF features, ZᵀZ, eigh, sign fix."""
    if standardize:
        sd = X.std(axis=0)
        X = (X - X.mean(axis=0)) / np.where(sd == 0, 1.0, sd)
    Z = RandomFourierFeatures(gamma=GAMMA, n_components=M, random_state=seed).fit(X).transform(X)
    C = Z.T @ Z
    vals, vecs = np.linalg.eigh(C)
    vals, vecs = vals[::-1], vecs[:, ::-1]
    signs = np.sign(vecs[np.argmax(np.abs(vecs), axis=0), np.arange(vecs.shape[1])])
    vecs = vecs * signs
    return vals / X.shape[0], Z @ vecs[:, :K]


def standardised(X: np.ndarray) -> np.ndarray:
    """What the workflow's frozen scaler does to X (same float64 arithmetic)."""
    sd = X.std(axis=0)
    return (X - X.mean(axis=0)) / np.where(sd == 0, 1.0, sd)


def eigenvalues(model) -> np.ndarray:
    """Eigenvalues of ZᵀZ / n, as the RNCA reference computes them."""
    return model.singular_values_ ** 2 / model.n_samples_seen_


# ----------------------------------------------------------------------------- spec


@pytest.mark.parametrize("patch, needle", [
    ({"input": None}, "missing required key 'input'"),       # no input
    ({"bogus": 1}, "key 'bogus' is not known. Known keys: block_rows"),  # a top-level typo
    ({"seed": -1}, "key seed=-1 is invalid; it must be a non-negative integer"),  # bad seed
    ({"segment_rows": 0}, "segment_rows=0 is invalid; it must be a positive"),
    ({"method": {"name": "NoSuchThing"}}, "unknown method 'NoSuchThing'"),
    ({"method": {"name": "rnca"}}, "'rnca' is StreamingKernelPCA with method: rnca"),  # old built-in
    ({"method": {"name": "open_array"}}, "is not an estimator"),  # a public function, not a method
    ({"outputs": {}}, "outputs: missing required key 'dir' (dir: the folder"),
    ({"outputs": {"dir": "o", "model": "../x"}}, "plain file name"),
    ({"preprocessing": {"standardize": "yes"}}, "standardize='yes' is invalid; it must be true or false"),
    ({"cluster": {"kind": "local", "workers": 2}}, "option 'workers' is not known"),  # inline spec
    ({"cluster": 3}, "cluster must be a name"),
])
def test_invalid_specs_raise_config_error(tmp_path, patch, needle):
    cfg = spec(tmp_path)
    for k, v in patch.items():
        if v is None:
            cfg.pop(k)
        else:
            cfg[k] = v
    with pytest.raises(ConfigError) as exc:
        load_workflow_spec(cfg)
    assert needle in str(exc.value)


def test_yaml_spec_paths_resolve_against_spec_folder(tmp_path):
    (tmp_path / "sub").mkdir()
    p = tmp_path / "sub" / "w.yaml"
    p.write_text(yaml.safe_dump({"input": "../X.zarr::X", "method": "StreamingKernelPCA",
                                 "outputs": {"dir": "o"}, "cluster": "../c.yaml"}))
    cfg = load_workflow_spec(p)
    assert cfg.input == str(tmp_path / "X.zarr") + "::X"
    assert cfg.outputs.dir == str(tmp_path / "sub" / "o")
    assert cfg.cluster == str(tmp_path / "c.yaml")
    assert cfg.seed == 0 and cfg.method == MethodSpec("StreamingKernelPCA", {})
    assert load_workflow_spec(cfg) is cfg  # a checked spec passes through
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.seed = 1


# ----------------------------------------------------------------------------- runs


def test_full_run_matches_numpy_reference_and_writes_complete_result(tmp_path):
    X = data()
    make_input(tmp_path / "X.zarr", X)
    res = run_workflow(spec(tmp_path), log=lambda m: None)
    assert res.status == "full" and (res.rows_before, res.rows_after, res.segments) == (0, 900, 3)
    out = tmp_path / "out" / "result"
    vals, emb = rnca_reference(X, seed=7)
    model = distsketch.load(out / "model.zarr")[-1]  # the Pipeline's step after the scaler
    np.testing.assert_allclose(eigenvalues(model), vals, rtol=1e-9, atol=1e-12)
    feats = zarr.open_array(str(out / "features.zarr"), path="X")[...]
    np.testing.assert_allclose(feats, emb, rtol=1e-7, atol=1e-9)
    # the model equals a fresh StreamingKernelPCA(method="rnca") fed the same standardised
    # segments (one dask block each, as in the run): bitwise
    fresh = StreamingKernelPCA(**RNCA, random_state=7)
    for a in range(0, 900, 300):
        fresh.partial_fit(standardised(X)[a: a + 300])
    np.testing.assert_array_equal(model.covariance_, fresh.covariance_)
    np.testing.assert_array_equal(model.components_, fresh.components_)
    np.testing.assert_array_equal(feats, fresh.transform(standardised(X)))
    man = read_manifest(out)
    assert man["rows"] == {"before": 0, "after": 900, "new": 900}
    assert man["seed"] == 7 and man["input_fingerprint"]["shape"] == [900, 5]
    assert {"numpy", "dask", "zarr", "distsketch"} <= set(man["versions"])
    assert {"open", "preprocess", "fit", "features", "total"} <= set(man["timings"])
    assert man["peak_memory_bytes"] > 10 * 2**20
    png = importlib.util.find_spec("matplotlib") is not None  # the PNG is optional
    assert set(man["files"]) >= {"model.zarr", "features.zarr", "report.md"}
    assert ("report.png" in man["files"]) == png
    # the manifest is the last file written
    newest = max((out / f).stat().st_mtime_ns for f in man["files"])
    assert (out / "distsketch-manifest.json").stat().st_mtime_ns >= newest
    report = (out / "report.md").read_text()
    assert "Kernel error estimate" in report and "relative_frobenius" in report
    assert f"{vals[0]:.4g}" in report  # the spectrum of the fitted covariance
    errs = man["kernel_errors"]
    assert errs["available"] and 0 < errs["relative_frobenius"] < 1


def test_rnca_fit_matches_reference_and_partial_fit_equals_fit():
    X = data(seed=4)
    Xs = standardised(X)
    model = StreamingKernelPCA(**RNCA, random_state=7).fit(Xs)
    vals, emb = rnca_reference(X, seed=7)
    np.testing.assert_allclose(eigenvalues(model), vals, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(model.transform(Xs), emb, rtol=1e-7, atol=1e-9)
    G = model.kernel_approx(Xs[:50], Xs[50:80])
    np.testing.assert_allclose(G, emb[:50] @ emb[50:80].T, rtol=1e-7, atol=1e-9)
    # segments folded by partial_fit: new rows are numbered after the rows seen, so each
    # row has the features it has in fit and the covariance is the same exact sum
    inc = StreamingKernelPCA(**RNCA, random_state=7)
    for a, b in ((0, 250), (250, 600), (600, 900)):
        inc.partial_fit(Xs[a:b])
    assert inc.n_samples_seen_ == model.n_samples_seen_ == 900
    np.testing.assert_array_equal(inc.features_.transform(Xs), model.features_.transform(Xs))
    np.testing.assert_allclose(inc.covariance_, model.covariance_, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(inc.feature_sum_, model.feature_sum_, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(inc.components_, model.components_, rtol=1e-8, atol=1e-10)


@settings(max_examples=4, deadline=None)
@given(block_rows=st.sampled_from([37, 100, 128, 450, 900]))
def test_result_independent_of_block_chunking(tmp_path_factory, block_rows):
    tmp = tmp_path_factory.mktemp("chunks")
    X = data(seed=1)
    make_input(tmp / "X.zarr", X)
    run_workflow(spec(tmp, block_rows=block_rows), log=lambda m: None)
    vals, emb = rnca_reference(X, seed=7)
    feats = zarr.open_array(str(tmp / "out" / "result" / "features.zarr"), path="X")[...]
    # sums of ZᵀZ change order with the blocking: equal to rounding only
    np.testing.assert_allclose(feats, emb, rtol=1e-7, atol=1e-9)
    model = distsketch.load(tmp / "out" / "result" / "model.zarr")[-1]
    np.testing.assert_allclose(eigenvalues(model), vals, rtol=1e-9, atol=1e-12)


def test_streaming_kpca_method_runs_with_estimator_params(tmp_path):
    X = data(seed=2).astype(np.float32)
    make_input(tmp_path / "X.zarr", X)
    cfg = spec(tmp_path, method={"name": "StreamingKernelPCA", "params": {
        "n_components": 3, "n_random_features": 64, "sketch_size": 16, "gamma": GAMMA}},
        preprocessing={"standardize": False})
    res = run_workflow(cfg, log=lambda m: None)
    out = res.result_dir
    model = distsketch.load(out / "model.zarr")
    assert model.n_samples_seen_ == 900 and model.seed_ == 7  # the workflow seed reaches the estimator
    feats = zarr.open_array(str(out / "features.zarr"), path="X")[...]
    np.testing.assert_allclose(feats, model.transform(X), rtol=1e-6, atol=1e-6)
    assert read_manifest(out)["kernel_errors"]["available"]


def test_supervised_method_reads_targets_and_writes_predictions(tmp_path):
    X = data(seed=3)
    y = np.sin(X[:, 0]) + 0.1 * X[:, 1]
    make_input(tmp_path / "X.zarr", X)
    ya = zarr.create_array(store=str(tmp_path / "y.zarr"), shape=y.shape, dtype=y.dtype, chunks=(100,))
    ya[...] = y
    cfg = spec(tmp_path, targets=str(tmp_path / "y.zarr"),
               method={"name": "SketchedKernelRidge", "params": {}},
               preprocessing={"standardize": False}, report={"kernel_error": False})
    res = run_workflow(cfg, log=lambda m: None)
    model = distsketch.load(res.result_dir / "model.zarr")
    pred = zarr.open_array(str(res.result_dir / "predictions.zarr"), path="predictions")[...]
    np.testing.assert_allclose(pred, model.predict(X), rtol=1e-10, atol=1e-10)
    assert model.n_samples_seen_ == 900


def test_dry_run_writes_nothing(tmp_path):
    make_input(tmp_path / "X.zarr", data())
    res = run_workflow(spec(tmp_path), dry_run=True, log=lambda m: None)
    assert res.status == "dry-run" and "rows 0..900 in 3 segment(s)" in res.message
    assert not (tmp_path / "out").exists()


def test_locked_output_refuses_and_times_out(tmp_path):
    make_input(tmp_path / "X.zarr", data())
    (tmp_path / "out").mkdir()
    fd = os.open(tmp_path / "out" / ".lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(WorkflowError, match=r"another distsketch run .* --wait"):
            run_workflow(spec(tmp_path), log=lambda m: None)
        with pytest.raises(WorkflowError, match="another distsketch run"):
            run_workflow(spec(tmp_path), wait=0.3, log=lambda m: None)
    finally:
        os.close(fd)
    assert not (tmp_path / "out" / "result").exists() and not (tmp_path / "out" / "state").exists()
    assert run_workflow(spec(tmp_path), log=lambda m: None).status == "full"


def test_two_concurrent_cli_runs_serialise_without_corruption(tmp_path):
    make_input(tmp_path / "X.zarr", data())
    p = tmp_path / "w.yaml"
    p.write_text(yaml.safe_dump(spec(tmp_path)))
    cmd = [sys.executable, "-m", "distsketch.cli.run", str(p), "--wait", "120"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [pr.communicate(timeout=120) for pr in procs]
    assert [pr.returncode for pr in procs] == [0, 0], outs
    first = sorted(o[0].split(":")[0] for o in outs)
    # one run did the work, the other waited for the lock and then found nothing new
    assert first == ["full", "nothing new"], outs
    man = read_manifest(tmp_path / "out" / "result")
    assert man["rows"]["after"] == 900
    vals, _ = rnca_reference(data(), seed=7)
    np.testing.assert_allclose(eigenvalues(distsketch.load(tmp_path / "out" / "result" / "model.zarr")[-1]),
                               vals, rtol=1e-9, atol=1e-12)


def test_output_dir_under_a_regular_file_is_a_store_error(tmp_path):
    make_input(tmp_path / "X.zarr", data())
    (tmp_path / "afile").write_text("x")
    cfg = spec(tmp_path, outputs={"dir": str(tmp_path / "afile" / "out")})
    with pytest.raises(StoreError, match="cannot write the output folder"):
        run_workflow(cfg, log=lambda m: None)
    assert (tmp_path / "afile").read_text() == "x"


def test_manifest_is_json_serialisable_spec_roundtrip(tmp_path):
    make_input(tmp_path / "X.zarr", data())
    res = run_workflow(spec(tmp_path), log=lambda m: None)
    man = json.loads((res.result_dir / "distsketch-manifest.json").read_text())
    assert man["spec"]["method"]["name"] == "StreamingKernelPCA"
    assert man["spec_key"] == res.manifest["spec_key"]
    assert man["status"] == "full" and man["segments"] == 3
