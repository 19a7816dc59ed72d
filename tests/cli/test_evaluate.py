"""``distsketch evaluate``: the model's own kernel, sampled estimates said to be estimates."""

from __future__ import annotations

import json

import numpy as np
import pytest

import distsketch.cli as cli
from distsketch import RandomFourierFeatures, SketchedKernelRidge
from distsketch.io import ingest
from distsketch.metrics import kernel_errors

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def ridge(tmp_path_factory):
    d = tmp_path_factory.mktemp("evaluate")
    X = np.random.default_rng(2).normal(size=(1200, 5)).astype(np.float32)  # as ingest stores
    np.save(d / "x.npy", X)
    ingest(d / "x.npy", d / "x.zarr", chunk_rows=400)
    model = SketchedKernelRidge(features=RandomFourierFeatures(gamma=0.15, n_components=96,
                                                               random_state=0)).fit(X, X[:, 0])
    model.save(d / "ridge.zarr")
    return d, X, model


def test_ridge_model_is_evaluated_with_its_feature_maps_kernel(ridge, capsys):
    d, X, model = ridge
    assert cli.main(["evaluate", str(d / "ridge.zarr"), str(d / "x.zarr"), "--n-sample", "300",
                     "--json", "--cluster", "sync"]) == 0
    got = json.loads(capsys.readouterr().out)
    want = kernel_errors(X, model.features_, "rbf", gamma=0.15, n_sample=300, random_state=0)
    for key in ("spectral", "frobenius", "relative_frobenius"):
        assert got[key] == pytest.approx(want[key], rel=1e-9)
    assert got["kernel"] == "rbf" and got["gamma"] == 0.15
    assert got["sampled"] is True and got["n_sample"] == 300 and got["rows"] == 1200
    assert got["note"] == "estimated from 300 sampled rows of 1200"


def test_table_says_estimated_or_exact(ridge, capsys):
    d, _, _ = ridge
    args = ["evaluate", str(d / "ridge.zarr"), str(d / "x.zarr"), "--cluster", "sync"]
    assert cli.main([*args, "--n-sample", "300"]) == 0
    out = capsys.readouterr().out
    assert "estimated from 300 sampled rows of 1200" in out and "rbf(gamma=0.15)" in out
    assert cli.main([*args, "--n-sample", "5000"]) == 0
    assert "exact, all 1200 rows" in capsys.readouterr().out


def test_contradicting_option_is_an_error(ridge, capsys):
    d, _, _ = ridge
    assert cli.main(["evaluate", str(d / "ridge.zarr"), str(d / "x.zarr"), "--gamma", "0.5",
                     "--n-sample", "100", "--cluster", "sync"]) != 0
    assert "gamma=0.5 contradicts SketchedKernelRidge's gamma=0.15" in capsys.readouterr().err
