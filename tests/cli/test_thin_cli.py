"""The CLI is thin: it opens its input once and leaves gamma="median" and the
parameter checks to the estimator."""

from __future__ import annotations

import json

import numpy as np
import pytest

import distsketch.cli as cli
import distsketch.io.arrays.access as io_arrays
from distsketch import RandomFourierFeatures
from distsketch.estimators.kernel_params import median_gamma
from distsketch.io import load, open_array, write_array


@pytest.fixture
def store(tmp_path):
    X = np.random.default_rng(3).normal(size=(600, 6))
    return write_array(X, tmp_path / "x.zarr", chunk_rows=100), X


@pytest.fixture
def opens(monkeypatch):
    """Every path ``distsketch.io.arrays.access`` opens as a Zarr array, in order."""
    seen: list[str] = []
    real = io_arrays.open_zarr

    def counting(path, *args, **kwargs):
        seen.append(str(getattr(path, "url", path)))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(io_arrays, "open_zarr", counting)
    return seen


def _fit(capsys, *argv: str) -> dict:
    capsys.readouterr()
    code = cli.main(["fit", *map(str, argv), "--cluster", "sync", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_fit_opens_its_input_store_once(tmp_path, store, opens, capsys):
    path, _ = store
    _fit(capsys, path, tmp_path / "m.zarr", "--n-components", "2", "--n-random-features", "32",
         "--sketch-size", "8", "--gamma", "median")
    assert [p for p in opens if p.endswith("x.zarr")] == [str(path)]


def test_fit_with_block_rows_opens_its_input_store_once(tmp_path, store, opens, capsys):
    path, _ = store
    _fit(capsys, path, tmp_path / "m.zarr", "--method", "RandomFourierFeatures",
         "--n-components", "8", "--block-rows", "200")
    assert [p for p in opens if p.endswith("x.zarr")] == [str(path)]


def test_gamma_median_is_resolved_by_the_estimator(tmp_path, store, capsys):
    path, _ = store
    result = _fit(capsys, path, tmp_path / "m.zarr", "--method", "RandomFourierFeatures",
                  "--n-components", "16", "--gamma", "median")
    model = load(tmp_path / "m.zarr")
    # the parameter stays "median", as after a Python fit; gamma_ holds the value
    assert model.gamma == "median"
    X = open_array(str(path))
    assert model.gamma_ == median_gamma(X) == result["gamma_median"]
    ref = RandomFourierFeatures(n_components=16, gamma="median", random_state=0).fit(X)
    np.testing.assert_array_equal(model.transform(X).compute(), ref.transform(X).compute())


def test_no_gamma_median_reported_without_it(tmp_path, store, capsys):
    path, _ = store
    result = _fit(capsys, path, tmp_path / "m.zarr", "--method", "RandomFourierFeatures",
                  "--n-components", "4", "--gamma", "0.5")
    assert result["gamma_median"] is None and load(tmp_path / "m.zarr").gamma == 0.5
