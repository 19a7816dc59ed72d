"""Stores are read as distsketch recorded them: edited metadata, hand-grown arrays and
stale consolidated views are refused; a store growing while it is read is read to one size."""

from __future__ import annotations

import json

import numpy as np
import pytest
import zarr

from distsketch.errors import StoreError
from distsketch.io import append, ingest, open_array, read_manifest, write_array


@pytest.fixture
def store(tmp_path):
    X = np.random.default_rng(0).normal(size=(1000, 6)).astype(np.float32)
    np.save(tmp_path / "x.npy", X)
    return ingest(tmp_path / "x.npy", tmp_path / "s.zarr", chunk_rows=300), X


def edit(path, change):
    meta = json.loads(path.read_text())
    change(meta)
    path.write_text(json.dumps(meta))


def test_ingest_records_the_layout(store):
    path, X = store
    rec = read_manifest(path)["layout"]["X"]
    assert rec["shape"] == [1000, 6] and rec["dtype"] == "float32" and rec["chunks"] == [300, 6]
    assert "blosc(cname=lz4)" in rec["codecs"]
    np.testing.assert_array_equal(open_array(path).compute(), X)


@pytest.mark.parametrize("change, fragment", [
    (lambda m: m.update(data_type="int32"), "dtype: recorded float32, found int32"),
    (lambda m: m.update(shape=[500, 6]), "shape: recorded (1000, 6), found (500, 6)"),
    (lambda m: m["codecs"][0]["configuration"].update(endian="big"), "codecs: recorded"),
    (lambda m: m["chunk_grid"]["configuration"].update(chunk_shape=[150, 12]), "chunks: recorded"),
])
def test_edited_metadata_is_refused(store, change, fragment):
    path, _ = store
    for meta in (path / "X" / "zarr.json", path / "zarr.json"):
        if meta.name == "zarr.json" and meta.parent == path:
            # the consolidated copy edited as well: only the manifest still knows
            def inner(m):
                change(m["consolidated_metadata"]["metadata"]["X"])
            edit(meta, inner)
        else:
            edit(meta, change)
    with pytest.raises(StoreError, match="recorded when it wrote") as err:
        open_array(path)
    assert fragment in str(err.value) and "Re-ingest" in str(err.value)
    assert str(path) in str(err.value)


def test_array_folder_opened_directly_is_checked(store):
    path, _ = store
    edit(path / "X" / "zarr.json", lambda m: m.update(data_type="int32"))
    with pytest.raises(StoreError, match="dtype: recorded float32, found int32"):
        open_array(path / "X")


def test_legacy_ingest_manifest_is_checked(store):
    path, _ = store
    edit(path / "distsketch-manifest.json", lambda m: m.pop("layout"))
    edit(path / "X" / "zarr.json", lambda m: m.update(shape=[500, 6]))
    with pytest.raises(StoreError, match=r"shape: recorded \(1000, 6\), found \(500, 6\)"):
        open_array(path)


def test_write_array_output_is_checked(tmp_path):
    out = write_array(np.ones((100, 3), np.float32), tmp_path / "f.zarr", chunk_rows=50)
    edit(out / "X" / "zarr.json", lambda m: m.update(data_type="int32"))
    with pytest.raises(StoreError, match="dtype: recorded float32, found int32"):
        open_array(out)


def test_stale_consolidated_view_of_a_foreign_store_is_refused(tmp_path):
    """A store distsketch did not write, grown through zarr's consolidated (stale) view."""
    path = tmp_path / "foreign.zarr"
    g = zarr.open_group(str(path), mode="w")
    g.create_array("X", shape=(120, 4), chunks=(500, 4), dtype="float32")[...] = 1.0
    zarr.consolidate_metadata(str(path))
    g = zarr.open_group(str(path))
    g["X"].resize((160, 4))
    g["X"][120:] = 2.0  # written through the stale view: nothing arrives
    with pytest.raises(StoreError, match=r"\(160, 4\) in its own metadata but \(120, 4\) in the "
                                         r"group's consolidated metadata") as err:
        open_array(path)
    assert "rows 120..160 may hold fill values" in str(err.value)
    zarr.consolidate_metadata(str(path))  # what the message says to do once rows are written
    assert open_array(path).shape == (160, 4)


def test_store_growing_while_read_is_read_to_the_opened_size(store):
    """The planner re-reads a store with smaller blocks: the rows appended meanwhile stay out."""
    from distsketch.graph import plan_rows

    path, X = store
    A = open_array(path)
    append(path, np.zeros((700, 6), np.float32))
    blocks = plan_rows(A, block_rows=300)
    assert blocks.data.shape == (1000, 6)
    np.testing.assert_array_equal(blocks.data.compute(), X)


def test_store_shrinking_while_read_is_refused(store):
    path, _ = store
    A = open_array(path, block_rows=300)
    zarr.open_array(str(path / "X"), mode="r+").resize((600, 6))
    with pytest.raises(StoreError, match=r"rows (600\.\.900|900\.\.1000) are gone \(the array now has 600 "
                                         r"rows, 1000 when it was opened\)"):
        A.compute()


def test_consolidated_dtype_that_disagrees_is_refused(tmp_path):
    path = tmp_path / "foreign.zarr"
    g = zarr.open_group(str(path), mode="w")
    g.create_array("X", shape=(10, 2), chunks=(10, 2), dtype="float32")[...] = 1.0
    zarr.consolidate_metadata(str(path))
    edit(path / "X" / "zarr.json", lambda m: m.update(data_type="int32"))
    with pytest.raises(StoreError, match="dtype int32 in its own metadata but float32 in the "
                                         "group's consolidated metadata"):
        open_array(path)
