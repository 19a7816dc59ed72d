"""Every kind of distsketch output opens in xarray.

Outputs are Zarr groups (features as ``X``, predictions as ``predictions``)
with consolidated metadata; arrays carry ``dimension_names``, and the
manifest's provenance is also a Zarr attribute.
"""

from __future__ import annotations

import uuid
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import zarr

import distsketch
import distsketch.cli as cli
from distsketch.errors import StoreError
from distsketch.io import ingest, open_array, read_manifest, write_array
from distsketch.workflow import run_workflow

xr = pytest.importorskip("xarray")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _data(n: int = 200, d: int = 5, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)


def test_ingested_store_opens_in_xarray(tmp_path):
    X = _data()
    y = (np.arange(200) % 4).astype(np.int64)
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", y)
    ingest(tmp_path / "x.npy", tmp_path / "x.zarr", chunk_rows=64, labels=tmp_path / "y.npy")
    ds = xr.open_zarr(tmp_path / "x.zarr", consolidated=True)  # fails without consolidation
    assert ds["X"].dims == ("sample", "feature") and ds["y"].dims == ("sample",)
    np.testing.assert_array_equal(ds["X"].values, X)
    np.testing.assert_array_equal(ds["y"].values, y)
    prov = ds.attrs["provenance"]
    manifest = read_manifest(tmp_path / "x.zarr")
    assert prov["source"] == manifest["source"] == str(tmp_path / "x.npy")
    assert prov["format"] == "npy" and prov["rows"] == 200
    assert prov["distsketch_version"] == distsketch.__version__


def test_written_array_is_a_group_holding_x(tmp_path):
    X = _data()
    out = write_array(X, tmp_path / "z.zarr", chunk_rows=50, manifest={"stage": "features"})
    arr = zarr.open_array(str(out), path="X", mode="r")
    assert tuple(arr.metadata.dimension_names) == ("sample", "component")
    assert arr.attrs["provenance"]["stage"] == "features"
    assert arr.attrs["provenance"]["shape"] == [200, 5]
    ds = xr.open_zarr(out, consolidated=True)
    assert list(ds.data_vars) == ["X"] and ds["X"].dims == ("sample", "component")
    np.testing.assert_array_equal(ds["X"].values, X)
    assert ds.attrs["provenance"]["array"] == "X"
    # distsketch reads X by default and by name, as in an ingested store
    np.testing.assert_array_equal(open_array(out).compute(), X)
    np.testing.assert_array_equal(open_array(f"{out}::X").compute(), X)
    with pytest.raises(StoreError, match=r"one of \['X'\]"):
        open_array(f"{out}::features")


def test_reading_an_output_group_does_not_warn(tmp_path):
    # the manifest beside the arrays is no Zarr node: opening X must not list the group
    X = _data()
    out = write_array(X, tmp_path / "z.zarr", chunk_rows=20)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = open_array(out, block_rows=20).compute(scheduler="threads")
    np.testing.assert_array_equal(got, X)
    assert not [w for w in seen if "not recognized" in str(w.message)]


def test_one_dimensional_array_has_the_sample_dimension(tmp_path):
    y = np.arange(120, dtype=np.int64) % 3
    out = write_array(y, tmp_path / "y.zarr", chunk_rows=50)
    ds = xr.open_zarr(out, consolidated=True)
    assert ds["X"].dims == ("sample",)
    np.testing.assert_array_equal(ds["X"].values, y)
    np.testing.assert_array_equal(open_array(out, targets=True).compute(), y)


def test_bare_array_when_asked_for(tmp_path):
    X = _data()
    out = write_array(X, tmp_path / "b.zarr", chunk_rows=50, name=None)
    arr = zarr.open_array(zarr.storage.LocalStore(out), mode="r")  # the root is the array
    assert tuple(arr.metadata.dimension_names) == ("sample", "component")
    np.testing.assert_array_equal(arr[...], X)
    np.testing.assert_array_equal(open_array(out).compute(), X)


def test_written_group_opens_in_xarray(tmp_path):
    X = _data()
    model = distsketch.RandomFourierFeatures(n_components=12, random_state=1).fit(X)
    Z = model.transform(X)
    write_array(Z, tmp_path / "f.zarr", chunk_rows=50, name="features",
                manifest={"model_class": "RandomFourierFeatures"})
    ds = xr.open_zarr(tmp_path / "f.zarr", consolidated=True)
    assert ds["features"].dims == ("sample", "component")
    np.testing.assert_array_equal(ds["features"].values, Z)
    assert ds.attrs["provenance"]["model_class"] == "RandomFourierFeatures"
    da_ = xr.open_dataarray(tmp_path / "f.zarr", engine="zarr")
    assert da_.name == "features" and da_.shape == Z.shape
    # distsketch reads the group layout too (the one array, or path::name)
    np.testing.assert_array_equal(open_array(tmp_path / "f.zarr").compute(), Z)
    np.testing.assert_array_equal(open_array(f"{tmp_path / 'f.zarr'}::features").compute(), Z)


def test_model_store_opens_in_xarray(tmp_path):
    X = _data()
    model = distsketch.StreamingKernelPCA(method="rnca", n_components=3, n_random_features=32,
                                          random_state=0).fit(X)
    model.save(tmp_path / "m.zarr")
    root = xr.open_zarr(tmp_path / "m.zarr", consolidated=True)
    assert root.attrs["provenance"]["class"].endswith("StreamingKernelPCA")
    state = xr.open_zarr(tmp_path / "m.zarr", group="state", consolidated=True)
    np.testing.assert_array_equal(state["components_"].values, model.components_)
    assert state["components_"].dims == ("components__0", "components__1")


def test_url_outputs_open_in_xarray(tmp_path):
    X = _data()
    np.save(tmp_path / "x.npy", X)
    base = f"memory://xr-{uuid.uuid4().hex[:8]}"
    ingest(tmp_path / "x.npy", f"{base}/x.zarr", chunk_rows=64)
    write_array(X * 2, f"{base}/f.zarr", name="features")
    np.testing.assert_array_equal(xr.open_zarr(f"{base}/x.zarr")["X"].values, X)
    np.testing.assert_array_equal(xr.open_zarr(f"{base}/f.zarr")["features"].values, X * 2)


# ------------------------------------------------------------------ CLI and workflow outputs


def _ingest(d, X, y=None):
    np.save(d / "x.npy", X)
    labels = None
    if y is not None:
        np.save(d / "y.npy", y)
        labels = d / "y.npy"
    return ingest(d / "x.npy", d / "x.zarr", chunk_rows=64, labels=labels)


def test_cli_transform_output_opens_in_xarray_and_feeds_fit(tmp_path):
    X = _data()
    _ingest(tmp_path, X)
    model = distsketch.RandomFourierFeatures(n_components=16, random_state=2).fit(X)
    model.save(tmp_path / "m.zarr")
    assert cli.main(["-q", "transform", str(tmp_path / "m.zarr"), str(tmp_path / "x.zarr"),
                     str(tmp_path / "f.zarr"), "--cluster", "sync"]) == 0
    raw = zarr.open_array(str(tmp_path / "f.zarr"), path="X", mode="r")[...]
    np.testing.assert_allclose(raw, model.transform(X), rtol=1e-5, atol=1e-6)
    ds = xr.open_zarr(tmp_path / "f.zarr", consolidated=True)
    assert ds["X"].dims == ("sample", "component") and ds.sizes == {"sample": 200, "component": 16}
    np.testing.assert_array_equal(ds["X"].values, raw)
    assert ds.attrs["provenance"]["model_class"] == "RandomFourierFeatures"
    # the output is an input as it is: fit on its path equals fit on its values
    pca = dict(method="rnca", n_components=2, n_random_features=16, random_state=0)
    a = distsketch.StreamingKernelPCA(**pca).fit(str(tmp_path / "f.zarr"))
    b = distsketch.StreamingKernelPCA(**pca).fit(raw)
    # float32 features: each block's ZᵀZ is a float32 product (within γ_b|Z|ᵀ|Z|, about 1e-4
    # relative for b = 2048), and the two fits block the rows differently
    np.testing.assert_allclose(a.components_, b.components_, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("targets", ["labels", "two-outputs"])
def test_cli_predict_output_opens_in_xarray(tmp_path, targets):
    X = _data(300, 4, seed=3)
    if targets == "labels":
        y = (X[:, 0] > 0).astype(np.int64) + (X[:, 1] > 0)
        est = distsketch.SketchedKernelRidgeClassifier(random_state=0)
    else:
        y = np.stack([np.sin(X[:, 0]), X[:, 1] ** 2], axis=1)
        est = distsketch.SketchedKernelRidge(random_state=0)
    _ingest(tmp_path, X)
    model = est.fit(X, y)
    model.save(tmp_path / "m.zarr")
    assert cli.main(["-q", "predict", str(tmp_path / "m.zarr"), str(tmp_path / "x.zarr"),
                     str(tmp_path / "p.zarr"), "--cluster", "sync"]) == 0
    raw = zarr.open_array(str(tmp_path / "p.zarr"), path="predictions", mode="r")[...]
    np.testing.assert_allclose(raw, model.predict(X), rtol=1e-6, atol=1e-8)
    ds = xr.open_zarr(tmp_path / "p.zarr", consolidated=True)
    dims = ("sample",) if targets == "labels" else ("sample", "output")
    assert list(ds.data_vars) == ["predictions"] and ds["predictions"].dims == dims
    if targets == "labels":  # the classifier's classes, in its order
        assert ds["predictions"].attrs["classes"] == model.classes_.tolist() == [0, 1, 2]
    else:
        assert "classes" not in ds["predictions"].attrs
    np.testing.assert_array_equal(ds["predictions"].values, raw)
    np.testing.assert_array_equal(open_array(tmp_path / "p.zarr", targets=True).compute(), raw)


def _workflow(tmp_path, method, targets=False):
    X = _data(300, 4, seed=4)
    arr = zarr.create_array(store=str(tmp_path / "X.zarr"), shape=X.shape, dtype=X.dtype,
                            chunks=(100, 4))
    arr[...] = X
    spec = {"input": str(tmp_path / "X.zarr"), "seed": 1, "segment_rows": 150,
            "method": method, "outputs": {"dir": str(tmp_path / "out")}, "cluster": "sync",
            "report": {"kernel_error": False, "png": False}}
    if targets:
        y = (X[:, 0] > 0).astype(np.int64)
        t = zarr.create_array(store=str(tmp_path / "y.zarr"), shape=y.shape, dtype=y.dtype,
                              chunks=(100,))
        t[...] = y
        spec["targets"] = str(tmp_path / "y.zarr")
    return X, run_workflow(spec, log=lambda msg: None)


def test_workflow_features_open_in_xarray(tmp_path):
    X, res = _workflow(tmp_path, {"name": "StreamingKernelPCA", "params": {
        "method": "rnca", "n_random_features": 16, "n_components": 2, "sketch_size": 8}})
    path = res.result_dir / "features.zarr"
    raw = zarr.open_array(str(path), path="X", mode="r")[...]
    model = distsketch.load(res.result_dir / "model.zarr")
    np.testing.assert_allclose(raw, model.transform(X), rtol=1e-5, atol=1e-6)
    ds = xr.open_zarr(path, consolidated=True)
    assert ds["X"].dims == ("sample", "component") and ds["X"].shape == (300, 2)
    np.testing.assert_array_equal(ds["X"].values, raw)
    assert ds.attrs["provenance"]["rows"] == 300


def test_workflow_predictions_open_in_xarray(tmp_path):
    X, res = _workflow(tmp_path, {"name": "SketchedKernelRidgeClassifier",
                                  "params": {"alpha": 1e-3}}, targets=True)
    path = res.result_dir / "predictions.zarr"
    raw = zarr.open_array(str(path), path="predictions", mode="r")[...]
    model = distsketch.load(res.result_dir / "model.zarr")
    np.testing.assert_array_equal(raw, model.predict(X))
    ds = xr.open_zarr(path, consolidated=True)
    # labels are one value per row, as distsketch predict writes them
    assert ds["predictions"].dims == ("sample",) and ds["predictions"].shape == (300,)
    np.testing.assert_array_equal(ds["predictions"].values, raw)
    assert ds["predictions"].attrs["classes"] == [0, 1]
    assert ds.attrs["provenance"]["kind"] == "predictions"


def test_sparsified_gram_store_opens_in_xarray(tmp_path):
    X = _data(90, 3, seed=5)
    G = distsketch.SparsifiedGram(gamma=0.5, p=0.4, tile_rows=40, random_state=2,
                                  store=tmp_path / "gram.zarr").fit(X)
    root = xr.open_zarr(tmp_path / "gram.zarr", consolidated=True)
    assert root["diagonal"].dims == ("sample",)
    K = G.to_scipy().toarray()
    np.testing.assert_array_equal(root["diagonal"].values, np.diag(K))
    assert root.attrs["layout"] == "lower-csr-strips"
    for s, (r0, r1) in enumerate(root.attrs["bounds"]):
        strip = xr.open_zarr(tmp_path / "gram.zarr", group=f"strips/{s}", consolidated=True)
        assert strip["data"].dims == strip["indices"].dims == ("nonzero",)
        assert strip["indptr"].dims == ("row_pointer",)
        got = sp.csr_array((strip["data"].values, strip["indices"].values,
                            strip["indptr"].values), shape=(r1 - r0, r1)).toarray()
        np.testing.assert_array_equal(got, np.tril(K)[r0:r1, :r1])


# ------------------------------------------------------------------ one layout for every output


def test_every_output_kind_has_the_documented_dimensions(tmp_path):
    # docs/storage.md "Output layout": data (sample, feature), a model's transform
    # (sample, component), predictions (sample,) or (sample, output); class names and
    # feature names as attributes
    rng = np.random.default_rng(7)
    X = rng.standard_normal((240, 3)).astype(np.float32)
    names = np.array(["ant", "bee", "cat"])[(X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5)]
    lines = ["width,height,depth,kind"] + [
        f"{a},{b},{c},{k}" for (a, b, c), k in zip(X.tolist(), names)]
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    d = {k: str(tmp_path / k) for k in ("t.csv", "x.zarr", "m.zarr", "f.zarr", "c.zarr",
                                        "p.zarr", "q")}
    def run(*args: str) -> int:
        return cli.main(["-q", *args, "--cluster", "sync"])

    assert cli.main(["-q", "ingest", d["t.csv"], d["x.zarr"], "--label-column", "kind"]) == 0
    ds = xr.open_zarr(d["x.zarr"])
    assert ds["X"].dims == ("sample", "feature") and ds["y"].dims == ("sample",)
    assert ds["X"].attrs["feature_names"] == ["width", "height", "depth"]
    assert sorted(ds["y"].attrs["classes"]) == ["ant", "bee", "cat"]

    assert run("fit", d["x.zarr"], d["m.zarr"], "--method", "RandomFourierFeatures",
                     "--param", "n_components=8") == 0
    assert run("transform", d["m.zarr"], d["x.zarr"], d["f.zarr"]) == 0
    f = xr.open_zarr(d["f.zarr"])
    assert list(f.data_vars) == ["X"] and f["X"].dims == ("sample", "component")

    assert run("fit", d["x.zarr"], d["c.zarr"], "--method",
                     "SketchedKernelRidgeClassifier", "--y", d["x.zarr"] + "::y",
                     "--n-features", "32") == 0
    assert run("predict", d["c.zarr"], d["x.zarr"], d["p.zarr"]) == 0
    p = xr.open_zarr(d["p.zarr"])
    assert list(p.data_vars) == ["predictions"] and p["predictions"].dims == ("sample",)
    assert set(p["predictions"].values.tolist()) <= {"ant", "bee", "cat"}
    assert sorted(p["predictions"].attrs["classes"]) == ["ant", "bee", "cat"]
    # predictions read back as targets are the labels (nothing to decode)
    assert (open_array(d["p.zarr"], targets=True).compute().tolist()
            == p["predictions"].values.tolist())

    assert cli.main(["-q", "quickstart", "--rows", "400", "--features", "50", "--out", d["q"],
                     "--n-random-features", "16", "--sketch-size", "8", "--n-components", "2",
                     "--n-sample", "50", "--chunk-rows", "200", "--cluster", "sync"]) == 0
    assert xr.open_zarr(f"{d['q']}/data.zarr")["X"].dims == ("sample", "feature")
    assert xr.open_zarr(f"{d['q']}/embeddings.zarr")["X"].dims == ("sample", "component")

    (tmp_path / "wf1").mkdir()
    (tmp_path / "wf2").mkdir()
    _, res = _workflow(tmp_path / "wf1", {"name": "StreamingKernelPCA", "params": {
        "method": "rnca", "n_random_features": 16, "n_components": 2, "sketch_size": 8}})
    assert xr.open_zarr(res.result_dir / "features.zarr")["X"].dims == ("sample", "component")
    _, res = _workflow(tmp_path / "wf2", {"name": "SketchedKernelRidge",
                                          "params": {"alpha": 1e-3}}, targets=True)
    assert xr.open_zarr(res.result_dir / "predictions.zarr")["predictions"].dims == ("sample",)
