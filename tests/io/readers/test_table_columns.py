"""The columns of a table a user has: R's row names dropped, ``drop_columns=``, yes/no columns
as 1/0 (``boolean_columns="yes-no"``), columns chosen by name (``columns=``), and messages
that point to these options."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr

from distsketch.errors import InputError
from distsketch.io import read_manifest
from distsketch.io.readers import ingest

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

# what R's write.csv(df) writes for a data frame with a logical and a yes/no factor column
R_CSV = ('"","age","smoker","member","income","class"\n'
         '"1",34,"yes",TRUE,1200.5,"a"\n'
         '"2",51,"no",FALSE,800,"b"\n'
         '"3",29,"Yes",true,950.25,"a"\n')
R_X = np.array([[34, 1, 1, 1200.5], [51, 0, 0, 800], [29, 1, 1, 950.25]])


def _write(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def _group(path: Path) -> zarr.Group:
    return zarr.open_group(str(path), mode="r")


def test_r_csv_drops_the_row_names_and_reads_yes_no_as_1_0(tmp_path):
    src = _write(tmp_path, R_CSV)
    out = ingest(src, tmp_path / "r.zarr", label_column="class", boolean_columns="yes-no",
                 dtype="float64")
    g = _group(out)
    np.testing.assert_array_equal(g["X"][...], R_X)
    assert list(g["X"].attrs["feature_names"]) == ["age", "smoker", "member", "income"]
    np.testing.assert_array_equal(g["y"][...], [0, 1, 0])
    assert list(g["y"].attrs["classes"]) == ["a", "b"]
    man = read_manifest(out)
    assert man["dropped_columns"] == [""]
    assert man["yes_no_columns"] == ["smoker", "member"]


def test_without_the_option_a_yes_no_column_is_refused_naming_the_options(tmp_path):
    src = _write(tmp_path, R_CSV)
    with pytest.raises(InputError) as info:
        ingest(src, tmp_path / "r.zarr", label_column="class")
    msg = str(info.value)
    assert "line 2, column 3 ('smoker')" in msg
    assert "--boolean-columns yes-no" in msg and "--drop-column" in msg
    assert not (tmp_path / "r.zarr").exists()


def test_any_text_column_points_to_drop_column(tmp_path):
    src = _write(tmp_path, "id,a,b\nx17,1,2\nx18,3,4\n")
    with pytest.raises(InputError) as info:
        ingest(src, tmp_path / "o.zarr")
    msg = str(info.value)
    assert "column 1 ('id')" in msg and "'x17' is not a number" in msg
    assert "--drop-column NAME" in msg and "--boolean-columns yes-no" in msg


@pytest.mark.parametrize("drop", [["id"], [0], [-3], ["id", "id"]])
def test_drop_columns_by_name_or_index(tmp_path, drop):
    src = _write(tmp_path, "id,a,b\nx17,1,2\nx18,3,4\n")
    out = ingest(src, tmp_path / "o.zarr", drop_columns=drop, dtype="float64")
    np.testing.assert_array_equal(_group(out)["X"][...], [[1, 2], [3, 4]])
    assert list(_group(out)["X"].attrs["feature_names"]) == ["a", "b"]
    assert read_manifest(out)["dropped_columns"] == ["id"]


def test_drop_columns_errors(tmp_path):
    src = _write(tmp_path, "id,a,b\nx17,1,2\n")
    with pytest.raises(InputError, match="no column named 'nope' to drop"):
        ingest(src, tmp_path / "o.zarr", drop_columns=["nope"])
    with pytest.raises(InputError, match="drop column 3 is out of range"):
        ingest(src, tmp_path / "o.zarr", drop_columns=[3])
    with pytest.raises(InputError, match="both the label column and dropped"):
        ingest(src, tmp_path / "o.zarr", drop_columns=["a"], label_column="a")
    with pytest.raises(InputError, match="leaves no features"):
        ingest(src, tmp_path / "o.zarr", drop_columns=["id", "a"], label_column="b")
    assert not (tmp_path / "o.zarr").exists()


def test_a_yes_no_column_holding_another_word_names_it(tmp_path):
    src = _write(tmp_path, "a,ok\n1,yes\n2,maybe\n")
    with pytest.raises(InputError) as info:
        ingest(src, tmp_path / "o.zarr", boolean_columns="yes-no")
    msg = str(info.value)
    assert "line 3, column 2 ('ok')" in msg and "'maybe' is not yes/no" in msg


def test_columns_selects_by_name_in_the_given_order(tmp_path):
    src = _write(tmp_path, "label,c,b,a,id\nq,3,2,1,x\nr,6,5,4,y\n")
    out = ingest(src, tmp_path / "o.zarr", columns=["a", "b", "c"], dtype="float64")
    np.testing.assert_array_equal(_group(out)["X"][...], [[1, 2, 3], [4, 5, 6]])
    assert list(_group(out)["X"].attrs["feature_names"]) == ["a", "b", "c"]
    assert read_manifest(out)["dropped_columns"] == ["label", "id"]
    with pytest.raises(InputError, match="no column named 'd'"):
        ingest(src, tmp_path / "p.zarr", columns=["a", "d"])


def test_parquet_drop_columns_and_yes_no_text(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    t = pa.table({"id": ["r1", "r2", "r3"], "age": [34, 51, 29],
                  "smoker": ["yes", "No", "TRUE"], "income": [1200.5, 800.0, 950.25]})
    pq.write_table(t, tmp_path / "t.parquet")
    out = ingest(tmp_path / "t.parquet", tmp_path / "o.zarr", drop_columns=["id"],
                 boolean_columns="yes-no", dtype="float64")
    np.testing.assert_array_equal(_group(out)["X"][...],
                                  [[34, 1, 1200.5], [51, 0, 800], [29, 1, 950.25]])
    assert read_manifest(out)["yes_no_columns"] == ["smoker"]
    with pytest.raises(InputError, match="--drop-column"):
        ingest(tmp_path / "t.parquet", tmp_path / "p.zarr")
