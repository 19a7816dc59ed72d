"""``fit`` says when the default gamma was found beyond the usual grid of 1/8 … 2 / n_features."""

from __future__ import annotations

import json

import numpy as np
import pytest
import zarr

import distsketch.cli as cli
from distsketch import SketchedKernelRidge, load
from distsketch.io import write_array

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _fit(capsys, tmp_path, X, y, *extra) -> tuple[int, str]:
    write_array(X, tmp_path / "x.zarr", chunk_rows=400)
    zarr.open_group(str(tmp_path / "t.zarr"), mode="w").create_array("y", data=y, chunks=(400,))
    capsys.readouterr()
    code = cli.main(["fit", str(tmp_path / "x.zarr"), str(tmp_path / "m.zarr"), "--method",
                     "SketchedKernelRidge", "--y", f"{tmp_path}/t.zarr::y", "--cluster", "sync",
                     "--random-state", "0", *extra])
    return code, capsys.readouterr().out


def test_a_gamma_beyond_the_grid_is_said_with_the_result(tmp_path, capsys):
    # a linear target: the smoothest kernel scores best, below the grid's lowest gamma
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1200, 8)).astype(np.float32)
    y = X @ rng.normal(size=8)
    code, out = _fit(capsys, tmp_path, X, y)
    assert code == 0
    # the search the saved model records (a second fit in Python would repeat the whole search)
    model = load(tmp_path / "m.zarr")
    assert isinstance(model, SketchedKernelRidge)
    note = model.gamma_search_["note"]
    assert note is not None and model.gamma_search_["chosen"] < 0.125
    assert f"note: {note}" in out


def test_a_gamma_inside_the_grid_adds_no_note(tmp_path, capsys):
    # a wiggly target of two columns: a gamma inside 1/8 … 2 / n_features
    rng = np.random.default_rng(1)
    X = rng.normal(size=(1200, 2)).astype(np.float32)
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1])
    code, out = _fit(capsys, tmp_path, X, y, "--json")
    assert code == 0
    result = json.loads(out)
    assert result["gamma_search_note"] is None
    assert 0.125 <= result["chosen"]["gamma"] * 2 <= 2.0
