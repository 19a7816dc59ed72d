"""Parameters are checked before a command starts its cluster."""

from __future__ import annotations

import numpy as np
import pytest

import distsketch.cli as cli
import distsketch.cluster
from distsketch.io import write_array
from distsketch.io.model.store import save_model


@pytest.fixture
def no_cluster(monkeypatch):
    """Any cluster start fails loudly: an error reported after it would name this."""
    def connect(*args, **kwargs):
        raise RuntimeError("the cluster was started")

    monkeypatch.setattr(distsketch.cluster, "connect", connect)


@pytest.fixture
def store(tmp_path):
    X = np.random.default_rng(0).normal(size=(60, 12))
    return write_array(X, tmp_path / "x.zarr", chunk_rows=20), X


@pytest.mark.parametrize("argv, match", [
    # the case: more components than the sketch can hold
    (["--n-components", "5000"], "n_components=5000 exceeds min(sketch_size, n_random_features)"),
    (["--method", "rnca", "--n-components", "300", "--n-random-features", "64"],
     "exceeds n_random_features=64"),
    (["--n-components", "0"], "n_components"),
    (["--method", "NystromKernelPCA", "--param", "n_landmarks=-3"], "n_landmarks"),
    (["--method", "SketchedKernelRidge", "--param", "alpha=-1"], "alpha"),
    # the feature map's parameters are checked with the model's, not separately
    (["--method", "SketchedKernelRidge", "--param", "features.n_components=0"], "n_components"),
])
def test_fit_refuses_bad_parameters_before_the_cluster(tmp_path, store, no_cluster, capsys,
                                                        argv, match):
    path, _ = store
    code = cli.main(["fit", str(path), str(tmp_path / "m.zarr"), "--cluster", "local", *argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert match in err and "the cluster was started" not in err
    assert not (tmp_path / "m.zarr").exists()


def test_good_parameters_do_reach_the_cluster(tmp_path, store, no_cluster, capsys):
    # the control: with valid parameters the (failing) cluster start is what is reported
    path, _ = store
    cli.main(["fit", str(path), str(tmp_path / "m.zarr"), "--n-components", "3",
              "--gamma", "median"])
    assert "the cluster was started" in capsys.readouterr().err


def test_transform_checks_the_feature_count_before_the_cluster(tmp_path, store, no_cluster,
                                                               capsys):
    from distsketch import RandomFourierFeatures

    path, X = store
    save_model(RandomFourierFeatures(n_components=8, random_state=0).fit(X[:, :5]),
               tmp_path / "m.zarr")
    code = cli.main(["transform", str(tmp_path / "m.zarr"), str(path), str(tmp_path / "z.zarr")])
    err = capsys.readouterr().err
    assert code == 2 and "X has 12 features" in err and "expecting 5" in err
    assert "the cluster was started" not in err


def test_quickstart_checks_the_model_before_the_cluster(tmp_path, no_cluster, capsys):
    code = cli.main(["quickstart", "--out", str(tmp_path / "q"), "--rows", "100",
                     "--n-components", "100", "--sketch-size", "16"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "the cluster was started" not in err and "exceeds min(--sketch-size" in err
    assert not (tmp_path / "q" / "data.zarr").exists()
