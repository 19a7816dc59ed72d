"""Files where a user has files: ``predict`` and ``score`` read a CSV or Parquet input as
``ingest`` would (the model's columns by name), ``predict`` writes a CSV or Parquet output
when its name asks for one (atomically, never over a file without --overwrite), and
``ingest`` takes an R-style CSV with --drop-column and --boolean-columns yes-no."""

from __future__ import annotations

import builtins
import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest
import zarr

import distsketch.cli as cli
from distsketch import load
from distsketch.io import open_array

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

NAMES = np.array(["setosa", "versicolor", "virginica"])


def _main(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main([*map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def _ok(capsys, *argv) -> str:
    code, out, err = _main(capsys, *argv)
    assert code == 0, err
    return out


def _table(path: Path, header: list[str], rows: list[list]) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def _data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Three features, class numbers 1..3 and class names from the same rule."""
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(n, 3)), 5)
    k = np.where(X[:, 0] + X[:, 1] > 0, 1, np.where(X[:, 2] > 0, 2, 3))
    return X, k, NAMES[k - 1]


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A classifier on numbered labels and one on names, fitted on ingested CSVs."""
    import contextlib
    import io

    d = tmp_path_factory.mktemp("tables")
    X, k, names = _data(300, 0)
    _table(d / "train.csv", ["a", "b", "c", "klass"],
           [[*row, int(c)] for row, c in zip(X.tolist(), k)])
    _table(d / "train_names.csv", ["species", "a", "b", "c"],
           [[c, *row] for row, c in zip(X.tolist(), names)])
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        for name, label in (("train", "klass"), ("train_names", "species")):
            assert cli.main(["-q", "ingest", str(d / f"{name}.csv"), str(d / f"{name}.zarr"),
                             "--label-column", label]) == 0
            assert cli.main(["-q", "fit", str(d / f"{name}.zarr"), str(d / f"{name}_m.zarr"),
                             "--method", "SketchedKernelRidgeClassifier", "--cluster",
                             "sync"]) == 0
    # the test table: the columns in another order, the labels first, an ID column last
    Xt, kt, names_t = _data(120, 1)
    _table(d / "test.csv", ["klass", "c", "a", "b", "id"],
           [[int(c), r[2], r[0], r[1], f"row{i}"] for i, (r, c) in enumerate(zip(Xt.tolist(),
                                                                                 kt))])
    _table(d / "test_names.csv", ["species", "c", "a", "b"],
           [[c, r[2], r[0], r[1]] for r, c in zip(Xt.tolist(), names_t)])
    return d, Xt, kt, names_t


def _reference(d: Path, model: str, Xt: np.ndarray) -> np.ndarray:
    """model.predict on the rows as `ingest` stores them (float32, the model's column order)."""
    return np.asarray(load(d / model).predict(Xt.astype(np.float32)))


def _read_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


# ------------------------------------------------------------------ CSV input


def test_predict_reads_a_csv_input_by_the_models_column_names(fitted, tmp_path, capsys):
    d, Xt, kt, _ = fitted
    out = _ok(capsys, "predict", d / "train_m.zarr", d / "test.csv", tmp_path / "p.zarr",
              "--cluster", "sync")
    assert "left out 'klass', 'id'" in out
    P = zarr.open_group(str(tmp_path / "p.zarr"), mode="r")["predictions"][...]
    ref = _reference(d, "train_m.zarr", Xt)
    assert P.dtype == np.int64
    np.testing.assert_array_equal(P, ref)
    # the same as ingesting the table first, then predicting the store
    _ok(capsys, "ingest", d / "test.csv", tmp_path / "t.zarr", "--drop-column", "klass",
        "--drop-column", "id")
    X_ing = open_array(tmp_path / "t.zarr").compute()
    np.testing.assert_array_equal(X_ing, Xt[:, [2, 0, 1]].astype(np.float32))
    assert np.mean(P == kt) > 0.8


def test_score_reads_the_label_column_of_a_csv_input(fitted, capsys):
    d, Xt, kt, names_t = fitted
    code, out, err = _main(capsys, "score", d / "train_m.zarr", d / "test.csv", "--cluster",
                           "sync", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["accuracy"] == pytest.approx(np.mean(_reference(d, "train_m.zarr", Xt) == kt))
    assert res["rows"] == 120 and res["targets"].endswith("column klass")
    code, out, err = _main(capsys, "score", d / "train_names_m.zarr", d / "test_names.csv",
                           "--cluster", "sync", "--json")
    assert code == 0, err
    ref = _reference(d, "train_names_m.zarr", Xt)
    assert json.loads(out)["accuracy"] == pytest.approx(np.mean(ref == names_t))


def test_a_csv_the_model_cannot_place_is_refused_with_the_ingest_command(fitted, tmp_path,
                                                                          capsys):
    d, Xt, _, _ = fitted
    # a model fitted on a store without column names (an .npy)
    np.save(tmp_path / "X.npy", Xt.astype(np.float32))
    np.save(tmp_path / "y.npy", Xt[:, 0] - 2.0 * Xt[:, 1])
    _ok(capsys, "ingest", tmp_path / "X.npy", tmp_path / "x.zarr", "--labels", tmp_path / "y.npy")
    _ok(capsys, "fit", tmp_path / "x.zarr", tmp_path / "m.zarr", "--method", "SketchedKernelRidge",
        "--cluster", "sync")
    code, _, err = _main(capsys, "predict", tmp_path / "m.zarr", d / "test.csv",
                         tmp_path / "p.zarr", "--cluster", "sync")
    assert code != 0
    assert "records no column names" in err
    assert f"`distsketch ingest {d / 'test.csv'} test.zarr" in err
    assert "metadata" not in err
    assert not (tmp_path / "p.zarr").exists()
    # numbers only, one column too many: which three the model needs is not guessed
    _table(tmp_path / "wide.csv", ["u", "v", "w", "t"], np.c_[Xt, Xt[:, 0]].tolist())
    code, _, err = _main(capsys, "predict", tmp_path / "m.zarr", tmp_path / "wide.csv",
                         tmp_path / "p.zarr", "--cluster", "sync")
    assert code != 0
    assert "wide.csv has 4 columns but model" in err and "fitted on 3" in err
    assert f"`distsketch ingest {tmp_path / 'wide.csv'} wide.zarr" in err
    assert not (tmp_path / "p.zarr").exists()
    # a table of exactly the model's width is read as ingest reads it
    _table(tmp_path / "plain.csv", ["u", "v", "w"], Xt.tolist())
    _ok(capsys, "predict", tmp_path / "m.zarr", tmp_path / "plain.csv", tmp_path / "q.csv",
        "--cluster", "sync")
    _, rows = _read_csv(tmp_path / "q.csv")
    ref = np.asarray(load(tmp_path / "m.zarr").predict(Xt.astype(np.float32)))
    np.testing.assert_array_equal(np.array([r[0] for r in rows], dtype=ref.dtype), ref)


# ------------------------------------------------------------------ table outputs


def test_predict_writes_a_csv_output_with_a_header(fitted, tmp_path, capsys):
    d, Xt, _, _ = fitted
    _ok(capsys, "predict", d / "train_m.zarr", d / "test.csv", tmp_path / "p.csv",
        "--cluster", "sync")
    header, rows = _read_csv(tmp_path / "p.csv")
    assert header == ["prediction"]
    ref = _reference(d, "train_m.zarr", Xt)
    assert [r[0] for r in rows] == [str(int(v)) for v in ref]  # integers, not 1.0
    # class names come back as the user's names; a store input works too
    _ok(capsys, "predict", d / "train_names_m.zarr", d / "test_names.csv", tmp_path / "n.csv",
        "--cluster", "sync")
    header, rows = _read_csv(tmp_path / "n.csv")
    assert header == ["prediction"]
    assert [r[0] for r in rows] == _reference(d, "train_names_m.zarr", Xt).tolist()
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".partial")]


def test_regression_values_in_a_csv_read_back_exactly(tmp_path, capsys):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 2)).astype(np.float32)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", (np.sin(X[:, 0]) + X[:, 1] ** 2).astype(np.float64))
    _ok(capsys, "ingest", tmp_path / "X.npy", tmp_path / "x.zarr", "--labels", tmp_path / "y.npy")
    _ok(capsys, "fit", tmp_path / "x.zarr", tmp_path / "m.zarr", "--method", "SketchedKernelRidge",
        "--cluster", "sync")
    _ok(capsys, "predict", tmp_path / "m.zarr", tmp_path / "x.zarr", tmp_path / "p.csv",
        "--cluster", "sync")
    header, rows = _read_csv(tmp_path / "p.csv")
    ref = np.asarray(load(tmp_path / "m.zarr").predict(X))
    assert header == ["prediction"] and len(rows) == 200
    got = np.array([r[0] for r in rows], dtype=ref.dtype)
    np.testing.assert_array_equal(got, ref)  # every value reads back bit for bit


def test_an_existing_file_is_replaced_only_with_overwrite(fitted, tmp_path, capsys):
    d, _, _, _ = fitted
    mine = tmp_path / "p.csv"
    mine.write_text("my notes\n")
    code, _, err = _main(capsys, "predict", d / "train_m.zarr", d / "test.csv", mine,
                         "--cluster", "sync")
    assert code != 0 and "already exists; pass --overwrite" in err
    assert mine.read_text() == "my notes\n"
    _ok(capsys, "predict", d / "train_m.zarr", d / "test.csv", mine, "--cluster", "sync",
        "--overwrite")
    header, rows = _read_csv(mine)
    assert header == ["prediction"] and len(rows) == 120
    # the input is never the output, even with --overwrite
    code, _, err = _main(capsys, "predict", d / "train_m.zarr", d / "test.csv", d / "test.csv",
                         "--cluster", "sync", "--overwrite")
    assert code != 0 and "is also an input" in err


def test_a_failed_write_leaves_no_file_and_keeps_the_old_one(fitted, tmp_path, capsys,
                                                             monkeypatch):
    from distsketch.cli import tables

    d, _, _, _ = fitted
    old = tmp_path / "p.csv"
    old.write_text("prediction\n1\n")

    def broken(self, block):
        raise OSError("disk full")

    monkeypatch.setattr(tables._TableWriter, "write", broken)
    for target, extra in ((tmp_path / "new.csv", ()), (old, ("--overwrite",))):
        code, _, err = _main(capsys, "predict", d / "train_m.zarr", d / "test.csv", target,
                             "--cluster", "sync", *extra)
        assert code != 0 and "disk full" in err
    assert not (tmp_path / "new.csv").exists()
    assert old.read_text() == "prediction\n1\n"
    assert sorted(os.listdir(tmp_path)) == ["p.csv"]


def test_a_parquet_output_without_pyarrow_says_which_extra(fitted, tmp_path, capsys,
                                                           monkeypatch):
    d, _, _, _ = fitted
    real = builtins.__import__

    def no_pyarrow(name, *args, **kwargs):
        if name.startswith("pyarrow"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    code, _, err = _main(capsys, "predict", d / "train_m.zarr", d / "test.csv",
                         tmp_path / "p.parquet", "--cluster", "sync")
    assert code != 0 and 'pip install "distsketch[parquet]"' in err
    assert os.listdir(tmp_path) == []


def test_a_parquet_output_holds_the_predictions(fitted, tmp_path, capsys):
    pq = pytest.importorskip("pyarrow.parquet")
    d, Xt, _, _ = fitted
    _ok(capsys, "predict", d / "train_names_m.zarr", d / "test_names.csv",
        tmp_path / "p.parquet", "--cluster", "sync")
    t = pq.read_table(tmp_path / "p.parquet")
    assert t.column_names == ["prediction"]
    assert t.column("prediction").to_pylist() == \
        _reference(d, "train_names_m.zarr", Xt).tolist()


# ------------------------------------------------------------------ ingest options


R_CSV = ('"","age","smoker","income","class"\n'
         '"1",34,"yes",1200.5,"a"\n'
         '"2",51,"no",800,"b"\n')


def test_ingest_an_r_csv_from_the_command_line(tmp_path, capsys):
    (tmp_path / "r.csv").write_text(R_CSV)
    code, _, err = _main(capsys, "ingest", tmp_path / "r.csv", tmp_path / "r.zarr",
                         "--label-column", "class")
    assert code != 0 and "--boolean-columns yes-no" in err and "--drop-column" in err
    out = _ok(capsys, "ingest", tmp_path / "r.csv", tmp_path / "r.zarr", "--label-column",
              "class", "--boolean-columns", "yes-no", "--dtype", "float64")
    assert "R's row names" in out and "'smoker'" in out
    g = zarr.open_group(str(tmp_path / "r.zarr"), mode="r")
    np.testing.assert_array_equal(g["X"][...], [[34, 1, 1200.5], [51, 0, 800]])
    (tmp_path / "ids.csv").write_text("id,a,b\nx17,1,2\nx18,3,4\n")
    code, out, err = _main(capsys, "ingest", tmp_path / "ids.csv", tmp_path / "i.zarr",
                           "--drop-column", "id", "--json")
    assert code == 0, err
    assert json.loads(out)["dropped_columns"] == ["id"]
    g = zarr.open_group(str(tmp_path / "i.zarr"), mode="r")
    np.testing.assert_array_equal(g["X"][...], [[1, 2], [3, 4]])


# ------------------------------------------------------------------ transform


@pytest.fixture(scope="module")
def rff(fitted):
    """A feature map fitted on the ingested training CSV (its label column left in the store)."""
    import contextlib
    import io

    d = fitted[0]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert cli.main(["-q", "fit", str(d / "train.zarr"), str(d / "rff_m.zarr"), "--method",
                         "RandomFourierFeatures", "--param", "n_components=16", "--param",
                         "gamma=0.5", "--cluster", "sync"]) == 0
    return d / "rff_m.zarr"


def test_transform_reads_a_csv_input_by_the_models_column_names(fitted, rff, tmp_path, capsys):
    d, Xt, _, _ = fitted
    code, out, err = _main(capsys, "transform", rff, d / "test.csv", tmp_path / "z.zarr",
                           "--cluster", "sync", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["input_columns"]["dropped_columns"] == ["klass", "id"]
    assert res["format"] == "zarr" and res["shape"] == [120, 16]
    Z = open_array(tmp_path / "z.zarr").compute()
    # the rows as ingest stores them: float32, in the model's column order (a, b, c)
    np.testing.assert_array_equal(Z, load(rff).transform(Xt.astype(np.float32)))
    # the message names what was left out
    out = _ok(capsys, "transform", rff, d / "test.csv", tmp_path / "y.zarr", "--cluster", "sync")
    assert "left out 'klass', 'id'" in out


def test_transform_writes_a_csv_output_with_the_feature_names(fitted, rff, tmp_path, capsys):
    d, Xt, _, _ = fitted
    model = load(rff)
    out = _ok(capsys, "transform", rff, d / "test.csv", tmp_path / "f.csv", "--cluster", "sync")
    assert "120 rows x 16 columns (csv)" in out
    header, rows = _read_csv(tmp_path / "f.csv")
    assert header == list(model.get_feature_names_out())
    ref = np.asarray(model.transform(Xt.astype(np.float32)))
    assert ref.dtype == np.float32
    # every value reads back bit for bit (9 significant digits for float32)
    np.testing.assert_array_equal(np.array(rows, dtype=np.float64).astype(np.float32), ref)
    # a store input works too, and an existing file is replaced only with --overwrite
    code, _, err = _main(capsys, "transform", rff, d / "train.zarr", tmp_path / "f.csv",
                         "--cluster", "sync")
    assert code != 0 and "already exists; pass --overwrite" in err
    _ok(capsys, "transform", rff, d / "train.zarr", tmp_path / "f.csv", "--cluster", "sync",
        "--overwrite")
    _, rows = _read_csv(tmp_path / "f.csv")
    X_train = open_array(d / "train.zarr").compute()
    np.testing.assert_array_equal(np.array(rows, dtype=np.float64).astype(np.float32),
                                  np.asarray(model.transform(X_train)))
    assert sorted(os.listdir(tmp_path)) == ["f.csv"]


def test_transform_refuses_a_table_it_cannot_place_and_leaves_nothing(fitted, rff, tmp_path,
                                                                       capsys):
    _, Xt, _, _ = fitted
    _table(tmp_path / "short.csv", ["a", "c"], Xt[:, [0, 2]].tolist())  # no column b
    for target in (tmp_path / "z.zarr", tmp_path / "f.csv"):
        code, _, err = _main(capsys, "transform", rff, tmp_path / "short.csv", target,
                             "--cluster", "sync")
        assert code != 0
        assert "'b'" in err and f"`distsketch ingest {tmp_path / 'short.csv'} short.zarr" in err
        assert "metadata" not in err
    assert sorted(os.listdir(tmp_path)) == ["short.csv"]


def test_transform_reads_and_writes_parquet(fitted, rff, tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    _, Xt, kt, _ = fitted
    # the columns in another order and an ID column, as in test.csv
    pq.write_table(pa.table({"id": [f"row{i}" for i in range(len(kt))], "c": Xt[:, 2],
                             "a": Xt[:, 0], "b": Xt[:, 1]}), tmp_path / "t.parquet")
    model = load(rff)
    _ok(capsys, "transform", rff, tmp_path / "t.parquet", tmp_path / "f.parquet",
        "--cluster", "sync")
    t = pq.read_table(tmp_path / "f.parquet")
    assert t.column_names == list(model.get_feature_names_out())
    assert all(f.type == pa.float32() for f in t.schema)
    got = np.column_stack([t.column(n).to_numpy() for n in t.column_names])
    np.testing.assert_array_equal(got, model.transform(Xt.astype(np.float32)))
