"""What ``fit`` reports gives the model back: the printed gamma of a kernel ridge model is on
standardised columns, and ``fit --gamma <printed>`` keeps the model's standardisation and
default width, so it reproduces the default model; a model barely better than a constant
predictor on its training rows is warned about."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import zarr
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.metrics import r2_score

import distsketch.cli as cli
from distsketch import RandomFourierFeatures, SketchedKernelRidge, load
from distsketch.cli.score import BARELY_BETTER, training_check
from distsketch.estimators.ridge.defaults import default_n_features
from distsketch.io import write_array

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

# columns on very different scales: a gamma of standardised columns means another kernel
# on the columns as they are
SCALES = np.array([1.0, 10.0, 100.0, 0.1, 5.0, 50.0])


def _main(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main([*map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """1100 rows (above 1000, so alpha is chosen by GCV whatever the feature map), 4 classes."""
    d = tmp_path_factory.mktemp("gamma")
    rng = np.random.default_rng(5)
    n = 1100
    labels = rng.integers(0, 4, n)
    centres = rng.normal(scale=1.5, size=(4, SCALES.size))
    X = ((centres[labels] + rng.normal(size=(n, SCALES.size))) * SCALES).astype(np.float32)
    write_array(X, d / "x.zarr", chunk_rows=300)
    g = zarr.open_group(str(d / "t.zarr"), mode="w")
    g.create_array("labels", data=labels.astype(np.int64), chunks=(300,))
    g.create_array("value", data=np.sin(X[:, 0]) + X[:, 1] / 10.0, chunks=(300,))
    return d, X, labels


def test_printed_gamma_given_back_reproduces_the_default_model(table, tmp_path, capsys):
    d, X, _ = table
    base = ["--method", "SketchedKernelRidgeClassifier", "--y", f"{d}/t.zarr::labels",
            "--cluster", "sync"]
    code, out, err = _main(capsys, "fit", d / "x.zarr", tmp_path / "default.zarr", *base)
    assert code == 0, err
    # what a user reads off the result line
    printed = re.search(r"gamma (\S+) on standardised columns", out)
    assert printed is not None, out
    default = load(tmp_path / "default.zarr")
    assert float(printed.group(1)) == default.gamma_
    code, out, err = _main(capsys, "fit", d / "x.zarr", tmp_path / "given.zarr", *base,
                           "--gamma", printed.group(1))
    assert code == 0, err
    given = load(tmp_path / "given.zarr")
    # the default model's standardisation and width, with the gamma given
    assert given.x_mean_ is not None
    np.testing.assert_array_equal(given.x_scale_, default.x_scale_)
    assert given.features_.n_components == default.features_.n_components == \
        default_n_features(X.shape[0])
    assert given.gamma_ == default.gamma_ and given.alpha_ == default.alpha_
    np.testing.assert_array_equal(given.predict(X), default.predict(X))
    np.testing.assert_array_equal(given.decision_function(X), default.decision_function(X))
    assert f"gamma {printed.group(1)} on standardised columns" in out


def test_gamma_of_the_columns_as_they_are_needs_standardize_false(table, tmp_path, capsys):
    d, X, _ = table
    code, out, err = _main(capsys, "fit", d / "x.zarr", tmp_path / "raw.zarr", "--method",
                           "SketchedKernelRidge", "--y", f"{d}/t.zarr::value", "--gamma", "0.3",
                           "--param", "standardize=false", "--random-state", "2", "--json",
                           "--cluster", "sync")
    assert code == 0, err
    res = json.loads(out)
    assert res["standardized"] is False
    model = load(tmp_path / "raw.zarr")
    y = zarr.open_group(str(d / "t.zarr"), mode="r")["value"][...]
    # the model's default width still: the map class was not chosen
    ref = SketchedKernelRidge(features=RandomFourierFeatures(
        gamma=0.3, n_components=default_n_features(X.shape[0])), standardize=False,
        random_state=2).fit(str(d / "x.zarr"), y)  # the same store: the same summation
    np.testing.assert_array_equal(model.predict(X), ref.predict(X))
    # the text result does not claim standardised columns (the same options on 300 of the
    # rows: the claim does not depend on the row count, the cost of the fit does)
    write_array(X[:300], tmp_path / "x300.zarr", chunk_rows=300)
    zarr.open_group(str(tmp_path / "t300.zarr"), mode="w").create_array("value", data=y[:300])
    code, out, err = _main(capsys, "fit", tmp_path / "x300.zarr", tmp_path / "raw300.zarr",
                           "--method", "SketchedKernelRidge", "--y", f"{tmp_path}/t300.zarr::value",
                           "--gamma", "0.3", "--param", "standardize=false", "--cluster", "sync")
    assert code == 0, err
    assert "gamma 0.3)" in out and "standardised" not in out


class _Guesser(ClassifierMixin, BaseEstimator):
    """Predicts the true label of the rows whose first column is below ``cut``, else class 0."""

    classes_ = np.arange(4)

    def __init__(self, labels: np.ndarray, cut: float):
        self.labels = labels
        self.cut = cut

    def predict(self, S: np.ndarray) -> np.ndarray:
        rows = np.asarray(S[:, 1], dtype=np.int64)  # column 1 holds the row index
        return np.where(S[:, 0] < self.cut, self.labels[rows], 0)


def test_training_check_flags_a_model_barely_better_than_constant():
    rng = np.random.default_rng(0)
    n = 4000
    labels = rng.integers(0, 4, n)
    X = np.stack([rng.uniform(size=n), np.arange(n)], axis=1)
    majority = np.bincount(labels).max() / n
    for cut, barely in ((0.04, True), (0.6, False)):
        model = _Guesser(labels, cut)
        acc = float(np.mean(model.predict(X) == labels))
        check = training_check(model, X, labels, n_sample=n)
        assert check["value"] == pytest.approx(acc) and check["baseline"] == majority
        assert check["skill"] == pytest.approx((acc - majority) / (1 - majority))
        assert acc > majority and check["no_better_than_constant"] is False
        assert check["barely_better_than_constant"] is barely
        assert (check["skill"] < BARELY_BETTER) is barely
        if barely:
            assert check["message"].startswith("the fitted _Guesser is barely better than a "
                                               f"constant predictor on all {n} training rows")
            assert "--gamma median" in check["message"]


def test_fit_warns_when_the_model_is_barely_better_than_constant(table, tmp_path, capsys):
    d, X, _ = table
    y = zarr.open_group(str(d / "t.zarr"), mode="r")["value"][...]
    # a huge alpha shrinks the fit to little more than the mean
    code, out, err = _main(capsys, "fit", d / "x.zarr", tmp_path / "weak.zarr", "--method",
                           "SketchedKernelRidge", "--y", f"{d}/t.zarr::value", "--param",
                           "alpha=3000", "--n-features", "64", "--json", "--cluster", "sync")
    assert code == 0, err
    res = json.loads(out)
    model = load(tmp_path / "weak.zarr")
    r2 = r2_score(y, model.predict(X))
    check = res["training_check"]
    assert check["value"] == pytest.approx(r2, abs=1e-9)
    assert 0.0 < r2 < BARELY_BETTER and check["barely_better_than_constant"] is True
    assert len(res["warnings"]) == 1
    assert res["warnings"][0].startswith("the fitted SketchedKernelRidge is barely better than "
                                         f"a constant predictor on all {X.shape[0]} training rows")
    assert "distsketch: warning: the fitted SketchedKernelRidge is barely better" in err
