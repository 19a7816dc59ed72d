"""Supervised workflows: a ``features:`` block with ``gamma: median``, predictions and a fit
metric in report and manifest, and the scaler saved with the model (one Pipeline)."""

from __future__ import annotations

import numpy as np
import pytest
import zarr
from sklearn.metrics import accuracy_score, r2_score
from sklearn.pipeline import Pipeline

import distsketch
from distsketch import RandomFourierFeatures, SketchedKernelRidge, SketchedKernelRidgeClassifier
from distsketch.errors import ConfigError
from distsketch.io import open_array, read_manifest
from distsketch.metrics import sample_rows
from distsketch.workflow import load_workflow_spec, run_workflow
from distsketch.workflow.preprocess import Standardizer

SEED = 5


def quiet(msg):
    pass


def write(path, a, chunk=150):
    arr = zarr.create_array(store=str(path), shape=a.shape, dtype=a.dtype,
                            chunks=(chunk, *a.shape[1:]), overwrite=True)
    arr[...] = a


def classes_data(n=900, seed=0):
    """Three classes in the plane on an unstandardised scale (x1 in tens, x2 in hundredths)."""
    rng = np.random.default_rng(seed)
    U = rng.uniform(-1.5, 1.5, size=(n, 2))
    y = np.where(np.hypot(U[:, 0], U[:, 1]) < 0.7, 0, np.where(U[:, 0] > 0, 1, 2))
    return (U * [30.0, 0.01] + [5.0, -2.0]).astype(np.float32), y.astype(np.int64)


def standardised(X):
    """The workflow's standardisation in NumPy: float64 moments, applied in X's dtype."""
    mean, std = X.astype(np.float64).mean(axis=0), X.astype(np.float64).std(axis=0)
    return ((X - mean.astype(X.dtype)) / std.astype(X.dtype)).astype(X.dtype)


def reference_median_gamma(Xs, seed):
    """1 / median squared distance over the 1000-row sample the workflow draws."""
    _, S = sample_rows(Xs, 1000, seed)
    from scipy.spatial.distance import pdist

    return 1.0 / np.median(pdist(S, "sqeuclidean"))


def classifier_spec(tmp, **outputs):
    return {
        "input": str(tmp / "X.zarr"), "targets": str(tmp / "y.zarr"), "seed": SEED,
        "segment_rows": 300, "preprocessing": {"standardize": True},
        "method": {"name": "SketchedKernelRidgeClassifier",
                   # the spec standardises in preprocessing (over every row of the first
                   # run); the model's own standardisation would take the first segment's
                   "params": {"alpha": 1e-3, "standardize": False},
                   "features": {"name": "RandomFourierFeatures", "n_components": 128,
                                "gamma": "median"}},
        "outputs": {"dir": str(tmp / "out"), **outputs}, "cluster": "sync",
        "report": {"kernel_error": False, "png": False},
    }


# ------------------------------------------------------------------ a classifier end to end


def test_classifier_with_features_block_median_gamma_predictions_and_accuracy(tmp_path):
    X, y = classes_data()
    write(tmp_path / "X.zarr", X)
    write(tmp_path / "y.zarr", y)
    res = run_workflow(classifier_spec(tmp_path), log=quiet)
    out = res.result_dir
    man = read_manifest(out)
    Xs = standardised(X)

    # gamma: median was chosen on the standardised rows and reached the feature map
    gamma = reference_median_gamma(Xs, SEED)
    np.testing.assert_allclose(man["resolved_params"]["features.gamma"], gamma, rtol=1e-9)
    pipe = distsketch.load(out / "model.zarr")
    assert isinstance(pipe, Pipeline) and isinstance(pipe[0], Standardizer)
    model = pipe[-1]
    assert isinstance(model.features_, RandomFourierFeatures)
    np.testing.assert_allclose(model.features_.gamma, gamma, rtol=1e-9)
    assert model.features_.n_components == 128

    # the folded model equals one fit of the same classifier on the standardised rows
    ref = SketchedKernelRidgeClassifier(
        alpha=1e-3, features=RandomFourierFeatures(n_components=128, gamma=model.features_.gamma),
        standardize=False, random_state=SEED).fit(Xs, y)
    np.testing.assert_allclose(model.decision_function(Xs), ref.decision_function(Xs),
                               rtol=1e-6, atol=1e-8)

    # predictions of every row: the saved Pipeline on raw rows gives them bitwise
    pred = zarr.open_array(str(out / "predictions.zarr"), path="predictions")[...]
    assert pred.shape == (900,)  # labels: one value per row, as the CLI writes them
    np.testing.assert_array_equal(pred, pipe.predict(X))
    np.testing.assert_array_equal(pred, model.predict(Xs))
    assert not (out / "features.zarr").exists()  # a classifier has no transform

    # training accuracy in the manifest and both reports, equal to scikit-learn's
    acc = accuracy_score(y, pred)
    assert acc > 0.9  # the median heuristic scale separates the disc from the halves
    fit = man["fit"]
    assert fit["available"] and fit["metric"] == "accuracy" and fit["rows"] == 900
    assert fit["value"] == pytest.approx(acc, abs=1e-15)
    assert fit["predictions"] == "predictions.zarr"
    assert {"predictions.zarr", "report.md", "report.html", "model.zarr"} <= set(man["files"])
    md = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    assert f"training accuracy: {acc:.4f} on 900 rows" in md
    assert f"training accuracy: {acc:.4f} on 900 rows" in html
    assert "exposes no eigenvalues" not in md and "predicts its targets" in md


def test_predictions_can_be_turned_off_and_the_metric_stays(tmp_path):
    X, y = classes_data(600, seed=1)
    write(tmp_path / "X.zarr", X)
    write(tmp_path / "y.zarr", y)
    res = run_workflow(classifier_spec(tmp_path, predictions=False), log=quiet)
    man = read_manifest(res.result_dir)
    assert not (res.result_dir / "predictions.zarr").exists()
    pipe = distsketch.load(res.result_dir / "model.zarr")
    assert man["fit"]["predictions"] is None
    assert man["fit"]["value"] == pytest.approx(accuracy_score(y, pipe.predict(X)), abs=1e-15)


# ------------------------------------------------------------------ a regressor


def test_regressor_reports_r2_equal_to_sklearn(tmp_path):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(700, 3))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.05 * rng.normal(size=700)
    write(tmp_path / "X.zarr", X)
    write(tmp_path / "y.zarr", y, chunk=100)
    cfg = {"input": str(tmp_path / "X.zarr"), "targets": str(tmp_path / "y.zarr"), "seed": 1,
           "segment_rows": 250,
           "method": {"name": "SketchedKernelRidge", "params": {"alpha": 1e-2},
                      "features": {"name": "RandomFourierFeatures",
                                   "params": {"n_components": 64, "gamma": 0.3}}},
           "outputs": {"dir": str(tmp_path / "out"), "predictions": "yhat.zarr"},
           "cluster": "sync", "report": {"kernel_error": False, "png": False}}
    res = run_workflow(cfg, log=quiet)
    model = distsketch.load(res.result_dir / "model.zarr")
    assert isinstance(model, SketchedKernelRidge)  # no preprocessing: the model alone
    pred = zarr.open_array(str(res.result_dir / "yhat.zarr"), path="predictions")[...]
    np.testing.assert_allclose(pred, model.predict(X), rtol=1e-12, atol=1e-12)
    fit = read_manifest(res.result_dir)["fit"]
    # streamed sums in another order than scikit-learn's: equal to float64 rounding
    assert fit["metric"] == "r2" and fit["value"] == pytest.approx(r2_score(y, pred), rel=1e-12)
    assert 0.8 < fit["value"] < 1.0
    assert "training R²" in (res.result_dir / "report.md").read_text()


# ------------------------------------------------------------------ the model is the pipeline


def test_cli_transform_of_raw_rows_through_the_saved_model_equals_features(tmp_path):
    """Item 10: the scaler is in model.zarr, so transform(raw) reproduces features.zarr.

    Bitwise: the Standardizer rounds exactly as the workflow (the same
    function on the same float32 values), and the feature map and projection
    are row-wise and chunking-independent.
    """
    from distsketch import cli

    rng = np.random.default_rng(3)
    X = (rng.normal(size=(800, 4)) * [1.0, 10.0, 100.0, 0.1] + 3).astype(np.float32)
    write(tmp_path / "X.zarr", X, chunk=130)
    cfg = {"input": str(tmp_path / "X.zarr"), "seed": 2, "segment_rows": 300,
           "preprocessing": {"standardize": True},
           "method": {"name": "StreamingKernelPCA",
                      "params": {"method": "rnca", "n_random_features": 64, "n_components": 4,
                                 "gamma": "median"}},
           "outputs": {"dir": str(tmp_path / "out")}, "cluster": "sync",
           "report": {"kernel_error": False, "png": False}}
    res = run_workflow(cfg, log=quiet)
    feats = zarr.open_array(str(res.result_dir / "features.zarr"), path="X")[...]
    model_path = res.result_dir / "model.zarr"
    assert cli.main(["transform", str(model_path), str(tmp_path / "X.zarr"),
                     str(tmp_path / "Z.zarr"), "--cluster", "sync"]) == 0
    Z = zarr.open_array(str(tmp_path / "Z.zarr"), path="X")[...]
    np.testing.assert_array_equal(Z, feats)
    # lazy from Python too, on another chunking
    pipe = distsketch.load(model_path)
    lazy = pipe.transform(open_array(str(tmp_path / "X.zarr"), block_rows=97))
    assert hasattr(lazy, "dask")
    np.testing.assert_array_equal(lazy.compute(), feats)
    # without the scaler the raw rows give other features (what the old model saved)
    assert not np.allclose(pipe[-1].transform(X), feats, atol=1e-3)
    # a method's own gamma: median is resolved on the standardised rows
    gamma = reference_median_gamma(standardised(X), 2)
    np.testing.assert_allclose(pipe[-1].gamma, gamma, rtol=1e-9)


# ------------------------------------------------------------------ spec errors


def _load(tmp, method, **outputs):
    return load_workflow_spec({"input": str(tmp / "X.zarr"), "targets": str(tmp / "y.zarr"),
                               "method": method, "outputs": {"dir": str(tmp / "o"), **outputs}})


RIDGE = "SketchedKernelRidgeClassifier"


@pytest.mark.parametrize(("method", "match"), [
    ({"name": RIDGE, "features": {"name": "RandomFourierFeatures", "n_compnents": 8}},
     r"method.features: parameter 'n_compnents' is not known for RandomFourierFeatures\. Did "
     r"you mean 'n_components'\? Known parameters: .*gamma.*n_components"),
    ({"name": RIDGE, "features": {"name": "RandomFurierFeatures"}},
     r"unknown method 'RandomFurierFeatures'; valid names.*RandomFourierFeatures"),
    ({"name": RIDGE, "features": {"name": "SketchedKernelRidge"}},
     r"SketchedKernelRidge is not a feature map"),
    ({"name": RIDGE, "features": {"n_components": 8}}, r"method.features needs a 'name'"),
    ({"name": RIDGE, "features": {"name": "RandomFourierFeatures", "gamma": "medain"}},
     r"method.features: .*gamma"),
    ({"name": RIDGE, "features": {"name": "RandomFourierFeatures", "n_components": 0}},
     r"method.features: .*n_components"),
    ({"name": RIDGE, "features": {"name": "RandomFourierFeatures", "params": {}, "gamma": 1.0}},
     r"either beside its name .* or as a 'params' mapping"),
    ({"name": RIDGE, "params": {"features": {"name": "RandomFourierFeatures"}},
      "features": {"name": "RandomFourierFeatures"}}, r"both given; keep one"),
    ({"name": "StreamingKernelPCA", "features": {"name": "RandomFourierFeatures"}},
     r"parameter 'features' is not known for StreamingKernelPCA.*Known parameters"),
    ({"name": RIDGE, "params": {"alpah": 1.0}},
     r"parameter 'alpah' is not known for SketchedKernelRidgeClassifier\. Did you mean 'alpha'"),
])
def test_spec_errors_name_the_problem(tmp_path, method, match):
    with pytest.raises(ConfigError, match=match):
        _load(tmp_path, method)


def test_predictions_output_is_checked(tmp_path):
    method = {"name": RIDGE}
    with pytest.raises(ConfigError, match=r"outputs\.predictions and outputs\.features are both"):
        _load(tmp_path, method, predictions="p.zarr", features="p.zarr")
    with pytest.raises(ConfigError, match=r"outputs\.predictions must be true, false or a plain"):
        _load(tmp_path, method, predictions="../p.zarr")
    assert _load(tmp_path, method, predictions=True).outputs.predictions is True


def test_features_block_is_normalised_and_keys_the_state(tmp_path):
    block = {"name": "randomfourierfeatures", "n_components": 16, "gamma": "median"}
    a = _load(tmp_path, {"name": RIDGE, "features": block})
    b = _load(tmp_path, {"name": RIDGE, "params": {"features": {
        "name": "RandomFourierFeatures", "params": {"n_components": 16, "gamma": "median"}}}})
    assert a.method.params["features"] == {"name": "RandomFourierFeatures",
                                           "params": {"n_components": 16, "gamma": "median"}}
    assert a.key() == b.key()  # the two spellings are the same spec
    c = _load(tmp_path, {"name": RIDGE, "features": {**block, "n_components": 32}})
    assert c.key() != a.key()


def test_shipped_classifier_spec_is_valid():
    from pathlib import Path

    path = Path(__file__).parents[2] / "workflows" / "krr_classifier.yaml"
    spec = load_workflow_spec(path)
    assert spec.method.name == "SketchedKernelRidgeClassifier"
    assert "features" not in spec.method.params  # the classifier's default map, gamma chosen
    assert spec.outputs.predictions is True and spec.preprocessing.standardize


def test_incremental_run_keeps_the_median_gamma_and_predicts_every_row(tmp_path):
    X, y = classes_data(1200, seed=4)
    write(tmp_path / "X.zarr", X[:600])
    write(tmp_path / "y.zarr", y)  # targets may run ahead of the input
    first = run_workflow(classifier_spec(tmp_path), log=quiet)
    gamma = read_manifest(first.result_dir)["resolved_params"]["features.gamma"]
    np.testing.assert_allclose(gamma, reference_median_gamma(standardised(X[:600]), SEED),
                               rtol=1e-9)
    arr = zarr.open_array(str(tmp_path / "X.zarr"), mode="r+")
    arr.resize((1200, 2))
    arr[600:] = X[600:]
    second = run_workflow(classifier_spec(tmp_path), log=quiet)
    assert second.status == "incremental"
    man = read_manifest(second.result_dir)
    # chosen once, when the state was created; the rerun reports the state's value
    assert man["resolved_params"]["features.gamma"] == gamma
    pipe = distsketch.load(second.result_dir / "model.zarr")
    assert pipe[-1].features_.gamma == gamma and pipe[-1].n_samples_seen_ == 1200
    pred = zarr.open_array(str(second.result_dir / "predictions.zarr"), path="predictions")[...]
    np.testing.assert_array_equal(pred, pipe.predict(X))
    assert man["fit"]["rows"] == 1200
    assert man["fit"]["value"] == pytest.approx(accuracy_score(y, pred), abs=1e-15)


# ------------------------------------------------------------------ a held-out fraction


def test_holdout_rows_are_left_out_of_the_fit_and_measured(tmp_path):
    from distsketch.ops.random import hash_uniform

    X, y = classes_data(1000, seed=6)
    write(tmp_path / "X.zarr", X)
    write(tmp_path / "y.zarr", y)
    cfg = classifier_spec(tmp_path)
    cfg["method"]["holdout"] = 0.2
    res = run_workflow(cfg, log=quiet)
    # held out: rows whose hash of (seed, row) is below the fraction
    mask = hash_uniform(SEED, "workflow.holdout", np.arange(1000)) < 0.2
    assert abs(mask.mean() - 0.2) < 4 * np.sqrt(0.2 * 0.8 / 1000)  # binomial, 4 sd
    pipe = distsketch.load(res.result_dir / "model.zarr")
    model = pipe[-1]
    assert model.n_samples_seen_ == (~mask).sum()
    Xs = standardised(X)
    ref = SketchedKernelRidgeClassifier(
        alpha=1e-3, features=RandomFourierFeatures(n_components=128, gamma=model.features_.gamma),
        standardize=False, random_state=SEED).fit(Xs[~mask], y[~mask])
    np.testing.assert_allclose(model.decision_function(Xs), ref.decision_function(Xs),
                               rtol=1e-6, atol=1e-8)
    pred = zarr.open_array(str(res.result_dir / "predictions.zarr"), path="predictions")[...]
    assert pred.shape == (1000,)  # predictions of every row, held out or not
    fit = read_manifest(res.result_dir)["fit"]
    assert fit["on"] == "held-out rows" and fit["holdout"] == 0.2 and fit["rows"] == mask.sum()
    assert fit["value"] == pytest.approx(accuracy_score(y[mask], pred[mask]), abs=1e-15)
    assert "held-out accuracy" in (res.result_dir / "report.md").read_text()


def test_holdout_r2_of_a_regressor_equals_sklearn(tmp_path):
    from distsketch.ops.random import hash_uniform

    rng = np.random.default_rng(7)
    X = rng.normal(size=(600, 2))
    y = np.stack([np.cos(X[:, 0]), X[:, 1] ** 2], axis=1) + 0.05 * rng.normal(size=(600, 2))
    write(tmp_path / "X.zarr", X)
    write(tmp_path / "y.zarr", y)
    cfg = {"input": str(tmp_path / "X.zarr"), "targets": str(tmp_path / "y.zarr"), "seed": 3,
           "method": {"name": "SketchedKernelRidge", "holdout": 0.25, "params": {"alpha": 1e-2},
                      "features": {"name": "RandomFourierFeatures", "n_components": 64,
                                   "gamma": 0.5}},
           "outputs": {"dir": str(tmp_path / "out")}, "cluster": "sync",
           "report": {"kernel_error": False, "png": False}}
    res = run_workflow(cfg, log=quiet)
    mask = hash_uniform(3, "workflow.holdout", np.arange(600)) < 0.25
    pred = zarr.open_array(str(res.result_dir / "predictions.zarr"), path="predictions")[...]
    fit = read_manifest(res.result_dir)["fit"]
    assert fit["rows"] == mask.sum() and fit["metric"] == "r2"
    assert fit["value"] == pytest.approx(r2_score(y[mask], pred[mask]), rel=1e-12)


@pytest.mark.parametrize(("method", "match"), [
    ({"name": RIDGE, "holdout": 0.7},
     r"method: key holdout=0.7 is invalid; it must be a fraction in \(0, 0.5\]"),
    ({"name": RIDGE, "holdout": True}, r"method: key holdout=True is invalid; it must be a fraction"),
    ({"name": "StreamingKernelPCA", "holdout": 0.1}, r"needs a method that predicts"),
    ({"name": RIDGE, "holdout": 0.1, "params": {"holdout": 0.2}}, r"both given; keep one"),
])
def test_holdout_spec_errors(tmp_path, method, match):
    with pytest.raises(ConfigError, match=match):
        _load(tmp_path, method)


# ------------------------------------------------------------------ no better than a constant


def test_a_model_no_better_than_the_majority_label_is_flagged(tmp_path, caplog):
    rng = np.random.default_rng(8)
    X = rng.normal(size=(800, 3)).astype(np.float32)
    y = (rng.uniform(size=800) < 0.2).astype(np.int64)  # labels independent of X, 80 % zeros
    write(tmp_path / "X.zarr", X)
    write(tmp_path / "y.zarr", y)
    cfg = classifier_spec(tmp_path)
    cfg["method"]["holdout"] = 0.5
    # a kernel far too narrow for unit-scale rows: every held-out row is far from the training rows
    cfg["method"]["features"]["gamma"] = 1e4
    with caplog.at_level("WARNING", logger="distsketch"):
        res = run_workflow(cfg, log=quiet)
    fit = read_manifest(res.result_dir)["fit"]
    pred = zarr.open_array(str(res.result_dir / "predictions.zarr"), path="predictions")[...]
    mask = held_out_rows(800)
    assert fit["baseline"] == np.bincount(y[mask]).max() / mask.sum()
    assert fit["value"] == pytest.approx(accuracy_score(y[mask], pred[mask]), abs=1e-15)
    assert fit["value"] <= fit["baseline"] and "no better than always predicting" in fit["warning"]
    assert "no better than always predicting" in caplog.text
    assert "WARNING: accuracy" in (res.result_dir / "report.md").read_text()


def held_out_rows(n, seed=SEED, fraction=0.5):
    from distsketch.ops.random import hash_uniform

    return hash_uniform(seed, "workflow.holdout", np.arange(n)) < fraction


def test_a_useful_model_has_no_warning_and_reports_its_baseline(tmp_path):
    X, y = classes_data(600, seed=9)
    write(tmp_path / "X.zarr", X)
    write(tmp_path / "y.zarr", y)
    res = run_workflow(classifier_spec(tmp_path), log=quiet)
    fit = read_manifest(res.result_dir)["fit"]
    assert fit["baseline"] == np.bincount(y).max() / 600
    assert fit["value"] > fit["baseline"] and "warning" not in fit


def test_fit_metric_streams_r2_and_flags_a_constant_predictor(tmp_path):
    from distsketch.workflow.predictions import fit_metric

    rng = np.random.default_rng(10)
    y = rng.normal(size=(1000, 2)) * [1.0, 1e3] + [0.0, 1e6]  # a large offset: Chan's merge holds
    write(tmp_path / "y.zarr", y, chunk=64)
    good = y + 0.1 * rng.normal(size=y.shape) * [1.0, 1e3]
    fit = fit_metric(good, str(tmp_path / "y.zarr"), 1000, classifier=False, block_rows=100)
    assert fit["value"] == pytest.approx(r2_score(y, good), rel=1e-12) and "warning" not in fit
    const = np.broadcast_to(y.mean(axis=0) + np.array([0.05, 50.0]), y.shape)
    fit = fit_metric(const, str(tmp_path / "y.zarr"), 1000, classifier=False, block_rows=100)
    assert fit["value"] == pytest.approx(r2_score(y, const), rel=1e-9) and fit["value"] < 0
    assert "no better than always predicting the mean" in fit["warning"]
    path = fit_metric(np.zeros((1000, 6)), str(tmp_path / "y.zarr"), 1000, classifier=False)
    assert not path["available"] and "one per alpha" in path["reason"]
