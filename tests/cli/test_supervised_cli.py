"""Supervised work from the command line: ingest a labelled data set, fit a kernel
classifier with a data-driven gamma, predict the test set, score it; the feature
map options; the constant-predictor warning."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest
import zarr
from sklearn.datasets import load_digits
from sklearn.kernel_approximation import RBFSampler
from sklearn.linear_model import RidgeClassifier
from sklearn.metrics import (
    accuracy_score,
    mean_absolute_error,
    r2_score,
    root_mean_squared_error,
)
from sklearn.preprocessing import StandardScaler

import distsketch.cli as cli
import distsketch.cluster
from distsketch import (
    NystromFeatures,
    RandomFourierFeatures,
    SketchedKernelRidge,
    SketchedKernelRidgeClassifier,
    TensorSketch,
)
from distsketch.cli.common import median_gamma
from distsketch.estimators.ridge.defaults import default_n_features
from distsketch.io import load, open_array, read_manifest, write_array
from distsketch.ops.rff import rff_map
from distsketch.summaries.ridge import SLICE_ROWS

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def main_json(capsys, *argv: str) -> dict:
    """Run the CLI in process with --json; stdout must be exactly one JSON object."""
    capsys.readouterr()
    code = cli.main([*map(str, argv), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    """scikit-learn's digits, a fixed 1300/497 split, ingested from .npy with labels."""
    d = tmp_path_factory.mktemp("digits")
    X, y = load_digits(return_X_y=True)
    perm = np.random.default_rng(0).permutation(y.size)
    tr, te = perm[:1300], perm[1300:]
    for name, idx in (("train", tr), ("test", te)):
        np.save(d / f"{name}-x.npy", X[idx].astype(np.float32))
        np.save(d / f"{name}-y.npy", y[idx])
        assert cli.main(["-q", "ingest", str(d / f"{name}-x.npy"), str(d / f"{name}.zarr"),
                         "--labels", str(d / f"{name}-y.npy"), "--chunk-rows", "400"]) == 0
    return d, X[tr].astype(np.float32), y[tr], X[te].astype(np.float32), y[te]


@pytest.fixture(scope="module")
def fitted(digits, tmp_path_factory):
    """The issue's path: fit --features rff --n-features 1024 --gamma median, predict, score."""
    d, *_ = digits
    out = io.StringIO()  # capsys is function-scoped: a module fixture captures by hand
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert cli.main(["fit", str(d / "train.zarr"), str(d / "model.zarr"), "--method",
                         "SketchedKernelRidgeClassifier", "--y", f"{d / 'train.zarr'}::y",
                         "--features", "rff", "--n-features", "1024", "--gamma", "median",
                         "--random-state", "0", "--cluster", "sync", "--json"]) == 0
        fit = json.loads(out.getvalue())
        out.seek(0), out.truncate()
        assert cli.main(["predict", str(d / "model.zarr"), str(d / "test.zarr"),
                         str(d / "pred.zarr"), "--cluster", "sync", "--json"]) == 0
        pred = json.loads(out.getvalue())
        out.seek(0), out.truncate()
        assert cli.main(["--json", "score", str(d / "model.zarr"), str(d / "test.zarr"), "--y",
                         f"{d / 'test.zarr'}::y", "--cluster", "sync"]) == 0
        score = json.loads(out.getvalue())
    return fit, pred, score


def test_median_gamma_reaches_the_feature_map(digits, fitted):
    d, _Xtr, *_ = digits
    fit, _, _ = fitted
    model = load(d / "model.zarr")
    assert isinstance(model, SketchedKernelRidgeClassifier)
    assert isinstance(model.features_, RandomFourierFeatures)
    assert model.features_.n_components == 1024
    # the median heuristic on the rows the map sees: the standardised training rows
    mean, sd = _Xtr.astype(np.float64).mean(axis=0), _Xtr.astype(np.float64).std(axis=0)
    sd[sd == 0] = 1.0
    Xs = ((_Xtr - mean.astype(np.float32)) / sd.astype(np.float32)).astype(np.float32)
    assert model.features_.gamma == "median"
    assert model.features_.gamma_ == pytest.approx(median_gamma(Xs), rel=1e-5)
    assert model.gamma_ == model.features_.gamma_ == fit["gamma_median"]
    # what the model chose by itself is in the fit's report
    assert fit["chosen"] == {"alpha": model.alpha_, "gamma": model.gamma_}
    np.testing.assert_array_equal(model.classes_, np.arange(10))
    assert fit["training_check"]["no_better_than_constant"] is False
    assert fit["warnings"] == []


def test_predictions_are_labels_written_blockwise(digits, fitted):
    d, _, _, Xte, yte = digits
    _, pred, _ = fitted
    P = zarr.open_array(str(d / "pred.zarr"), path="predictions", mode="r")
    assert P.shape == (yte.size,) and P.dtype == np.int64  # 1-D, the labels' dtype
    assert pred["shape"] == [yte.size] and pred["output"] == str(d / "pred.zarr")
    assert read_manifest(d / "pred.zarr")["model_class"] == "SketchedKernelRidgeClassifier"
    model = load(d / "model.zarr")
    np.testing.assert_array_equal(P[...], model.predict(Xte))


def test_score_is_the_accuracy_of_the_written_predictions(digits, fitted):
    d, _, _, _, yte = digits
    _, _, score = fitted
    P = zarr.open_array(str(d / "pred.zarr"), path="predictions", mode="r")[...]
    assert score["metric"] == "accuracy" and score["rows"] == yte.size
    assert score["accuracy"] == score["score"] == accuracy_score(yte, P)


def test_same_features_give_scikit_learns_ridge_classifier(digits, fitted):
    # the exact reference: scikit-learn's RidgeClassifier on distsketch's own features
    d, Xtr, ytr, Xte, _yte = digits
    model = load(d / "model.zarr")
    # the model's standardisation (tested against NumPy's in test_ridge_defaults.py)
    np.testing.assert_allclose(model.x_mean_, Xtr.astype(np.float64).mean(axis=0), atol=1e-9)

    def z(A):
        # the model's features: the standardisation folded into the random Fourier operator
        W, b = model.features_.scaled_operands(model.x_mean_, model.x_scale_)
        return np.asarray(rff_map(A, W, b), dtype=np.float64)

    Z, Zt = z(Xtr), z(Xte)
    # no --param alpha: alpha chosen by GCV, a number on the default grid
    assert model.alpha_ in model.cv_results_["alphas"]
    ref = RidgeClassifier(alpha=model.alpha_).fit(Z, ytr)
    # at GCV's alpha float32 rows give a Gram of float32 products, A + ΔA, within
    # γ_b·|Z|ᵀ|Z| of A (b = SLICE_ROWS); the solution w̃ of A + ΔA is then exactly
    # w − (A_c + αI)⁻¹ΔA·w̃ (A_c centred), which is what is checked against scikit-learn
    n = Z.shape[0]
    dA = model.gram_ - Z.T @ Z
    b = SLICE_ROWS * 2.0**-24
    assert np.all(np.abs(dA) <= b / (1 - b) * (np.abs(Z).T @ np.abs(Z)))
    zbar = model.zsum_ / n
    Ac = Z.T @ Z - n * np.outer(zbar, zbar) + model.alpha_ * np.eye(Z.shape[1])
    dW = np.linalg.solve(Ac, dA @ model.coef_.T)
    np.testing.assert_allclose(model.decision_function(Xte) + (Zt - zbar) @ dW,
                               ref.decision_function(Zt), rtol=1e-9, atol=1e-10)
    P = zarr.open_array(str(d / "pred.zarr"), path="predictions", mode="r")[...]
    np.testing.assert_array_equal(P, ref.predict(Zt))


def test_accuracy_matches_rbfsampler_ridge_classifier(digits, fitted):
    """RBFSampler draws other frequencies than distsketch's counter-based generator, so
    the accuracies are compared, not the predictions: over seeds the scikit-learn
    accuracy varies by about 0.001 (2 of 497 test rows) at 1024 features; 1.5 % is
    7 test rows."""
    d, Xtr, ytr, Xte, yte = digits
    _, _, score = fitted
    model = load(d / "model.zarr")
    # the same model in scikit-learn: standardised columns, the same gamma and alpha
    sc = StandardScaler().fit(Xtr)
    Xtr, Xte = sc.transform(Xtr), sc.transform(Xte)
    accs = []
    for seed in range(3):
        f = RBFSampler(gamma=model.gamma_, n_components=1024, random_state=seed).fit(Xtr)
        clf = RidgeClassifier(alpha=model.alpha_).fit(f.transform(Xtr), ytr)
        accs.append(accuracy_score(yte, clf.predict(f.transform(Xte))))
    assert min(accs) > 0.95  # the comparison is between working models
    assert abs(score["accuracy"] - np.mean(accs)) <= 0.015, (score["accuracy"], accs)


# ----------------------------------------------------------------- feature map options
@pytest.fixture(scope="module")
def small(tmp_path_factory):
    d = tmp_path_factory.mktemp("small")
    rng = np.random.default_rng(3)
    X = rng.normal(size=(600, 6)).astype(np.float32)
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2
    Y2 = np.stack([y, X[:, 2]], axis=1)
    write_array(X, d / "x.zarr", chunk_rows=200)
    g = zarr.open_group(str(d / "t.zarr"), mode="w")
    g.create_array("y", data=y, chunks=(200,))
    g.create_array("y2", data=Y2, chunks=(200, 2))
    g.create_array("labels", data=(X[:, 0] > 0).astype(np.int32), chunks=(200,))
    return d, X, y, Y2


def _fit(d, capsys, name, *argv):
    return main_json(capsys, "fit", d / "x.zarr", d / name, "--cluster", "sync", *argv)


def test_nystrom_features_with_nested_params(small, capsys):
    d, X, y, _ = small
    res = _fit(d, capsys, "nys.zarr", "--method", "SketchedKernelRidge", "--y", f"{d}/t.zarr::y",
               "--features", "Nystrom", "--param", "features.n_landmarks=40",
               "--param", "alpha=0.1")
    model = load(d / "nys.zarr")
    assert isinstance(model.features_, NystromFeatures)
    assert model.features_.n_landmarks == 40 and model.alpha_ == 0.1
    # no gamma given: the map's own default, 1 / n_features (of standardised columns)
    assert model.features_.gamma is None and model.gamma_ == 1.0 / X.shape[1]
    assert res["training_check"]["metric"] == "r2"
    assert res["training_check"]["value"] == pytest.approx(
        r2_score(y, model.predict(X)), abs=1e-12)


def test_feature_map_by_registry_name_and_explicit_gamma(small, capsys):
    d, X, y, _ = small
    res = _fit(d, capsys, "ts.zarr", "--method", "SketchedKernelRidge", "--y", f"{d}/t.zarr::y",
               "--param", "features=TensorSketch", "--param", "features.degree=2",
               "--param", "features.gamma=0.25", "--n-features", "64", "--n-check", "0")
    assert res["training_check"] is None  # skipped
    model = load(d / "ts.zarr")
    assert isinstance(model.features_, TensorSketch)
    assert (model.features_.degree, model.features_.gamma, model.features_.n_components) == \
        (2, 0.25, 64)
    _fit(d, capsys, "g.zarr", "--method", "SketchedKernelRidge", "--y", f"{d}/t.zarr::y",
         "--gamma", "0.3", "--random-state", "2")
    model = load(d / "g.zarr")
    # --gamma applies to the (default) feature map of a ridge model, on standardised columns
    # as fit reports it: the model keeps standardising and its default width
    assert isinstance(model.features_, RandomFourierFeatures) and model.features_.gamma == 0.3
    ref = SketchedKernelRidge(features=RandomFourierFeatures(
        gamma=0.3, n_components=default_n_features(X.shape[0])), standardize=True,
        random_state=2).fit(str(d / "x.zarr"), y)  # the same store: the same summation
    np.testing.assert_array_equal(model.predict(X), ref.predict(X))


@pytest.mark.parametrize("argv, match", [
    (["--method", "SketchedKernelRidge", "--features", "StreamingKernelPCA"],
     "StreamingKernelPCA is not a feature map"),
    (["--method", "SketchedKernelRidge", "--features", "os.system"],
     "unknown feature map 'os.system'"),
    (["--method", "SketchedKernelRidge", "--param", "features=distsketch.io.model.store.load"],
     "unknown feature map"),
    (["--method", "SketchedKernelRidge", "--param", "features=[1, 2]"],
     "expected a feature map name"),
    (["--method", "SketchedKernelRidge", "--param", "features.nope=1"],
     "RandomFourierFeatures has no parameter 'nope'"),
    (["--method", "SketchedKernelRidge", "--param", "features.n_components=0"], "n_components"),
    (["--method", "SketchedKernelRidge", "--gamma", "wide"], "use a number or 'median'"),
    (["--n-features", "64"], "StreamingKernelPCA holds none"),
    (["--features", "rff"], "StreamingKernelPCA holds no feature map"),
    (["--method", "KernelPCR", "--y", None], "KernelPCR is supervised: pass its targets with --y"),
])
def test_bad_feature_options_fail_before_the_cluster(small, tmp_path, monkeypatch, capsys,
                                                     argv, match):
    def connect(*args, **kwargs):
        raise RuntimeError("the cluster was started")

    monkeypatch.setattr(distsketch.cluster, "connect", connect)
    d, *_ = small
    targets = [] if None in argv else ["--y", f"{d}/t.zarr::y"]
    code = cli.main(["fit", str(d / "x.zarr"), str(tmp_path / "m.zarr"), *targets,
                     *[a for a in argv if a not in ("--y", None)]])
    err = capsys.readouterr().err
    assert code == 2, err
    assert match in err and "the cluster was started" not in err
    assert not (tmp_path / "m.zarr").exists()


def test_feature_map_error_lists_the_feature_maps(small, tmp_path, capsys):
    d, *_ = small
    assert cli.main(["fit", str(d / "x.zarr"), str(tmp_path / "m.zarr"), "--method",
                     "SketchedKernelRidge", "--features", "kpca"]) == 2
    err = capsys.readouterr().err
    for name in ("rff", "nystrom", "RandomFourierFeatures", "NystromFeatures", "TensorSketch"):
        assert name in err


# ---------------------------------------------------------- constant-predictor warning
def test_warning_for_a_model_no_better_than_constant(small, capsys):
    d, X, *_ = small
    # a huge alpha leaves only the intercepts: every row gets the majority class
    res = _fit(d, capsys, "const.zarr", "--method", "SketchedKernelRidgeClassifier",
               "--y", f"{d}/t.zarr::labels", "--param", "alpha=1.0e+9")
    model = load(d / "const.zarr")  # no feature options: the model's own default map
    assert isinstance(model.features_, RandomFourierFeatures)
    assert model.features_.n_components == default_n_features(X.shape[0]) == 1200
    # gamma chosen by leave-one-out among the default candidates (alpha given)
    assert model.gamma_ in model.cv_results_["gammas"] and "alphas" not in model.cv_results_
    labels = (X[:, 0] > 0).astype(np.int32)
    majority = np.bincount(labels).max() / labels.size
    check = res["training_check"]
    assert check["metric"] == "accuracy" and check["baseline"] == majority
    assert check["value"] <= majority and check["no_better_than_constant"] is True
    assert len(res["warnings"]) == 1
    assert res["warnings"][0].startswith("the fitted SketchedKernelRidgeClassifier is no better "
                                         "than a constant predictor on all 600 training rows")
    # on stderr too, also with -q
    assert cli.main(["fit", str(d / "x.zarr"), str(d / "const.zarr"), "--overwrite", "-q",
                     "--method", "SketchedKernelRidgeClassifier", "--y", f"{d}/t.zarr::labels",
                     "--param", "alpha=1.0e+9", "--cluster", "sync"]) == 0
    out, err = capsys.readouterr()
    assert "distsketch: warning: the fitted SketchedKernelRidgeClassifier is no better" in err
    assert "fitting" not in err
    assert out.startswith("fitted SketchedKernelRidgeClassifier")


def test_training_check_against_constant_predictors():
    from sklearn.dummy import DummyClassifier, DummyRegressor

    from distsketch.cli.score import training_check

    rng = np.random.default_rng(1)
    X = rng.normal(size=(500, 3))
    y = rng.integers(0, 3, size=500)
    check = training_check(DummyClassifier().fit(X, y), X, y, n_sample=200)
    assert check["no_better_than_constant"] and check["n_sample"] == 200 and check["estimated"]
    r = rng.normal(size=500)
    check = training_check(DummyRegressor().fit(X, r), X, r, n_sample=1000)
    # the training mean on all rows: R^2 is exactly 0
    assert check["value"] == pytest.approx(0.0, abs=1e-12) and check["no_better_than_constant"]
    assert not check["estimated"] and check["n_sample"] == 500
    good = SketchedKernelRidge(features=RandomFourierFeatures(gamma=0.5, random_state=0),
                               alpha=1e-3).fit(X, np.sin(X[:, 0]))
    check = training_check(good, X, np.sin(X[:, 0]))
    assert not check["no_better_than_constant"] and check["value"] > 0.9


# ------------------------------------------------------------------ predict and score
def test_regression_predict_and_score(small, capsys):
    d, X, y, Y2 = small
    _fit(d, capsys, "r1.zarr", "--method", "SketchedKernelRidge", "--y", f"{d}/t.zarr::y",
         "--n-features", "128", "--random-state", "0")
    model = load(d / "r1.zarr")
    res = main_json(capsys, "predict", d / "r1.zarr", d / "x.zarr", d / "r1-pred.zarr",
                    "--cluster", "sync", "--chunk-rows", "150")
    P = zarr.open_array(str(d / "r1-pred.zarr"), path="predictions", mode="r")
    assert P.shape == (600,) and P.chunks == (150,) and res["shape"] == [600]
    np.testing.assert_allclose(P[...], model.predict(X), rtol=1e-10, atol=1e-10)
    sc = main_json(capsys, "score", d / "r1.zarr", d / "x.zarr", "--y", f"{d}/t.zarr::y",
                   "--cluster", "sync")
    assert sc["metric"] == "r2"
    assert sc["r2"] == pytest.approx(r2_score(y, P[...]), rel=1e-12)
    # two targets: one column each, R^2 averaged over them as scikit-learn does
    _fit(d, capsys, "r2.zarr", "--method", "SketchedKernelRidge", "--y", f"{d}/t.zarr::y2",
         "--n-features", "128")
    main_json(capsys, "predict", d / "r2.zarr", d / "x.zarr", d / "r2-pred.zarr",
              "--cluster", "sync")
    P2 = zarr.open_array(str(d / "r2-pred.zarr"), path="predictions", mode="r")[...]
    assert P2.shape == (600, 2)
    sc = main_json(capsys, "score", d / "r2.zarr", d / "x.zarr", "--y", f"{d}/t.zarr::y2",
                   "--cluster", "sync")
    assert sc["r2"] == pytest.approx(r2_score(Y2, P2), rel=1e-12)
    # and the errors in the targets' units, as scikit-learn computes them
    assert sc["rmse"] == pytest.approx(root_mean_squared_error(Y2, P2), rel=1e-12)
    assert sc["mae"] == pytest.approx(mean_absolute_error(Y2, P2), rel=1e-12)


def test_predict_refuses_a_model_without_predict(small, tmp_path, capsys):
    d, X, *_ = small
    RandomFourierFeatures(n_components=8, random_state=0).fit(X).save(tmp_path / "rff.zarr")
    for argv in (["predict", str(tmp_path / "rff.zarr"), str(d / "x.zarr"),
                  str(tmp_path / "p.zarr")],
                 ["score", str(tmp_path / "rff.zarr"), str(d / "x.zarr"), "--y",
                  f"{d}/t.zarr::y"]):
        assert cli.main([*argv, "--cluster", "sync"]) == 2
        err = capsys.readouterr().err
        assert "is a RandomFourierFeatures, which has no predict" in err
        assert "distsketch transform" in err
    assert not (tmp_path / "p.zarr").exists()


def test_predict_output_rules(small, tmp_path, capsys):
    d, X, y, _ = small
    SketchedKernelRidge(features=RandomFourierFeatures(gamma=0.3, random_state=0)).fit(
        X[:, :4], y).save(tmp_path / "m4.zarr")
    # the feature count is checked; nothing is written
    assert cli.main(["predict", str(tmp_path / "m4.zarr"), str(d / "x.zarr"),
                     str(tmp_path / "p.zarr"), "--cluster", "sync"]) == 2
    assert "6 features" in capsys.readouterr().err and not (tmp_path / "p.zarr").exists()
    model = SketchedKernelRidge(features=RandomFourierFeatures(gamma=0.3, random_state=0))
    model.fit(X, y).save(tmp_path / "m.zarr")
    argv = ["predict", str(tmp_path / "m.zarr"), str(d / "x.zarr"), str(tmp_path / "p.zarr"),
            "--cluster", "sync"]
    assert cli.main(argv) == 0
    assert cli.main(argv) == 2  # an existing output needs --overwrite
    assert "exists" in capsys.readouterr().err
    assert cli.main([*argv, "--overwrite"]) == 0
    # transform of a predictor points to predict
    assert cli.main(["transform", str(tmp_path / "m.zarr"), str(d / "x.zarr"),
                     str(tmp_path / "f.zarr"), "--cluster", "sync"]) == 2
    err = capsys.readouterr().err
    assert "(SketchedKernelRidge) has no transform" in err and "distsketch predict" in err
    # never the input itself
    assert cli.main(["predict", str(tmp_path / "m.zarr"), str(d / "x.zarr"), str(d / "x.zarr"),
                     "--overwrite", "--cluster", "sync"]) == 2
    np.testing.assert_array_equal(open_array(str(d / "x.zarr")).compute(), X)


# ------------------------------------------------------------------- -v, -q and --json
def test_output_flags_before_and_after_the_command(small, tmp_path, capsys):
    d, X, *_ = small
    np.save(tmp_path / "x.npy", X)
    for argv in (["--json", "ingest", str(tmp_path / "x.npy"), str(tmp_path / "a.zarr")],
                 ["ingest", str(tmp_path / "x.npy"), str(tmp_path / "b.zarr"), "--json"]):
        assert cli.main(argv) == 0
        out, err = capsys.readouterr()
        res = json.loads(out)  # exactly one JSON object on stdout
        assert res["command"] == "ingest" and res["rows"] == 600 and res["n_features"] == 6
        assert res["output"] == str(tmp_path / argv[-1 if argv[0] == "--json" else -2])
        assert res["warnings"] == [] and "ingesting" in err
    for argv in (["-q", "ingest", str(tmp_path / "x.npy"), str(tmp_path / "c.zarr")],
                 ["ingest", str(tmp_path / "x.npy"), str(tmp_path / "d.zarr"), "--quiet"]):
        assert cli.main(argv) == 0
        out, err = capsys.readouterr()
        assert err == "" and out.startswith("wrote ") and len(out.splitlines()) == 1
    RandomFourierFeatures(n_components=16, random_state=0).fit(X).save(tmp_path / "rff.zarr")
    assert cli.main(["transform", str(tmp_path / "rff.zarr"), str(d / "x.zarr"),
                     str(tmp_path / "f.zarr"), "--cluster", "sync", "-v"]) == 0
    err = capsys.readouterr().err
    assert "distsketch: block plan randomfourierfeatures" in err  # details with -v


def test_json_error_object(tmp_path, capsys):
    assert cli.main(["--json", "predict", str(tmp_path / "none.zarr"), str(tmp_path / "x.zarr"),
                     str(tmp_path / "p.zarr")]) == 2
    out, err = capsys.readouterr()
    res = json.loads(out)
    assert res["command"] == "predict" and res["exit_code"] == 2
    assert res["error"] in err and "distsketch: error:" in err


def test_run_gets_the_output_flags(small, tmp_path, capsys):
    import yaml

    d, *_ = small
    spec = tmp_path / "w.yaml"
    spec.write_text(yaml.safe_dump({
        "input": str(d / "x.zarr"), "segment_rows": 300, "cluster": "sync",
        "method": {"name": "RandomFourierFeatures", "params": {"n_components": 8}},
        "outputs": {"dir": str(tmp_path / "out")}}))
    # one JSON object, as every command prints
    assert cli.main(["run", str(spec), "--dry-run", "--json"]) == 0
    out, _ = capsys.readouterr()
    res = json.loads(out)
    assert res["command"] == "run" and res["status"] == "dry-run"
    assert "rows 0..600 in 2 segment(s)" in res["message"]
    # -q before the command, as for every command
    assert cli.main(["-q", "run", str(spec), "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and len(out.splitlines()) == 1
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------- numbers and seeds
def test_param_numbers_with_an_exponent_are_floats(small, capsys):
    d, *_ = small
    _fit(d, capsys, "e.zarr", "--method", "SketchedKernelRidge", "--y", f"{d}/t.zarr::y",
         "--param", "alpha=1e-3", "--n-check", "0")
    model = load(d / "e.zarr")
    assert model.alpha == 0.001 and isinstance(model.alpha, float)
    _fit(d, capsys, "cv.zarr", "--method", "SketchedKernelRidge", "--y", f"{d}/t.zarr::y",
         "--param", "alphas=[1e-4,1E+2]", "--param", "cv=2", "--n-check", "0")
    model = load(d / "cv.zarr")
    assert list(model.alphas) == [0.0001, 100.0]
    assert all(isinstance(a, float) for a in model.alphas)


def test_param_text_where_a_number_is_expected_says_yaml_read_it_as_text(small, capsys):
    d, *_ = small
    code = cli.main(["fit", str(d / "x.zarr"), str(d / "t1.zarr"), "--cluster", "sync",
                     "--method", "SketchedKernelRidge", "--y", f"{d}/t.zarr::y",
                     "--param", "alpha=1e-3x"])
    err = capsys.readouterr().err
    assert code == 2 and "alpha='1e-3x'" in err and "YAML read it as text" in err
    assert "unexpected error" not in err and not (d / "t1.zarr").exists()


@pytest.mark.parametrize("method", ["SketchedKernelRidge", "StreamingKernelPCA"])
def test_cli_fit_is_reproducible_by_default_and_records_its_seed(small, capsys, method):
    d, X, *_ = small
    extra = ["--y", f"{d}/t.zarr::y", "--n-check", "0"] if method == "SketchedKernelRidge" else \
        ["--n-components", "3", "--gamma", "0.2"]
    runs = [_fit(d, capsys, f"seed-{method}-{i}.zarr", "--method", method, *extra)
            for i in range(2)]
    assert runs[0]["random_state"] == runs[1]["random_state"] == 0
    models = [load(d / f"seed-{method}-{i}.zarr") for i in range(2)]
    assert models[0].random_state == models[1].random_state == 0
    assert read_manifest(d / f"seed-{method}-0.zarr")["seed"] == 0
    out = [m.predict(X) if hasattr(m, "predict") else m.transform(X) for m in models]
    np.testing.assert_array_equal(out[0], out[1])
    # an explicit seed is used and recorded
    run = _fit(d, capsys, f"seed-{method}-7.zarr", "--method", method, *extra,
               "--random-state", "7")
    assert run["random_state"] == 7 and load(d / f"seed-{method}-7.zarr").random_state == 7
