"""A user's own table from the command line: a CSV whose first column holds string class
labels (like the UCI letter table, ``T,2,8,3,5,...``) goes ingest -> fit -> predict -> score,
and the predictions are the user's labels."""

from __future__ import annotations

import json

import numpy as np
import pytest
import zarr

import distsketch.cli as cli
from distsketch import SketchedKernelRidgeClassifier, load

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

NAMES = np.array(["T", "I", "D", "N"])


def _table(path, n, seed):
    rng = np.random.default_rng(seed)
    y = NAMES[rng.integers(0, NAMES.size, n)]
    centres = {c: 6.0 * np.eye(NAMES.size)[i] for i, c in enumerate(NAMES)}
    X = np.stack([centres[c] for c in y]) + rng.normal(size=(n, NAMES.size))
    with open(path, "w") as f:
        for label, row in zip(y, X):
            f.write(label + "," + ",".join(f"{v:.5f}" for v in row) + "\n")
    return y


def _json(capsys, *argv):
    capsys.readouterr()
    code = cli.main([*map(str, argv), "--json", "--cluster", "sync"] if argv[0] != "ingest"
                    else [*map(str, argv), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_string_label_column_ingest_fit_predict_score(tmp_path, capsys):
    y_train = _table(tmp_path / "train.csv", 800, 0)
    y_test = _table(tmp_path / "test.csv", 300, 1)
    for name in ("train", "test"):
        info = _json(capsys, "ingest", tmp_path / f"{name}.csv", tmp_path / f"{name}.zarr",
                     "--label-column", "0")
        assert info["n_features"] == NAMES.size and info["n_classes"] == NAMES.size
    _json(capsys, "fit", tmp_path / "train.zarr", tmp_path / "m.zarr", "--method",
          "SketchedKernelRidgeClassifier", "--y", f"{tmp_path / 'train.zarr'}::y",
          "--random-state", "0", "--n-features", "256")
    model = load(tmp_path / "m.zarr")
    assert sorted(model.classes_.tolist()) == sorted(NAMES.tolist())
    _json(capsys, "predict", tmp_path / "m.zarr", tmp_path / "test.zarr", tmp_path / "p.zarr")
    # variable-length UTF-8 strings in the store
    pred = np.array(zarr.open_group(str(tmp_path / "p.zarr"), mode="r")["predictions"][:].tolist())
    assert set(pred.tolist()) <= set(NAMES.tolist())
    assert np.mean(pred == y_test) > 0.95
    res = _json(capsys, "score", tmp_path / "m.zarr", tmp_path / "test.zarr", "--y",
                f"{tmp_path / 'test.zarr'}::y")
    assert res["metric"] == "accuracy" and res["score"] == pytest.approx(
        np.mean(pred == y_test))
    # the Python API reads the same store the same way
    est = SketchedKernelRidgeClassifier(random_state=0).fit(
        str(tmp_path / "train.zarr"), str(tmp_path / "train.zarr") + "::y")
    assert set(est.classes_.tolist()) == set(y_train.tolist())


def test_header_names_and_label_column_by_name(tmp_path, capsys):
    _table(tmp_path / "t.csv", 50, 2)
    text = (tmp_path / "t.csv").read_text()
    (tmp_path / "h.csv").write_text("lettr,a,b,c,d\n" + text)
    info = _json(capsys, "ingest", tmp_path / "h.csv", tmp_path / "h.zarr",
                 "--label-column", "lettr")
    assert info["feature_names"] == ["a", "b", "c", "d"]
    capsys.readouterr()
    # without a header, a name cannot be found: one clear error, exit 2, nothing written
    assert cli.main(["ingest", str(tmp_path / "t.csv"), str(tmp_path / "x.zarr"),
                     "--label-column", "lettr"]) == 2
    assert "has no header line of names" in capsys.readouterr().err
    assert not (tmp_path / "x.zarr").exists()
    assert cli.main(["ingest", str(tmp_path / "h.csv"), str(tmp_path / "x.zarr"),
                     "--no-header"]) == 2
    assert "line 1, column 1: 'lettr' is not a number" in capsys.readouterr().err
