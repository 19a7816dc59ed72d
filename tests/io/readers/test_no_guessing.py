"""Readers never guess silently: the documented CSV header rule, values named when refused,
labels checked on every path, integers never rounded, tiny chunkings refused."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import zarr

from distsketch.errors import ConfigError, InputError
from distsketch.io import open_array, read_manifest
from distsketch.io.readers import ingest

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _write(tmp_path: Path, text: str, name: str = "a.csv") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def _group(path: Path) -> zarr.Group:
    return zarr.open_group(str(path), mode="r")


# ------------------------------------------------------------------ the header rule


@pytest.mark.parametrize("row, column, value", [
    ('1,"2,5",3', 2, "'2,5'"),
    ('"1,000",2,3', 1, "'1,000'"),
    ("1,2,3a", 3, "'3a'"),
])
def test_a_bad_first_line_is_refused_like_a_bad_second_line(tmp_path, row, column, value):
    for line, text in ((1, f"{row}\n4,5,6\n"), (2, f"4,5,6\n{row}\n")):
        out = tmp_path / f"o{line}.zarr"
        with pytest.raises(InputError) as exc:
            ingest(_write(tmp_path, text), out)
        msg = str(exc.value)
        assert f"line {line}, column {column}: {value} is not a number" in msg
        assert not out.exists()


def test_a_header_is_a_line_of_names_only(tmp_path):
    out = ingest(_write(tmp_path, "a,b,_c\n1,2,3\n4,5,6\n"), tmp_path / "o.zarr")
    np.testing.assert_array_equal(_group(out)["X"][:], [[1, 2, 3], [4, 5, 6]])
    assert _group(out)["X"].attrs["feature_names"] == ["a", "b", "_c"]
    # a name mixed with numbers is data, and refused with the way out
    with pytest.raises(InputError, match=r"line 1, column 1: 'x1' is not a number.*--header"):
        ingest(_write(tmp_path, "x1,2,y\n1,2,3\n"), tmp_path / "p.zarr")


def test_header_and_no_header_override_the_rule(tmp_path):
    out = ingest(_write(tmp_path, "x1,2,y\n1,2,3\n"), tmp_path / "o.zarr", header=True)
    np.testing.assert_array_equal(_group(out)["X"][:], [[1, 2, 3]])
    assert _group(out)["X"].attrs["feature_names"] == ["x1", "2", "y"]
    with pytest.raises(InputError, match=r"line 1, column 1: 'a' is not a number"):
        ingest(_write(tmp_path, "a,b\n1,2\n"), tmp_path / "p.zarr", header=False)
    with pytest.raises(InputError, match="the header has 2 names but line 2 has 3 fields"):
        ingest(_write(tmp_path, "a,b\n1,2,3\n"), tmp_path / "q.zarr", header=True)


@pytest.mark.parametrize("value", ["1_000", "\uff11\uff12", "0x10"])
def test_numbers_python_would_accept_are_named(tmp_path, value):
    with pytest.raises(InputError) as exc:
        ingest(_write(tmp_path, f"1,2\n3,{value}\n"), tmp_path / "o.zarr")
    assert f"line 2, column 2: {value!r} is not a number" in str(exc.value)


# ------------------------------------------------------------------ integers are exact


def test_integers_float32_would_round_are_refused(tmp_path):
    np.save(tmp_path / "i.npy", np.array([[1, 2], [3, 2**24 + 1]], dtype=np.int64))
    with pytest.raises(InputError, match=r"row 1, column 2 holds the integer 16777217, which "
                       r"float32 cannot represent exactly \(it would become 16777216\).*"
                       r"--dtype float64"):
        ingest(tmp_path / "i.npy", tmp_path / "o.zarr")
    out = ingest(tmp_path / "i.npy", tmp_path / "o.zarr", dtype="float64")
    assert _group(out)["X"][1, 1] == 2**24 + 1
    # the same value written as text
    csv = _write(tmp_path, "1,2\n3,16777217\n")
    with pytest.raises(InputError, match=r"row 1 \(line 2\), column 2 holds the integer 16777217"):
        ingest(csv, tmp_path / "c.zarr")
    assert _group(ingest(csv, tmp_path / "c.zarr", dtype="float64"))["X"][1, 1] == 2**24 + 1


def test_integers_no_float_holds_are_refused_or_kept_as_integers(tmp_path):
    big = 2**63 - 1
    np.save(tmp_path / "i.npy", np.array([[big, 1]], dtype=np.int64))
    with pytest.raises(InputError, match=f"holds the integer {big}.*--dtype int64"):
        ingest(tmp_path / "i.npy", tmp_path / "o.zarr", dtype="float64")
    assert _group(ingest(tmp_path / "i.npy", tmp_path / "o.zarr", dtype="int64"))["X"][0, 0] == big
    # text is parsed as float64: a too-large integer there cannot be kept exactly at all
    with pytest.raises(InputError, match=f"holds the integer {big}.*rescale or drop"):
        ingest(_write(tmp_path, f"{big},1\n"), tmp_path / "c.zarr", dtype="float64")


def test_floats_written_as_floats_round_as_floats(tmp_path):
    # 1e30 and 0.1 are not integers in the file: float32 rounding them is the cast's ordinary job
    out = ingest(_write(tmp_path, "1e30,0.1\n16777216,2\n"), tmp_path / "o.zarr")
    np.testing.assert_array_equal(_group(out)["X"][:], np.float32([[1e30, 0.1], [2**24, 2]]))


# ------------------------------------------------------------------ labels on every path


def test_npy_labels_with_nan_are_refused(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((3, 2)))
    np.save(tmp_path / "y.npy", np.array([1.0, np.nan, 0.0]))
    with pytest.raises(InputError, match=r"y\.npy: NaN or Inf at row 1"):
        ingest(tmp_path / "x.npy", tmp_path / "o.zarr", labels=tmp_path / "y.npy")
    assert not (tmp_path / "o.zarr").exists()
    out = ingest(tmp_path / "x.npy", tmp_path / "o.zarr", labels=tmp_path / "y.npy",
                 allow_nan=True)
    assert np.isnan(_group(out)["y"][1])


@pytest.mark.parametrize("labels", [np.array(["cat", "dog", "cat", "eel"]),
                                    np.array([b"cat", b"dog", b"cat", b"eel"])])
def test_npy_string_labels_are_stored_as_class_names(tmp_path, labels):
    np.save(tmp_path / "x.npy", np.ones((4, 2)))
    np.save(tmp_path / "y.npy", labels)
    out = ingest(tmp_path / "x.npy", tmp_path / "o.zarr", labels=tmp_path / "y.npy",
                 chunk_rows=2)
    y = _group(out)["y"]
    assert y.dtype == np.int32 and y.attrs["classes"] == ["cat", "dog", "eel"]
    assert open_array(f"{out}::y", targets=True).compute().tolist() == ["cat", "dog", "cat", "eel"]


def test_npy_object_labels_are_refused_clearly(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((2, 2)))
    np.save(tmp_path / "y.npy", np.array(["a", None], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="Save the labels as numbers or strings"):
        ingest(tmp_path / "x.npy", tmp_path / "o.zarr", labels=tmp_path / "y.npy")


# ------------------------------------------------------------------ the label column


LETTERS = "T,2,8,3\nI,5,12,3\nD,4,11,6\nT,7,11,6\nN,2,1,3\n"


def test_label_column_of_class_names(tmp_path):
    out = ingest(_write(tmp_path, LETTERS), tmp_path / "o.zarr", label_column=0, chunk_rows=2)
    g = _group(out)
    np.testing.assert_array_equal(g["X"][:], [[2, 8, 3], [5, 12, 3], [4, 11, 6], [7, 11, 6],
                                             [2, 1, 3]])
    assert g["y"].attrs["classes"] == ["T", "I", "D", "N"]
    assert open_array(f"{out}::y", targets=True).compute().tolist() == list("TIDTN")
    info = read_manifest(out)
    assert info["n_features"] == 3 and info["n_classes"] == 4 and info["labels"] == "classes"


def test_label_column_by_name_and_from_the_end(tmp_path):
    text = "a,lettr,b\n1,T,2\n3,A,4\n"
    out = ingest(_write(tmp_path, text), tmp_path / "o.zarr", label_column="lettr")
    g = _group(out)
    assert g["X"].attrs["feature_names"] == ["a", "b"]
    np.testing.assert_array_equal(g["X"][:], [[1, 2], [3, 4]])
    out = ingest(_write(tmp_path, "1,2,0.5\n3,4,1.5\n"), tmp_path / "n.zarr", label_column=-1)
    y = _group(out)["y"]
    assert y.dtype == np.float64 and "classes" not in dict(y.attrs)
    np.testing.assert_array_equal(y[:], [0.5, 1.5])


@pytest.mark.parametrize("text, kwargs, match", [
    ("1,2,8\nA,1,1\n", {}, r"line 2, column 1: label 'A' is not a number.*--class-labels"),
    ("T,2,8\n,1,1\n", {}, r"line 2, column 1: the label is empty"),
    ("1,2,8\nnan,1,1\n", {}, r"NaN or Inf at row 1 \(line 2\)"),
    ("T,2\nA,1\n", {"class_labels": False}, r"line 1, column 1: label 'T' is not a number"),
    ("T,2\nA,1\n", {"label_column": "lettr"}, r"names a column, but the file has no header"),
    ("l,a\nT,2\n", {"label_column": "q"}, r"no column named 'q'; the header names 'l', 'a'"),
    ("T,2\nA,1\n", {"label_column": 2}, r"label_column=2 is out of range"),
])
def test_label_column_refusals(tmp_path, text, kwargs, match):
    kwargs = {"label_column": 0, **kwargs}
    with pytest.raises(InputError, match=match):
        ingest(_write(tmp_path, text), tmp_path / "o.zarr", **kwargs)
    assert not (tmp_path / "o.zarr").exists()


def test_numbers_as_class_names_on_request(tmp_path):
    out = ingest(_write(tmp_path, "3,1\n1,2\n3,3\n"), tmp_path / "o.zarr", label_column=0,
                 class_labels=True)
    assert _group(out)["y"].attrs["classes"] == ["3", "1"]


def test_csv_options_are_refused_for_other_formats(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((2, 2)))
    with pytest.raises(ConfigError, match=r"apply to tables with columns \(CSV, Parquet\), not npy"):
        ingest(tmp_path / "x.npy", tmp_path / "o.zarr", label_column=0)
    with pytest.raises(ConfigError, match="header= applies to CSV files, not npy"):
        ingest(tmp_path / "x.npy", tmp_path / "o.zarr", header=True)


# ------------------------------------------------------------------ tiny chunkings


def test_tiny_chunks_are_refused_with_the_least_accepted(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((100_000, 6), dtype=np.float32))
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=r"chunk_rows=1 makes chunks of 24 bytes.*"
                       r"chunk_rows >= 2731"):
        ingest(tmp_path / "x.npy", tmp_path / "o.zarr", chunk_rows=1)
    assert time.perf_counter() - t0 < 5
    assert not (tmp_path / "o.zarr").exists()
    out = ingest(tmp_path / "x.npy", tmp_path / "o.zarr", chunk_rows=2731)
    assert _group(out)["X"].chunks == (2731, 6)


def test_tiny_chunks_of_a_csv_stop_early(tmp_path):
    csv = _write(tmp_path, "1,2,3\n" * 100_000)
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match="needs more than 1000 of them"):
        ingest(csv, tmp_path / "o.zarr", chunk_rows=1)
    assert time.perf_counter() - t0 < 30
    assert not (tmp_path / "o.zarr").exists()


def test_small_chunks_of_a_small_store_are_fine(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((50, 3)))
    out = ingest(tmp_path / "x.npy", tmp_path / "o.zarr", chunk_rows=1)
    assert _group(out)["X"].chunks == (1, 3)
