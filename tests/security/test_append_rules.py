"""Appending follows ingest's rules, and label columns hold no surprises.

* An integer the stored dtype would round is refused on every path (ingest and
  append of .npy, CSV, svmlight and Parquet, in-memory append), also in label
  columns, where 2**60 + 1 and 2**60 + 2 must not become one float64 label.
* A file appended with a header is matched to the store's feature names by
  name: reordered columns are reordered, other columns are refused.
* A class name that reads as NaN, that is longer than the limit the store's
  readers check, or a label column named twice in the header, is refused.
"""

from __future__ import annotations

import hashlib
import os
import re

import numpy as np
import pytest
import zarr

import distsketch.cli as cli
from distsketch.errors import InputError, StoreError
from distsketch.io import append, ingest, open_array
from distsketch.io.arrays.class_codes import MAX_CLASS_NAME, class_names
from distsketch.io.arrays.targets import open_targets

BIG = 2**60  # float64 holds 2**60 exactly, but not 2**60 + 1 or 2**60 + 2


def snapshot(path):
    out = {}
    for d, _, files in os.walk(path):
        for f in files:
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, path)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def _write(path, text):
    path.write_text(text)
    return path


def _labelled_store(tmp_path):
    """A float32 X of width 2 with float64 labels (an svmlight file)."""
    src = _write(tmp_path / "first.svm", "0 1:1 2:2\n1 1:3 2:4\n")
    return ingest(src, tmp_path / "s.zarr")


# ------------------------------------------------------------------ no rounding, any path


def _big_npy(tmp_path):
    np.save(tmp_path / "big.npy", np.array([[1, 2], [3, 2**24 + 1]], dtype=np.int64))
    return tmp_path / "big.npy"


@pytest.mark.parametrize("case", ["memory", "npy", "csv", "svmlight"])
def test_append_refuses_an_integer_float32_would_round_as_ingest_does(tmp_path, case):
    if case == "svmlight":
        store = _labelled_store(tmp_path)
        src = _write(tmp_path / "more.svm", "0 1:1 2:2\n1 1:3 2:16777217\n")
    else:
        np.save(tmp_path / "x.npy", np.ones((4, 2), dtype=np.float32))
        store = ingest(tmp_path / "x.npy", tmp_path / "s.zarr")
        src = _big_npy(tmp_path) if case in ("memory", "npy") else \
            _write(tmp_path / "more.csv", "1,2\n3,16777217\n")
    before = snapshot(store)
    with pytest.raises(InputError) as info:
        if case == "memory":
            append(store, np.load(src))
        else:
            ingest(src, store, append=True)
    msg = str(info.value)
    assert "holds the integer 16777217, which float32 cannot represent exactly" in msg
    assert "it would become 16777216" in msg and "row" in msg
    assert snapshot(store) == before  # nothing appended, nothing rounded
    # the same file or rows are refused by a plain ingest too: one rule
    with pytest.raises(InputError, match="holds the integer 16777217"):
        ingest(src if case != "memory" else _big_npy(tmp_path), tmp_path / "new.zarr")
    assert not (tmp_path / "new.zarr").exists()
    if case == "memory":  # the advice works: a float64 store keeps the integer exactly
        f64 = ingest(tmp_path / "x.npy", tmp_path / "f64.zarr", dtype="float64")
        append(f64, np.load(src))
        assert open_array(f64).compute()[5, 1] == 2**24 + 1


def test_svmlight_ingest_refuses_an_integer_float32_would_round(tmp_path):
    src = _write(tmp_path / "a.svm", "0 1:1\n\n1 2:16777217\n")
    with pytest.raises(InputError, match=r"row 1 \(line 3\), column 2 holds the integer "
                                         r"16777217.*--dtype float64"):
        ingest(src, tmp_path / "o.zarr")
    assert not (tmp_path / "o.zarr").exists()
    out = ingest(src, tmp_path / "o.zarr", dtype="float64")
    assert zarr.open_group(str(out), mode="r")["X"][1, 1] == 2**24 + 1


# ------------------------------------------------------------------ integer labels


def test_csv_integer_labels_beyond_float64_are_refused_not_collapsed(tmp_path):
    src = _write(tmp_path / "l.csv", f"a,y\n1,{BIG + 1}\n2,{BIG + 2}\n")
    with pytest.raises(InputError) as info:
        ingest(src, tmp_path / "o.zarr", label_column="y")
    msg = str(info.value)
    assert f"row 0 (line 2), label column 'y' holds the integer {BIG + 1}" in msg
    assert "float64 cannot represent exactly" in msg and "--class-labels" in msg
    assert not (tmp_path / "o.zarr").exists()
    # the advice works: as class names the two labels stay two
    out = ingest(src, tmp_path / "o.zarr", label_column="y", class_labels=True)
    assert open_targets(f"{out}::y", 2).rows(0, 2).tolist() == [str(BIG + 1), str(BIG + 2)]


def test_csv_integer_labels_beyond_float64_are_refused_on_append(tmp_path):
    store = ingest(_write(tmp_path / "a.csv", "a,y\n1,0\n2,1\n"), tmp_path / "s.zarr",
                   label_column="y")
    before = snapshot(store)
    with pytest.raises(InputError, match=f"label column 'y' holds the integer {BIG + 1}"):
        ingest(_write(tmp_path / "b.csv", f"a,y\n3,{BIG + 1}\n4,{BIG + 2}\n"), store,
               label_column="y", append=True)
    assert snapshot(store) == before


def test_svmlight_integer_labels_beyond_float64_are_refused(tmp_path):
    src = _write(tmp_path / "l.svm", f"{BIG + 1} 1:1\n{BIG + 2} 1:2\n")
    with pytest.raises(InputError, match=f"row 0 \\(line 1\\), the label holds the integer "
                                         f"{BIG + 1}"):
        ingest(src, tmp_path / "o.zarr")
    assert not (tmp_path / "o.zarr").exists()


def test_in_memory_integer_labels_beyond_float64_are_refused(tmp_path):
    store = _labelled_store(tmp_path)
    before = snapshot(store)
    with pytest.raises(InputError, match=f"row 2, the label holds the integer {BIG + 1}"):
        append(store, np.ones((2, 2), np.float32), np.array([BIG + 1, BIG + 2], np.int64))
    assert snapshot(store) == before


# ------------------------------------------------------------------ columns matched by name


def _named_store(tmp_path):
    src = _write(tmp_path / "a.csv", "a,b,y\n1,2,0\n3,4,1\n")
    return ingest(src, tmp_path / "s.zarr", label_column="y")


def test_csv_appended_with_columns_in_another_order_is_matched_by_name(tmp_path):
    store = _named_store(tmp_path)
    ingest(_write(tmp_path / "b.csv", "y,b,a\n0,20,10\n1,40,30\n"), store, label_column="y",
           append=True)
    np.testing.assert_array_equal(open_array(store).compute(),
                                  [[1, 2], [3, 4], [10, 20], [30, 40]])
    np.testing.assert_array_equal(zarr.open_group(str(store), mode="r")["y"][:], [0, 1, 0, 1])


@pytest.mark.parametrize("text, kwargs, fragments", [
    ("a,c,y\n1,2,0\n", {"label_column": "y"},
     ["its columns are named 'a', 'c'", "records the features 'a', 'b'"]),
    ("a,b,y\n1,2,0\n", {},
     ["its columns are named 'a', 'b', 'y'", "pass label_column='y'"]),
    ("a,b,t\n1,2,0\n", {"label_column": "t"},
     ["its label column is 't'", "records the label column 'y'"]),
])
def test_csv_appended_with_other_columns_is_refused_naming_both(tmp_path, text, kwargs,
                                                                  fragments):
    store = _named_store(tmp_path)
    before = snapshot(store)
    with pytest.raises(InputError) as info:
        ingest(_write(tmp_path / "b.csv", text), store, append=True, **kwargs)
    for fragment in fragments:
        assert fragment in str(info.value)
    assert snapshot(store) == before


# ------------------------------------------------------------------ NaN class names


@pytest.mark.parametrize("nan", ["NaN", "nan", "-NAN"])
def test_nan_in_a_text_label_column_is_refused(tmp_path, nan):
    src = _write(tmp_path / "n.csv", f"a,y\n1,cat\n2,{nan}\n3,dog\n")
    with pytest.raises(InputError) as info:
        ingest(src, tmp_path / "o.zarr", label_column="y")
    msg = str(info.value)
    assert "line 3, column 2" in msg and f"{nan!r} reads as NaN" in msg
    assert "NaN labels are refused" in msg and "dropna" in msg
    assert not (tmp_path / "o.zarr").exists()


def test_nan_class_names_are_refused_on_every_labels_path(tmp_path):
    store = ingest(_write(tmp_path / "a.csv", "a,y\n1,cat\n2,dog\n"), tmp_path / "s.zarr",
                   label_column="y")
    before = snapshot(store)
    with pytest.raises(InputError, match=r"line 2, column 2: the label 'NaN' reads as NaN"):
        ingest(_write(tmp_path / "b.csv", "a,y\n3,NaN\n"), store, label_column="y", append=True)
    with pytest.raises(InputError, match=r"row 3: the label 'nan' reads as NaN"):
        append(store, np.ones((2, 1)), np.array(["cat", "nan"]))
    assert snapshot(store) == before
    np.save(tmp_path / "x.npy", np.ones((2, 1)))
    np.save(tmp_path / "y.npy", np.array(["cat", "NaN"]))
    with pytest.raises(InputError, match=r"y\.npy: row 1: the label 'NaN' reads as NaN"):
        ingest(tmp_path / "x.npy", tmp_path / "o.zarr", labels=tmp_path / "y.npy")
    assert not (tmp_path / "o.zarr").exists()


# ------------------------------------------------------------------ a label column named twice


def test_a_label_column_named_twice_is_ambiguous(tmp_path):
    src = _write(tmp_path / "d.csv", "a,y,y\n1,cat,2\n3,dog,4\n")
    with pytest.raises(InputError) as info:
        ingest(src, tmp_path / "o.zarr", label_column="y")
    msg = str(info.value)
    assert "label_column='y' is ambiguous" in msg and "columns 1 and 2" in msg
    assert "--label-column 1" in msg
    assert not (tmp_path / "o.zarr").exists()
    # the index the message suggests picks one
    out = ingest(src, tmp_path / "o.zarr", label_column=1)
    assert zarr.open_group(str(out), mode="r")["y"].attrs["classes"] == ["cat", "dog"]


def test_cli_label_column_named_twice_is_ambiguous(tmp_path, capsys):
    src = _write(tmp_path / "d.csv", "a,y,y\n1,2,3\n")
    code = cli.main(["ingest", str(src), str(tmp_path / "o.zarr"), "--label-column", "y"])
    assert code == 2
    assert "is ambiguous" in capsys.readouterr().err
    assert not (tmp_path / "o.zarr").exists()


# ------------------------------------------------------------------ class name length


def test_a_class_name_longer_than_the_read_limit_is_refused_at_ingest(tmp_path):
    src = _write(tmp_path / "l.csv", "a,y\n1,cat\n2," + "x" * 5000 + "\n")
    with pytest.raises(InputError) as info:
        ingest(src, tmp_path / "o.zarr", label_column="y")
    msg = str(info.value)
    assert "line 3, column 2" in msg and "5000 characters" in msg
    assert f"more than the {MAX_CLASS_NAME}" in msg
    assert not (tmp_path / "o.zarr").exists()
    np.save(tmp_path / "x.npy", np.ones((2, 1)))
    np.save(tmp_path / "y.npy", np.array(["cat", "x" * (MAX_CLASS_NAME + 1)]))
    with pytest.raises(InputError, match=f"row 1: the label is {MAX_CLASS_NAME + 1} characters"):
        ingest(tmp_path / "x.npy", tmp_path / "n.zarr", labels=tmp_path / "y.npy")


def test_the_longest_accepted_class_name_reads_back(tmp_path):
    # ingest's limit is the readers' limit: what ingest accepts, every later command reads
    longest = "x" * MAX_CLASS_NAME
    out = ingest(_write(tmp_path / "l.csv", f"a,y\n1,cat\n2,{longest}\n"), tmp_path / "o.zarr",
                 label_column="y")
    assert open_targets(f"{out}::y", 2).rows(0, 2).tolist() == ["cat", longest]
    before = snapshot(out)
    with pytest.raises(InputError, match=f"row 2: the label is {MAX_CLASS_NAME + 1} characters"):
        append(out, np.ones((1, 1)), np.array([longest + "x"]))
    assert snapshot(out) == before
    # one character more in the stored names is damage to the readers
    y = zarr.open_array(str(out / "y"), mode="r+")
    y.attrs["classes"] = ["cat", longest + "x"]
    with pytest.raises(StoreError, match="changed or damaged"):
        class_names(y, "y")


# ------------------------------------------------------------------ Parquet


def test_parquet_mixed_columns_refuse_an_integer_the_dtype_would_round(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table({"n": pa.array([1, 2**24 + 1], pa.int64()), "v": [0.5, 1.5]})
    pq.write_table(table, tmp_path / "m.parquet")
    with pytest.raises(InputError, match=r"row 1, column 1 holds the integer 16777217"):
        ingest(tmp_path / "m.parquet", tmp_path / "o.zarr")
    assert not (tmp_path / "o.zarr").exists()
    # float64 holds it; beyond 2**53 the table's float64 block cannot
    out = ingest(tmp_path / "m.parquet", tmp_path / "o.zarr", dtype="float64")
    assert zarr.open_group(str(out), mode="r")["X"][1, 0] == 2**24 + 1
    pq.write_table(pa.table({"n": pa.array([2**53 + 1], pa.int64()), "v": [0.5]}),
                   tmp_path / "b.parquet")
    with pytest.raises(InputError, match=f"holds the integer {2**53 + 1}.*rescale or drop"):
        ingest(tmp_path / "b.parquet", tmp_path / "b.zarr", dtype="float64")


def test_parquet_append_follows_ingest_rules(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"a": [1.0, 2.0], "b": [3.0, 4.0], "k": ["ant", "bee"]}),
                   tmp_path / "a.parquet")
    store = ingest(tmp_path / "a.parquet", tmp_path / "s.zarr", label_column="k")
    before = snapshot(store)
    cases = [
        ({"a": pa.array([2**24 + 1], pa.int64()), "b": [1.0], "k": ["ant"]},
         "holds the integer 16777217"),
        ({"a": [1.0], "c": [1.0], "k": ["ant"]}, "its columns are named 'a', 'c'"),
        ({"a": [1.0], "b": [1.0], "k": ["NaN"]}, "the label 'NaN' reads as NaN"),
    ]
    for i, (cols, fragment) in enumerate(cases):
        pq.write_table(pa.table(cols), tmp_path / f"{i}.parquet")
        with pytest.raises(InputError, match=fragment):
            ingest(tmp_path / f"{i}.parquet", store, label_column="k", append=True)
        assert snapshot(store) == before
    # the same names in another order are matched by name
    pq.write_table(pa.table({"k": ["bee"], "b": [40.0], "a": [30.0]}), tmp_path / "r.parquet")
    ingest(tmp_path / "r.parquet", store, label_column="k", append=True)
    np.testing.assert_array_equal(open_array(store).compute(), [[1, 3], [2, 4], [30, 40]])


def test_parquet_integer_labels_beyond_float64_are_refused(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"a": [1.0, 2.0], "y": pa.array([BIG + 1, BIG + 2], pa.int64())}),
                   tmp_path / "l.parquet")
    with pytest.raises(InputError, match=f"row 0, label column 'y' holds the integer {BIG + 1}"):
        ingest(tmp_path / "l.parquet", tmp_path / "o.zarr", label_column="y")
    assert not (tmp_path / "o.zarr").exists()
    out = ingest(tmp_path / "l.parquet", tmp_path / "o.zarr", label_column="y",
                 class_labels=True)
    assert open_targets(f"{out}::y", 2).rows(0, 2).tolist() == [str(BIG + 1), str(BIG + 2)]


# ------------------------------------------------------------------ in-memory rows and labels


def _classes_store(tmp_path):
    """Features f1, f2 and class names cat, dog (a CSV with a header)."""
    src = _write(tmp_path / "a.csv", "f1,f2,label\n1,2,cat\n3,4,dog\n")
    return ingest(src, tmp_path / "s.zarr", label_column="label")


def _classes(store):
    return zarr.open_group(str(store), mode="r")["y"].attrs["classes"]


def test_a_dataframe_is_matched_to_the_feature_names_by_name(tmp_path):
    """A DataFrame's columns are names, as a file's header is: in another order they were
    stored by position, under the wrong features."""
    pd = pytest.importorskip("pandas")
    store = _classes_store(tmp_path)
    append(store, pd.DataFrame({"f2": [40.0], "f1": [30.0]}), np.array(["cat"]))
    np.testing.assert_array_equal(open_array(store).compute(), [[1, 2], [3, 4], [30, 40]])
    before = snapshot(store)
    with pytest.raises(InputError) as info:
        append(store, pd.DataFrame({"f2": [1.0], "g": [2.0]}), np.array(["cat"]))
    msg = str(info.value)
    assert "its columns are named 'f2', 'g'" in msg and "records the features 'f1', 'f2'" in msg
    assert "wrong feature" in msg
    assert snapshot(store) == before
    # columns without names (0, 1) are matched by position, as an array's
    append(store, pd.DataFrame([[5.0, 6.0]]), np.array(["dog"]))
    np.testing.assert_array_equal(open_array(store).compute()[-1], [5, 6])


def test_a_masked_array_is_refused_not_stored_unmasked(tmp_path):
    store = _classes_store(tmp_path)
    before = snapshot(store)
    rows = np.ma.array([[1.0, 99.0]], mask=[[False, True]])
    with pytest.raises(InputError, match="cannot append a masked array") as info:
        append(store, rows, np.array(["cat"]))
    assert "stored as the numbers under the mask" in str(info.value)
    assert snapshot(store) == before


def test_appended_class_names_are_read_as_ingest_reads_them(tmp_path):
    """Ingest strips the blanks around a class name and reads a .npy of bytes as text; append
    made ' cat' a class of its own and refused bytes as 'numbers'."""
    store = _classes_store(tmp_path)
    append(store, np.array([[5.0, 6.0]]), np.array([" cat "]))
    np.save(tmp_path / "one.npy", np.array([[7.0, 8.0]]))
    np.save(tmp_path / "labels.npy", np.array([b"dog"]))
    ingest(tmp_path / "one.npy", store, append=True, labels=tmp_path / "labels.npy")
    assert _classes(store) == ["cat", "dog"]
    assert open_targets(f"{store}::y", 4).rows(0, 4).tolist() == ["cat", "dog", "cat", "dog"]


def test_labels_of_bytes_that_are_not_text_are_an_input_error(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((1, 2)))
    np.save(tmp_path / "labels.npy", np.array([b"\xff"]))
    with pytest.raises(InputError, match=r"labels\.npy: a label of rows 0\.\.0 is not ASCII"):
        ingest(tmp_path / "x.npy", tmp_path / "o.zarr", labels=tmp_path / "labels.npy")
    assert not (tmp_path / "o.zarr").exists()


@pytest.mark.parametrize("name, code", [
    ("\x1b[2Jcat", "U+001B"),          # a terminal escape (clears the screen)
    ("cat\ndog", "U+000A"),            # a line break: a forged line in a report or log
    ("\u202edog", "U+202E"),           # right-to-left override: prints as 'god'
], ids=["escape", "newline", "bidi"])
def test_class_names_with_control_characters_are_refused(tmp_path, name, code):
    store = _classes_store(tmp_path)
    before = snapshot(store)
    code = re.escape(code)
    with pytest.raises(InputError, match=f"row 2: the label .* holds the control character "
                                         f"{code}") as info:
        append(store, np.array([[5.0, 6.0]]), np.array([name]))
    assert "Remove or replace it" in str(info.value)
    assert snapshot(store) == before
    np.save(tmp_path / "x.npy", np.ones((1, 2)))
    np.save(tmp_path / "labels.npy", np.array([name]))
    with pytest.raises(InputError, match=f"labels.npy: row 0: .*control character {code}"):
        ingest(tmp_path / "x.npy", tmp_path / "o.zarr", labels=tmp_path / "labels.npy")
    assert not (tmp_path / "o.zarr").exists()
    if "\n" not in name:  # a CSV line holds no line break
        src = _write(tmp_path / "c.csv", f"f1,label\n1,{name}\n")
        with pytest.raises(InputError, match=f"line 2, column 2: .*control character {code}"):
            ingest(src, tmp_path / "c.zarr", label_column="label")
        assert not (tmp_path / "c.zarr").exists()


def test_class_names_that_differ_only_in_normalisation_are_refused(tmp_path):
    """'café' composed and 'cafe' + U+0301 print the same: two classes that look like one."""
    composed, decomposed = "caf\u00e9", "cafe\u0301"
    src = _write(tmp_path / "a.csv", f"f1,label\n1,{composed}\n2,{decomposed}\n")
    with pytest.raises(InputError, match=r"line 3, column 2: the label 'cafe\\u0301' and the "
                                         r"class name 'caf\\xe9' differ only in their Unicode "
                                         r"normalisation"):
        ingest(src, tmp_path / "a.zarr", label_column="label")
    assert not (tmp_path / "a.zarr").exists()
    store = ingest(_write(tmp_path / "b.csv", f"f1,label\n1,{composed}\n"), tmp_path / "b.zarr",
                   label_column="label")
    before = snapshot(store)
    with pytest.raises(InputError, match=r"row 1: the label 'cafe\\u0301' .* normalise the "
                                         r"labels first"):
        append(store, np.array([[2.0]]), np.array([decomposed]))
    assert snapshot(store) == before
    np.save(tmp_path / "x.npy", np.ones((2, 1)))
    np.save(tmp_path / "labels.npy", np.array([composed, decomposed]))
    with pytest.raises(InputError, match=r"labels.npy: row \d: the label .* differ only"):
        ingest(tmp_path / "x.npy", tmp_path / "c.zarr", labels=tmp_path / "labels.npy")
    assert not (tmp_path / "c.zarr").exists()


def test_parquet_numeric_labels_are_not_made_class_names_on_append(tmp_path):
    """A Parquet column of numbers appended to a store of class names was cast to text and
    stored as a new class '1'; its type says it holds numbers: refused, as in memory."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"a": [1.0, 2.0], "k": ["ant", "bee"]}), tmp_path / "a.parquet")
    store = ingest(tmp_path / "a.parquet", tmp_path / "s.zarr", label_column="k")
    before = snapshot(store)
    pq.write_table(pa.table({"a": [3.0], "k": [1.0]}), tmp_path / "n.parquet")
    with pytest.raises(InputError, match="stores its labels as class names") as info:
        ingest(tmp_path / "n.parquet", store, label_column="k", append=True)
    assert "class_labels=True" in str(info.value)
    assert snapshot(store) == before
    # asked for, the numbers are names
    ingest(tmp_path / "n.parquet", store, label_column="k", class_labels=True, append=True)
    assert _classes(store) == ["ant", "bee", "1"]
