"""A workflow on a labelled store fits the store's labels, as ``distsketch fit`` does, and
numbered class labels (a CSV's 1..3, stored as float64) come back as integers."""

from __future__ import annotations

import numpy as np
import pytest
import zarr
from sklearn.metrics import r2_score

import distsketch
from distsketch import RandomFourierFeatures
from distsketch.io import open_array, read_manifest
from distsketch.io.readers import ingest
from distsketch.workflow import load_workflow_spec, run_workflow

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _csv(path, X, labels, fmt="{}"):
    with open(path, "w") as f:
        f.write("a,b,label\n")
        for row, label in zip(X, labels):
            f.write(f"{row[0]:.17g},{row[1]:.17g},{fmt.format(label)}\n")


def _three_classes(n=600, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.5, 1.5, size=(n, 2))
    k = np.where(np.hypot(X[:, 0], X[:, 1]) < 0.7, 1, np.where(X[:, 0] > 0, 2, 3))
    return X, k


def _spec(tmp, method, **extra):
    return {"input": str(tmp / "t.zarr"), "seed": 3, "segment_rows": 200,
            "method": {"name": method, "params": {
                "features": RandomFourierFeatures(gamma=1.0, n_components=100),
                "standardize": False}},
            "outputs": {"dir": str(tmp / "out")}, "cluster": "sync",
            "report": {"kernel_error": False, "png": False}, **extra}


def _result(tmp):
    model = distsketch.load(tmp / "out" / "result" / "model.zarr")
    pred = zarr.open_group(str(tmp / "out" / "result" / "predictions.zarr"),
                           mode="r")["predictions"][...]
    return model, pred


def test_a_classifier_on_a_labelled_store_fits_its_labels_as_integers(tmp_path):
    X, k = _three_classes()
    _csv(tmp_path / "t.csv", X, k)
    ingest(tmp_path / "t.csv", tmp_path / "t.zarr", label_column="label", dtype="float64",
           chunk_rows=100)
    assert zarr.open_group(str(tmp_path / "t.zarr"), mode="r")["y"].dtype == np.float64
    said = []
    spec = load_workflow_spec(_spec(tmp_path, "SketchedKernelRidgeClassifier"))
    assert spec.targets == f"{tmp_path / 't.zarr'}::y" and spec.targets_from_input
    res = run_workflow(spec, log=said.append)
    assert res.status == "full"
    assert any("stored with the input" in line for line in said)
    model, pred = _result(tmp_path)
    assert model.classes_.dtype == np.int64
    np.testing.assert_array_equal(model.classes_, [1, 2, 3])
    assert pred.dtype == np.int64
    Xs = open_array(tmp_path / "t.zarr").compute()
    np.testing.assert_array_equal(pred, model.predict(Xs))
    assert np.mean(pred == k) > 0.9
    man = read_manifest(tmp_path / "out" / "result")
    assert man["fit"]["value"] == pytest.approx(np.mean(pred == k))


def test_explicit_float_class_numbers_come_back_as_integers(tmp_path):
    X, k = _three_classes(seed=1)
    zarr.create_array(store=str(tmp_path / "X.zarr"), shape=X.shape, dtype=X.dtype,
                      chunks=(100, 2))[...] = X
    zarr.create_array(store=str(tmp_path / "y.zarr"), shape=k.shape, dtype=np.float64,
                      chunks=(100,))[...] = k.astype(np.float64)
    s = {**_spec(tmp_path, "SketchedKernelRidgeClassifier"), "input": str(tmp_path / "X.zarr"),
         "targets": str(tmp_path / "y.zarr")}
    run_workflow(s, log=lambda m: None)
    model, pred = _result(tmp_path)
    assert pred.dtype == np.int64 and model.classes_.dtype == np.int64
    np.testing.assert_array_equal(pred, model.predict(X))
    assert not load_workflow_spec(s).targets_from_input


def test_a_regressor_on_a_labelled_store_fits_its_targets(tmp_path):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(400, 2))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1]
    _csv(tmp_path / "t.csv", X, y, "{:.17g}")
    ingest(tmp_path / "t.csv", tmp_path / "t.zarr", label_column="label", dtype="float64",
           chunk_rows=100)
    spec = load_workflow_spec({**_spec(tmp_path, "SketchedKernelRidge"),
                               "method": {"name": "SketchedKernelRidge", "params": {
                                   "features": RandomFourierFeatures(gamma=0.5,
                                                                     n_components=100),
                                   "standardize": False, "alpha": 1e-3}}})
    assert spec.targets == f"{tmp_path / 't.zarr'}::y"
    run_workflow(spec, log=lambda m: None)
    model, pred = _result(tmp_path)
    np.testing.assert_allclose(pred, model.predict(X), rtol=1e-6, atol=1e-9)
    man = read_manifest(tmp_path / "out" / "result")
    assert man["fit"]["value"] == pytest.approx(r2_score(y, pred), rel=1e-9)


def test_an_unsupervised_method_on_a_labelled_store_takes_no_targets(tmp_path):
    X, k = _three_classes(n=300)
    _csv(tmp_path / "t.csv", X, k)
    ingest(tmp_path / "t.csv", tmp_path / "t.zarr", label_column="label", dtype="float64")
    spec = load_workflow_spec({**_spec(tmp_path, "StreamingKernelPCA"), "method": {
        "name": "StreamingKernelPCA", "params": {"n_components": 2, "gamma": 1.0}}})
    assert spec.targets is None and not spec.targets_from_input
    assert "targets_from_input" not in spec.as_dict()


def test_whole_number_labels():
    from distsketch.workflow.spec_targets import whole_number_labels

    out = whole_number_labels(np.array([1.0, 7.0, 3.0]))
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, [1, 7, 3])
    for values in ([1.0, 2.5], [1.0, np.nan], [1.0, 2.0**60]):
        assert whole_number_labels(np.array(values)).dtype == np.float64
    text = np.array(["a", "b"])
    assert whole_number_labels(text) is text
