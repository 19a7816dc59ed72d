"""Parquet tables through pyarrow: numeric columns to X, a label column to y, read in blocks."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
import zarr

import distsketch.cli as cli
from distsketch.errors import ConfigError, InputError
from distsketch.io import ingest, open_array
from distsketch.io.readers.base import ReadOptions
from distsketch.io.readers.parquet import ParquetReader

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

NAMES = np.array(["setosa", "versicolor", "virginica"])


def _table(n: int = 50, seed: int = 0) -> tuple[dict, np.ndarray]:
    rng = np.random.default_rng(seed)
    kind = NAMES[rng.integers(0, 3, n)]
    cols = {"length": rng.normal(size=n), "width": rng.normal(size=n).astype(np.float32),
            "kind": kind.tolist(), "count": rng.integers(0, 100, n)}
    return cols, kind


def _write(path, cols: dict, row_group_size: int = 7):
    pq.write_table(pa.table(cols), path, row_group_size=row_group_size)
    return path


def test_string_labels_are_read_back_as_the_table_names(tmp_path):
    cols, kind = _table()
    src = _write(tmp_path / "t.parquet", cols)
    out = ingest(src, tmp_path / "x.zarr", label_column="kind", chunk_rows=8)
    g = zarr.open_group(str(out), mode="r")
    X = np.column_stack([cols["length"], cols["width"], cols["count"]]).astype(np.float32)
    np.testing.assert_array_equal(g["X"][...], X)
    assert g["X"].attrs["feature_names"] == ["length", "width", "count"]
    assert g["y"].dtype == np.int32
    assert g["y"].attrs["classes"] == list(dict.fromkeys(kind.tolist()))  # first appearance
    # the targets read back are the table's names
    assert open_array(f"{out}::y", targets=True).compute().tolist() == kind.tolist()


def test_blocks_are_bounded_by_the_rows_asked_for(tmp_path):
    cols, _ = _table(50)
    src = _write(tmp_path / "t.parquet", cols, row_group_size=20)
    with ParquetReader().open(src, ReadOptions(label_column="kind")) as stream:
        sizes = [b.X.shape[0] for b in stream.blocks(8)]
    assert max(sizes) <= 8 and sum(sizes) == 50


def test_numeric_label_column_by_index(tmp_path):
    cols, _ = _table()
    numeric = {k: v for k, v in cols.items() if k != "kind"}
    out = ingest(_write(tmp_path / "n.parquet", numeric), tmp_path / "x.zarr", label_column=-1)
    g = zarr.open_group(str(out), mode="r")
    np.testing.assert_array_equal(g["y"][...], cols["count"].astype(np.float64))
    assert "classes" not in dict(g["y"].attrs)
    src = _write(tmp_path / "t.parquet", cols)
    with pytest.raises(InputError, match="column 'kind' is string, not numbers"):
        ingest(src, tmp_path / "bad.zarr")  # without a label column, the text goes to X
    assert not (tmp_path / "bad.zarr").exists()


def test_boolean_and_decimal_columns_are_numbers(tmp_path):
    import datetime
    import decimal

    flags = [True, False, True, True]
    prices = [decimal.Decimal("1.25"), decimal.Decimal("-3.5"), decimal.Decimal("0.10"),
              decimal.Decimal("12345.67")]
    src = _write(tmp_path / "t.parquet", {"flag": flags, "price": pa.array(
        prices, type=pa.decimal128(7, 2)), "n": [1, 2, 3, 4], "c": ["a", "b", "a", "b"]})
    out = ingest(src, tmp_path / "x.zarr", label_column="c", dtype="float64")
    X = zarr.open_group(str(out), mode="r")["X"][...]
    np.testing.assert_array_equal(X[:, 0], [1.0, 0.0, 1.0, 1.0])
    # the nearest float64 of each decimal, as float(Decimal) gives it
    np.testing.assert_array_equal(X[:, 1], [float(p) for p in prices])
    np.testing.assert_array_equal(X[:, 2], [1.0, 2.0, 3.0, 4.0])
    # a boolean table alone keeps a numeric dtype with dtype=None (0/1 as uint8)
    only = _write(tmp_path / "b.parquet", {"flag": flags})
    g = zarr.open_group(str(ingest(only, tmp_path / "b.zarr", dtype=None)), mode="r")
    assert g["X"].dtype == np.uint8 and g["X"][:, 0].tolist() == [1, 0, 1, 1]
    # dates are refused by name, saying what to do; nothing is left behind
    days = [datetime.date(2024, 1, d) for d in (1, 2, 3, 4)]
    dated = _write(tmp_path / "d.parquet", {"when": days, "n": [1, 2, 3, 4]})
    with pytest.raises(InputError, match=r"column 'when' is date32\[day\] \(dates or times\).*"
                                         r"Convert it to numbers before ingesting"):
        ingest(dated, tmp_path / "d.zarr")
    assert not (tmp_path / "d.zarr").exists()


def test_numbers_as_class_names_when_asked(tmp_path):
    src = _write(tmp_path / "t.parquet", {"a": [1.0, 2.0, 3.0], "c": [3, 1, 3]})
    out = ingest(src, tmp_path / "x.zarr", label_column="c", class_labels=True)
    assert zarr.open_group(str(out), mode="r")["y"].attrs["classes"] == ["3", "1"]


@pytest.mark.parametrize("column", ["width", "kind"])
def test_a_null_is_refused_naming_row_and_column(tmp_path, column):
    cols, _ = _table(30)
    values = list(cols[column])
    values[17] = None
    cols[column] = values
    src = _write(tmp_path / "t.parquet", cols)
    with pytest.raises(InputError, match=f"row 17, column '{column}' is null"):
        ingest(src, tmp_path / "x.zarr", label_column="kind", chunk_rows=8)
    assert not (tmp_path / "x.zarr").exists()


def test_without_pyarrow_the_error_names_the_extra(tmp_path, monkeypatch):
    cols, _ = _table(5)
    src = _write(tmp_path / "t.parquet", cols)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)  # import fails as if not installed
    with pytest.raises(ConfigError, match=r'pip install "distsketch\[parquet\]"'):
        ingest(src, tmp_path / "x.zarr", label_column="kind")
    assert not (tmp_path / "x.zarr").exists()


def test_cli_ingest_fit_predict_of_a_parquet_table(tmp_path, capsys):
    cols, kind = _table(120)
    # no suffix: the format is told by the file's first bytes
    src = _write(tmp_path / "table", cols)
    x = tmp_path / "x.zarr"
    assert cli.main(["ingest", str(src), str(x), "--label-column", "kind", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["format"] == "parquet" and res["arrays"] == ["X", "y"]
    assert open_array(f"{x}::y", targets=True).compute().tolist() == kind.tolist()
    sync = ["-q", "--cluster", "sync"]
    assert cli.main(["fit", str(x), str(tmp_path / "m.zarr"), "--method",
                     "SketchedKernelRidgeClassifier", "--y", f"{x}::y", "--n-features", "32",
                     *sync]) == 0
    assert cli.main(["predict", str(tmp_path / "m.zarr"), str(x), str(tmp_path / "p.zarr"),
                     *sync]) == 0
    pred = zarr.open_group(str(tmp_path / "p.zarr"), mode="r")["predictions"]
    assert set(pred[...].tolist()) <= set(NAMES.tolist())  # the table's labels
    assert sorted(pred.attrs["classes"]) == sorted(set(kind.tolist()))


def test_append_a_parquet_table_maps_its_names(tmp_path):
    first = {"a": [0.0, 1.0, 2.0], "kind": ["ant", "bee", "ant"]}
    more = {"a": [3.0, 4.0], "kind": ["cat", "ant"]}  # its own first-appearance order differs
    out = ingest(_write(tmp_path / "a.parquet", first), tmp_path / "x.zarr", label_column="kind")
    ingest(_write(tmp_path / "b.parquet", more), out, label_column="kind", append=True)
    y = open_array(f"{out}::y", targets=True).compute().tolist()
    assert y == ["ant", "bee", "ant", "cat", "ant"]
    np.testing.assert_array_equal(open_array(out).compute()[:, 0], [0, 1, 2, 3, 4])
