"""Damaged workflow state, corrupt manifests and unsavable random states.

Each case damages what a run left behind (or hands in what cannot be saved)
and checks for one clear ``StoreError`` that names the file and the fix,
never "unexpected error" or NumPy's hint to enable pickling; that the files
already there are byte-for-byte intact; and that ``--full`` gets past it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
import zarr
from sklearn.kernel_approximation import RBFSampler

from distsketch import RandomFourierFeatures, SketchedKernelRidge, StreamingKernelPCA
from distsketch.errors import StoreError
from distsketch.io import load, read_manifest, save_model
from distsketch.workflow import run_workflow

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

CLI = [sys.executable, "-c", "import sys; from distsketch.cli import main; sys.exit(main())"]
X = np.random.default_rng(3).normal(size=(300, 4))


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def workflow(tmp_path: Path, rows: int = 200) -> dict:
    arr = zarr.create_array(store=str(tmp_path / "X.zarr"), shape=(rows, 4), dtype=X.dtype,
                            chunks=(100, 4), overwrite=True)
    arr[...] = X[:rows]
    return {"input": str(tmp_path / "X.zarr"), "segment_rows": 100, "cluster": "sync", "seed": 1,
            "method": {"name": "StreamingKernelPCA",
                       "params": {"n_random_features": 16, "n_components": 2, "sketch_size": 8}},
            "outputs": {"dir": str(tmp_path / "out")},
            "report": {"kernel_error": False, "png": False}}


def append(tmp_path: Path, rows: int = 100) -> None:
    arr = zarr.open_array(str(tmp_path / "X.zarr"), mode="r+")
    n = arr.shape[0]
    arr.resize((n + rows, 4))
    arr[n:] = X[n:n + rows]


def quiet(msg: str) -> None:
    pass


@pytest.fixture
def finished(tmp_path) -> tuple[dict, Path]:
    """A committed run over 200 rows; 100 more rows appended to the input."""
    cfg = workflow(tmp_path)
    run_workflow(cfg, log=quiet)
    append(tmp_path)
    return cfg, tmp_path / "out"


def refused_then_full(cfg: dict, out: Path, *needles: str) -> None:
    before = snapshot(out)
    with pytest.raises(StoreError) as exc:
        run_workflow(cfg, log=quiet)
    msg = str(exc.value)
    for needle in needles:
        assert needle in msg, (needle, msg)
    assert "--full" in msg and "allow_pickle" not in msg and "unexpected" not in msg
    after = snapshot(out)
    after.pop(".lock", None), before.pop(".lock", None)
    assert after == before
    res = run_workflow(cfg, full=True, log=quiet)
    assert res.status == "full" and res.rows_after == 300
    assert read_manifest(res.result_dir)["rows"]["after"] == 300


# --- workflow state -------------------------------------------------------------------------

@pytest.mark.parametrize("content, needle", [
    (b"\x93NUMPY\x00\xff garbage \x00", "UnicodeDecodeError"),
    (b"{\"version\": 1, ", "JSONDecodeError"),
    (b"[1, 2, 3]", "JSON list, not an object"),
])
def test_garbage_state_json(finished, content, needle):
    cfg, out = finished
    (out / "state" / "state.json").write_bytes(content)
    refused_then_full(cfg, out, str(out / "state" / "state.json"), needle, "damaged")


@pytest.mark.parametrize("field, value", [("rows_done", "200"), ("rows_done", -5),
                                          ("prefix_fingerprint", None), ("n_features", 4.5)])
def test_state_with_wrong_field_types(finished, field, value):
    cfg, out = finished
    p = out / "state" / "state.json"
    state = json.loads(p.read_text())
    state[field] = value
    p.write_text(json.dumps(state))
    refused_then_full(cfg, out, f"{field} is {value!r}", "damaged")


def test_garbage_summary_store(finished):
    cfg, out = finished
    meta = out / "state" / "summary" / "model.zarr" / "zarr.json"
    meta.write_bytes(os.urandom(64))
    refused_then_full(cfg, out, "workflow state", "summary")


def test_object_array_in_the_summary_is_refused_not_unpickled(finished):
    cfg, out = finished
    g = zarr.open_group(str(out / "state" / "summary" / "model.zarr" / "state"), mode="r+")
    g.create_array("sketch_", shape=(8,), dtype=str, overwrite=True)[...] = np.array(["x"] * 8)
    refused_then_full(cfg, out, "sketch_", "not numeric")


def test_summary_naming_a_foreign_class_is_refused(finished):
    cfg, out = finished
    meta = out / "state" / "summary" / "model.zarr" / "zarr.json"
    body = json.loads(meta.read_text())
    body["attributes"]["class"] = "subprocess.Popen"
    meta.write_text(json.dumps(body))
    refused_then_full(cfg, out, "'subprocess.Popen'")


def test_garbage_npz_of_the_former_format_is_never_loaded(finished):
    cfg, out = finished
    npz = out / "state" / "summary" / "covariance.npz"
    npz.write_bytes(b"PK\x03\x04 not a zip at all")
    # the checkpoint is its model store only: a stray file of the former format is never
    # opened, and the next checkpoint replaces state/ without it
    res = run_workflow(cfg, log=quiet)
    assert res.status == "incremental" and res.rows_after == 300
    assert not npz.exists()


# --- manifests ------------------------------------------------------------------------------

@pytest.mark.parametrize("content, needle", [
    (b"{\"rows\": {\"after\": 2", "JSONDecodeError"),
    (b"\xff\xfe\x00", "UnicodeDecodeError"),
    (b"\"a string\"", "JSON str, not an object"),
])
def test_read_manifest_refuses_a_corrupt_manifest(tmp_path, content, needle):
    (tmp_path / "distsketch-manifest.json").write_bytes(content)
    with pytest.raises(StoreError) as exc:
        read_manifest(tmp_path)
    assert "distsketch-manifest.json is corrupt" in str(exc.value) and needle in str(exc.value)
    assert (tmp_path / "distsketch-manifest.json").read_bytes() == content


def test_corrupt_result_manifest_is_refused_and_full_gets_past_it(finished):
    cfg, out = finished
    (out / "result" / "distsketch-manifest.json").write_bytes(b"{ truncated")
    refused_then_full(cfg, out, "distsketch-manifest.json is corrupt")


def test_corrupt_model_manifest_is_a_store_error(tmp_path):
    p = RandomFourierFeatures(n_components=4, random_state=0).fit(X).save(tmp_path / "m.zarr")
    (p / "distsketch-manifest.json").write_bytes(b"\x00\x01")
    with pytest.raises(StoreError, match=r"manifest .* is corrupt"):
        load(p)


@pytest.mark.system
def test_cli_run_names_the_corrupt_manifest_and_full_gets_past_it(finished, tmp_path):
    cfg, out = finished
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(cfg))
    (out / "result" / "distsketch-manifest.json").write_bytes(b"]]")
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    res = subprocess.run([*CLI, "run", str(spec)], capture_output=True, text=True, env=env,
                         timeout=300)
    assert res.returncode == 2 and "manifest" in res.stderr and "is corrupt" in res.stderr
    assert "unexpected" not in res.stderr
    res = subprocess.run([*CLI, "run", str(spec), "--full"], capture_output=True, text=True,
                         env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert read_manifest(out / "result")["rows"]["after"] == 300


# --- random states --------------------------------------------------------------------------

@pytest.mark.parametrize("make", [lambda: np.random.RandomState(11),
                                  lambda: np.random.default_rng(11)],
                         ids=["RandomState", "Generator"])
def test_random_state_objects_save_the_drawn_seed(tmp_path, make):
    model = StreamingKernelPCA(n_components=2, n_random_features=16, sketch_size=8,
                               random_state=make()).fit(X)
    back = load(model.save(tmp_path / "m.zarr"))
    assert back.random_state == back.seed_ == model.seed_
    np.testing.assert_array_equal(back.transform(X), model.transform(X))
    # the stored seed reproduces the model on refit
    refit = StreamingKernelPCA(**back.get_params()).fit(X)
    np.testing.assert_array_equal(refit.components_, model.components_)
    # a second fit of a fresh generator with the same seed draws the same seed
    assert StreamingKernelPCA(n_components=2, n_random_features=16, sketch_size=8,
                              random_state=make()).fit(X).seed_ == model.seed_


def test_random_state_object_with_no_drawn_seed_is_a_clear_error(tmp_path):
    y = X[:, 0]
    model = SketchedKernelRidge(features=RBFSampler(n_components=8,
                                                    random_state=np.random.RandomState(0)),
                                random_state=0).fit(X, y)
    with pytest.raises(StoreError, match=r"RBFSampler: random_state is a RandomState object"):
        save_model(model, tmp_path / "m.zarr")
    assert list(tmp_path.iterdir()) == []  # nothing written, no .tmp-* left
