"""Appending rows to an ingested store: X and y grow together, atomically, checked."""

from __future__ import annotations

import hashlib
import os
import warnings

import numpy as np
import pytest
import zarr

import distsketch.cli as cli
import distsketch.io.arrays.appending as append_mod
from distsketch.errors import InputError, StoreError
from distsketch.io import append, ingest, open_array, read_manifest
from distsketch.io.arrays.targets import open_targets

X = np.random.default_rng(0).normal(size=(1000, 5)).astype(np.float32)
Y = np.arange(1000) % 4


@pytest.fixture
def store(tmp_path):
    np.save(tmp_path / "x.npy", X[:600])
    np.save(tmp_path / "y.npy", Y[:600])
    return ingest(tmp_path / "x.npy", tmp_path / "s.zarr", labels=tmp_path / "y.npy",
                  chunk_rows=250)


def snapshot(path):
    out = {}
    for d, _, files in os.walk(path):
        for f in files:
            p = os.path.join(d, f)
            out[os.path.relpath(p, path)] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    return out


def consolidated_shapes(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = zarr.open_group(str(path), mode="r")  # the consolidated view xarray uses
        return g["X"].shape, g["y"].shape


def test_append_grows_x_and_y_together(store):
    append(store, X[600:800], Y[600:800])
    append(store, X[800:], Y[800:])
    np.testing.assert_array_equal(open_array(store).compute(), X)
    np.testing.assert_array_equal(open_targets(f"{store}::y", 1000).rows(0, 1000), Y)
    man = read_manifest(store)
    assert man["rows"] == 1000 and man["layout"]["X"]["shape"] == [1000, 5]
    assert man["layout"]["y"]["shape"] == [1000]
    assert [a["rows"] for a in man["appends"]] == [200, 200]
    assert consolidated_shapes(store) == ((1000, 5), (1000,))
    xr = pytest.importorskip("xarray")
    ds = xr.open_zarr(store)  # consolidated: the view the user saw stale
    assert ds.sizes["sample"] == 1000
    np.testing.assert_array_equal(ds["y"].values, Y)
    assert zarr.open_group(str(store), mode="r").attrs["ingest"]["rows"] == 1000
    assert not (store / append_mod.JOURNAL_NAME).exists()


@pytest.mark.parametrize("rows, y, err, fragment", [
    (X[:10, :4], Y[:10], InputError, "its X has 5 columns"),
    (X[:10].astype(str), Y[:10], InputError, "cannot append X of dtype <U"),
    (X[:10], None, InputError, "has labels y: pass the labels"),
    (X[:10], Y[:9], InputError, "labels of shape (9,) for 10 new rows"),
    (X[:10], Y[:10] + 0.5, InputError, "cannot append y of dtype float64"),
    (np.full((10, 5), np.nan, np.float32), Y[:10], InputError, "NaN or Inf"),
])
def test_bad_appends_are_refused_and_change_nothing(store, rows, y, err, fragment):
    before = snapshot(store)
    with pytest.raises(err) as info:
        append(store, rows, y)
    assert fragment in str(info.value)
    assert snapshot(store) == before


def test_append_to_write_array_store_and_only_to_distsketch_stores(tmp_path):
    from distsketch.io import write_array

    out = write_array(X[:600], tmp_path / "f.zarr", chunk_rows=128)
    append(out, X[600:])
    np.testing.assert_array_equal(open_array(out).compute(), X)
    assert read_manifest(out)["shape"] == [1000, 5]
    foreign = tmp_path / "foreign.zarr"
    zarr.open_group(str(foreign), mode="w").create_array("X", shape=(5, 5), dtype="f4")
    with pytest.raises(StoreError, match="not a store written by `distsketch ingest`"):
        append(foreign, X[:5])


def test_failed_append_leaves_the_store_as_before(store, monkeypatch):
    before = snapshot(store)

    def broken(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(append_mod, "write_manifest", broken)
    with pytest.raises(OSError, match="disk full"):
        append(store, X[600:700], Y[600:700])
    assert snapshot(store) == before
    np.testing.assert_array_equal(open_array(store).compute(), X[:600])


def test_interrupted_append_is_refused_then_rolled_back(store, monkeypatch):
    """A writer killed after growing the arrays: readers refuse, the next append rolls back."""
    before = snapshot(store)

    class Killed(BaseException):
        pass

    def killed(*a, **k):
        raise Killed

    monkeypatch.setattr(append_mod.StoreAppender, "_undo", lambda self: None)  # no cleanup
    monkeypatch.setattr(append_mod, "consolidate", killed)
    with pytest.raises(Killed):
        append(store, X[600:700], Y[600:700])
    assert (store / append_mod.JOURNAL_NAME).exists()
    with pytest.raises(StoreError, match="append to this store is in progress or was interrupted"):
        open_array(store)
    monkeypatch.undo()
    append_mod.rollback(append_mod.resolve(store))
    assert snapshot(store) == before
    append(store, X[600:], Y[600:])
    np.testing.assert_array_equal(open_array(store).compute(), X)


def test_cli_ingest_append(store, tmp_path, capsys):
    np.save(tmp_path / "x2.npy", X[600:])
    np.save(tmp_path / "y2.npy", Y[600:])
    code = cli.main(["ingest", str(tmp_path / "x2.npy"), str(store), "--append",
                     "--labels", str(tmp_path / "y2.npy"), "--no-progress"])
    assert code == 0, capsys.readouterr().err
    assert "appended to" in capsys.readouterr().out
    np.testing.assert_array_equal(open_array(store).compute(), X)
    np.testing.assert_array_equal(open_targets(f"{store}::y", 1000).rows(0, 1000), Y)
    # the wrong width: one clear error, nothing changed
    np.save(tmp_path / "x3.npy", X[:10, :3])
    before = snapshot(store)
    code = cli.main(["ingest", str(tmp_path / "x3.npy"), str(store), "--append",
                     "--labels", str(tmp_path / "y2.npy"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "its X has 5 columns" in err
    assert snapshot(store) == before


def test_class_names_appended_keep_their_names(tmp_path, capsys):
    # codes are per file: an appended file whose first label is another class must not
    # store its codes as they are (they would name other classes)
    (tmp_path / "a.csv").write_text("T,2,8\nI,5,12\nD,4,11\nT,7,11\n")
    (tmp_path / "b.csv").write_text("N,2,1\nT,5,1\nD,0,0\n")
    store = tmp_path / "s.zarr"
    assert cli.main(["ingest", str(tmp_path / "a.csv"), str(store), "--label-column", "0"]) == 0
    assert cli.main(["ingest", str(tmp_path / "b.csv"), str(store), "--label-column", "0",
                     "--append"]) == 0
    names = ["T", "I", "D", "T", "N", "T", "D"]
    assert open_targets(f"{store}::y", 7).rows(0, 7).tolist() == names
    # the API takes names too; an unseen one extends the classes, numbers are refused
    append(store, np.zeros((2, 2), np.float32), np.array(["Q", "I"]))
    assert open_targets(f"{store}::y", 9).rows(0, 9).tolist() == [*names, "Q", "I"]
    with pytest.raises(InputError, match="stores its labels as class names"):
        append(store, np.zeros((1, 2), np.float32), np.array([1]))
    assert open_targets(f"{store}::y", 9).rows(0, 9).tolist() == [*names, "Q", "I"]


def test_append_reads_a_file_as_ingest_append_does(store, tmp_path):
    from distsketch.errors import ConfigError

    # a .npy file and its labels file, as `ingest --append --labels` reads them
    np.save(tmp_path / "x2.npy", X[600:])
    np.save(tmp_path / "y2.npy", Y[600:])
    append(store, tmp_path / "x2.npy", str(tmp_path / "y2.npy"))
    np.testing.assert_array_equal(open_array(store).compute(), X)
    np.testing.assert_array_equal(open_targets(f"{store}::y", 1000).rows(0, 1000), Y)
    last = read_manifest(store)["appends"][-1]
    assert last["rows"] == 400 and last["source"] == str(tmp_path / "x2.npy")
    # a CSV and a Parquet table with their label column by name, into a CSV-ingested store
    def csv(path, lo, hi):
        body = "\n".join(",".join([f"c{Y[i]}", *(repr(float(v)) for v in X[i])])
                         for i in range(lo, hi))
        path.write_text("kind,a,b,c,d,e\n" + body + "\n")
        return path

    names = np.array([f"c{v}" for v in Y])
    s2 = ingest(csv(tmp_path / "a.csv", 0, 300), tmp_path / "t.zarr", label_column="kind")
    append(s2, str(csv(tmp_path / "b.csv", 300, 500)), label_column="kind")
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    cols = {"kind": names[500:].tolist(), **{c: X[500:, j] for j, c in enumerate("abcde")}}
    pq.write_table(pa.table(cols), tmp_path / "c.parquet")
    append(s2, tmp_path / "c.parquet", label_column="kind")
    np.testing.assert_array_equal(open_array(s2).compute(), X)
    assert open_targets(f"{s2}::y", 1000).rows(0, 1000).tolist() == names.tolist()
    assert [a["rows"] for a in read_manifest(s2)["appends"]] == [200, 500]
    # reading options belong to a file; an in-memory y does not go with one
    before = snapshot(s2)
    with pytest.raises(ConfigError, match="label_column= apply to a file X"):
        append(s2, X[:5], names[:5], label_column="kind")
    with pytest.raises(ConfigError, match="y is a labels file"):
        append(s2, tmp_path / "c.parquet", names[500:])
    assert snapshot(s2) == before


def test_journal_left_by_a_committed_append_is_removed_not_rolled_back(store, monkeypatch):
    """Killed after the manifest was written, before the journal went: the rows stay."""
    class Killed(BaseException):
        pass

    def killed(*a, **k):
        raise Killed

    monkeypatch.setattr(append_mod, "_remove_journal", killed)
    with pytest.raises(Killed):
        append(store, X[600:700], Y[600:700])
    assert (store / append_mod.JOURNAL_NAME).exists()
    assert read_manifest(store)["rows"] == 700  # committed
    monkeypatch.undo()
    append(store, X[700:], Y[700:])
    np.testing.assert_array_equal(open_array(store).compute(), X)
    np.testing.assert_array_equal(open_targets(f"{store}::y", 1000).rows(0, 1000), Y)
    assert not [p for p in os.listdir(store) if p.startswith(".distsketch-append")]


def test_rollback_killed_while_removing_its_backups_is_finished_by_the_next(store, monkeypatch):
    """Backups go before the journal: a journal whose backups are gone was already restored."""
    before = snapshot(store)

    class Killed(BaseException):
        pass

    def killed(*a, **k):
        raise Killed

    monkeypatch.setattr(append_mod.StoreAppender, "_undo", lambda self: None)
    monkeypatch.setattr(append_mod, "consolidate", killed)
    with pytest.raises(Killed):
        append(store, X[600:700], Y[600:700])
    monkeypatch.undo()
    real_rm = append_mod.resolve(store).fs.rm_file
    removed = []

    def rm_then_die(path):  # the rollback's process dies after removing one backup
        if removed:
            raise Killed
        real_rm(path)
        removed.append(path)

    loc = append_mod.resolve(store)
    monkeypatch.setattr(loc.fs, "rm_file", rm_then_die)
    with pytest.raises(Killed):
        append_mod.rollback(loc)
    monkeypatch.undo()
    assert len(removed) == 1 and ".bak" in removed[0]
    assert (store / append_mod.JOURNAL_NAME).exists()
    assert append_mod.rollback(loc)
    assert snapshot(store) == before
