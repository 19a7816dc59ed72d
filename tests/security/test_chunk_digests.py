"""What CRC-32C alone does not bind: a chunk's position, and the metadata it is read with.

Every chunk distsketch writes carries a CRC-32C of its own bytes, so a flipped
bit is caught; but two chunks swapped, one chunk copied over another, a model
array replaced by another model's, reversed class names or a flipped byte order
all decode cleanly.  The manifest's digests (distsketch.io.commit.digests) bind each
chunk to its grid position and each array to its metadata: each case here is
one StoreError naming the store, the array and the chunk (grid index, rows),
saying that the store changed, and what to do.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from distsketch import RandomFourierFeatures, SketchedKernelRidgeClassifier
from distsketch.errors import StoreError
from distsketch.io import append, ingest, load, open_array, read_manifest, write_array
from distsketch.io.arrays.targets import open_targets
from distsketch.io.commit.manifest import MANIFEST_NAME

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

RNG = np.random.default_rng(11)
X = RNG.normal(size=(400, 4)).astype(np.float32)
LABELS = np.where(X[:, 0] > 0, "pos", "neg")


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != ".lock"}


def refused(call, *needles: str) -> str:
    with pytest.raises(StoreError) as exc:
        call()
    msg = str(exc.value)
    for needle in needles:
        assert needle in msg, (needle, msg)
    return msg


def swap(a: Path, b: Path) -> None:
    body_a, body_b = a.read_bytes(), b.read_bytes()
    assert body_a != body_b
    a.write_bytes(body_b)
    b.write_bytes(body_a)


def edit_json(path: Path, change) -> None:
    body = json.loads(path.read_text())
    change(body)
    path.write_text(json.dumps(body))


def chunk(store: Path, name: str, i: int) -> Path:
    return store / name / "c" / str(i) / "0"


@pytest.fixture
def labelled(tmp_path) -> Path:
    """An ingested store: X (4 chunks of 100 rows, no compression: all the same size) and
    class names y (codes with the names in the 'classes' attribute)."""
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", LABELS)
    return ingest(tmp_path / "x.npy", tmp_path / "in.zarr", labels=tmp_path / "y.npy",
                  chunk_rows=100, compressor=None)


def rff(path: Path, seed: int) -> Path:
    return RandomFourierFeatures(n_components=8, random_state=seed).fit(X).save(path)


# --- chunks at the wrong position --------------------------------------------------------------

def test_two_same_size_chunks_swapped_refuse_the_fit(labelled):
    a, b = chunk(labelled, "X", 1), chunk(labelled, "X", 2)
    assert a.stat().st_size == b.stat().st_size  # each still passes its own CRC-32C
    swap(a, b)
    before = snapshot(labelled)
    msg = refused(lambda: RandomFourierFeatures(n_components=8, random_state=0).fit(
        str(labelled)), str(labelled), "::X", "changed or was damaged", "re-ingest")
    assert "chunk (1, 0) (rows 100..200)" in msg or "chunk (2, 0) (rows 200..300)" in msg
    assert snapshot(labelled) == before  # refused, nothing written or repaired


def test_a_chunk_copied_over_another_is_refused(labelled):
    shutil.copyfile(chunk(labelled, "X", 0), chunk(labelled, "X", 3))
    refused(open_array(labelled).compute, "chunk (3, 0) (rows 300..400)",
            f"{labelled}::X", "moved, copied over", "changed or was damaged", "re-ingest")


def test_swapped_label_chunks_are_refused(labelled):
    # 1-D codes: same-size chunks (no compression), each passing its own CRC-32C
    swap(labelled / "y" / "c" / "0", labelled / "y" / "c" / "1")
    msg = refused(lambda: open_targets(f"{labelled}::y", 400).rows(0, 400),
                  f"{labelled}::y", "changed or was damaged")
    assert "chunk (0,) (rows 0..100)" in msg or "chunk (1,) (rows 100..200)" in msg


def test_write_array_outputs_bind_their_chunks(tmp_path):
    out = write_array(X, tmp_path / "Z.zarr", chunk_rows=100, compressor=None)
    swap(chunk(out, "X", 0), chunk(out, "X", 2))
    msg = refused(open_array(out).compute, f"{out}::X", "rerun the command")
    assert "chunk (0, 0) (rows 0..100)" in msg or "chunk (2, 0) (rows 200..300)" in msg


# --- metadata read with the chunks -------------------------------------------------------------

def test_reversed_class_names_refuse_the_classifier(labelled):
    edit_json(labelled / "y" / "zarr.json",
              lambda m: m["attributes"].update(classes=m["attributes"]["classes"][::-1]))
    before = snapshot(labelled)
    refused(lambda: SketchedKernelRidgeClassifier(random_state=0).fit(
        str(labelled), f"{labelled}::y"), f"{labelled}::y", "'classes'", "changed or was damaged",
        "re-ingest")
    refused(lambda: open_targets(f"{labelled}::y", 400), f"{labelled}::y", "metadata")
    assert snapshot(labelled) == before


def test_edited_feature_names_are_refused(labelled):
    # attributes other than 'classes' are bound too
    edit_json(labelled / "X" / "zarr.json", lambda m: m["attributes"].update(units="cm"))
    refused(lambda: open_array(labelled), f"{labelled}::X", "metadata", "changed or was damaged")


# --- models ------------------------------------------------------------------------------------

def test_model_array_replaced_by_another_models_is_refused(tmp_path):
    a, b = rff(tmp_path / "a.zarr", 1), rff(tmp_path / "b.zarr", 2)
    folder = a / "state" / "random_weights_"
    shutil.rmtree(folder)
    shutil.copytree(b / "state" / "random_weights_", folder)  # same shape, dtype, codecs
    before = snapshot(a)
    refused(lambda: load(a), str(a), "state/random_weights_", "chunk (0, 0)",
            "model store changed or was damaged", "Re-save the model")
    assert snapshot(a) == before


def test_model_array_with_its_byte_order_edited_says_the_store_changed(tmp_path):
    a = rff(tmp_path / "a.zarr", 1)

    def big_endian(meta: dict) -> None:
        for codec in meta["codecs"]:
            if codec["name"] == "bytes":
                codec["configuration"]["endian"] = "big"

    edit_json(a / "state" / "random_weights_" / "zarr.json", big_endian)
    msg = refused(lambda: load(a), str(a), "state/random_weights_", "byte order",
                  "model store changed or was damaged", "Re-save the model")
    assert "NaN" not in msg and "Scale the input" not in msg


def test_model_class_names_reversed_are_refused(tmp_path):
    clf = SketchedKernelRidgeClassifier(random_state=0).fit(X, LABELS)
    path = clf.save(tmp_path / "m.zarr")
    found = []

    def reverse(node):
        if isinstance(node, dict):
            if "__strings__" in node:
                node["__strings__"] = node["__strings__"][::-1]
                found.append(node)
            for value in node.values():
                reverse(value)
        elif isinstance(node, list):
            for value in node:
                reverse(value)

    edit_json(path / "zarr.json", reverse)
    assert found
    refused(lambda: load(path), str(path), "attributes of group (root)", "class names",
            "Re-save the model")


def test_model_digest_entry_removed_is_refused_not_skipped(tmp_path):
    a, b = rff(tmp_path / "a.zarr", 1), rff(tmp_path / "b.zarr", 2)
    shutil.copyfile(b / "state" / "random_weights_" / "c" / "0" / "0",
                    a / "state" / "random_weights_" / "c" / "0" / "0")
    edit_json(a / MANIFEST_NAME, lambda m: m["digests"]["arrays"].pop("state/random_weights_"))
    refused(lambda: load(a), "state/random_weights_", "records no digest", "Re-save the model")


# --- no downgrade by removing one entry; stores written before the digests ---------------------

def test_removing_one_arrays_digest_is_refused(labelled):
    swap(chunk(labelled, "X", 1), chunk(labelled, "X", 2))
    edit_json(labelled / MANIFEST_NAME, lambda m: m["layout"]["X"].pop("digest"))
    refused(lambda: open_array(labelled), f"{labelled}::X", "none for X",
            "changed or was damaged")


def test_an_incomplete_digest_entry_is_refused(labelled):
    edit_json(labelled / MANIFEST_NAME, lambda m: m["layout"]["y"]["digest"].pop("crc32c"))
    refused(lambda: open_targets(f"{labelled}::y", 400), f"{labelled}::y",
            "an incomplete one for y")


def test_store_written_before_the_digests_still_reads(labelled):
    # the previous manifest layout: layout records without digests
    edit_json(labelled / MANIFEST_NAME,
              lambda m: [rec.pop("digest") for rec in m["layout"].values()])
    np.testing.assert_array_equal(open_array(labelled).compute(), X)
    assert open_targets(f"{labelled}::y", 400).rows(0, 400).tolist() == LABELS.tolist()
    # as before the digests, a chunk's position is then not bound (docs/security.md, 6.)
    swap(chunk(labelled, "X", 1), chunk(labelled, "X", 2))
    assert open_array(labelled).compute().shape == X.shape


def test_model_saved_before_the_digests_still_loads(tmp_path):
    a = rff(tmp_path / "a.zarr", 1)
    edit_json(a / MANIFEST_NAME, lambda m: m.pop("digests"))
    np.testing.assert_array_equal(load(a).transform(X), load(rff(tmp_path / "b.zarr", 1))
                                  .transform(X))


# --- appends keep the digests ------------------------------------------------------------------

def test_append_then_read_verifies(labelled):
    more = RNG.normal(size=(150, 4)).astype(np.float32)
    more_labels = np.where(more[:, 0] > 0, "pos", "new")
    append(labelled, more, more_labels)
    np.testing.assert_array_equal(open_array(labelled).compute(), np.vstack([X, more]))
    assert open_targets(f"{labelled}::y", 550).rows(0, 550).tolist() == \
        [*LABELS.tolist(), *more_labels.tolist()]
    layout = read_manifest(labelled)["layout"]
    assert len(layout["X"]["digest"]["crc32c"]) == 8 * 6  # 6 chunks of 100 rows
    SketchedKernelRidgeClassifier(random_state=0).fit(str(labelled), f"{labelled}::y")
    # the chunks the append wrote are bound too
    shutil.copyfile(chunk(labelled, "X", 0), chunk(labelled, "X", 5))
    refused(open_array(labelled).compute, "chunk (5, 0) (rows 500..550)")


def test_a_swap_before_an_append_stays_detected(labelled):
    swap(chunk(labelled, "X", 0), chunk(labelled, "X", 1))
    append(labelled, X[:50], LABELS[:50])
    msg = refused(open_array(labelled).compute, f"{labelled}::X", "changed or was damaged")
    assert "chunk (0, 0) (rows 0..100)" in msg or "chunk (1, 0) (rows 100..200)" in msg


def test_a_reader_opened_before_an_append_still_reads(tmp_path):
    # 350 rows: the last chunk is partly filled, and the append rewrites it
    np.save(tmp_path / "x.npy", X[:350])
    store = ingest(tmp_path / "x.npy", tmp_path / "s.zarr", chunk_rows=100)
    A = open_array(store, block_rows=100)
    append(store, X[350:])
    # the manifest now binds the rewritten chunk 3 and the new one; the reader, which took
    # the digests before, finds the rewritten chunk recorded there and reads its 350 rows
    assert len(read_manifest(store)["layout"]["X"]["digest"]["crc32c"]) == 8 * 4
    np.testing.assert_array_equal(A.compute(), X[:350])


# --- object stores -----------------------------------------------------------------------------

def test_swapped_chunks_on_s3_are_refused(s3):
    url = s3.url("Z.zarr")
    write_array(X, url, chunk_rows=100, compressor=None, storage_options=s3.storage_options)
    np.testing.assert_array_equal(open_array(url, storage_options=s3.storage_options).compute(),
                                  X)
    base = url[len("s3://"):]
    a, b = f"{base}/X/c/1/0", f"{base}/X/c/3/0"
    body_a, body_b = s3.fs.cat_file(a), s3.fs.cat_file(b)
    s3.fs.pipe_file(a, body_b)
    s3.fs.pipe_file(b, body_a)
    s3.fs.invalidate_cache()
    refused(open_array(url, storage_options=s3.storage_options).compute, url,
            "changed or was damaged")


# --- second pass: entries edited, chunks lost, metadata no digest covers -----------------------

def test_chunk_digests_set_to_null_are_refused(labelled):
    # crc32c: null is what an array without chunk CRCs records; X's chunks each end with one
    swap(chunk(labelled, "X", 1), chunk(labelled, "X", 2))
    edit_json(labelled / MANIFEST_NAME, lambda m: m["layout"]["X"]["digest"].update(crc32c=None))
    before = snapshot(labelled)
    refused(lambda: RandomFourierFeatures(n_components=8, random_state=0).fit(str(labelled)),
            f"{labelled}::X", "no chunk digests (crc32c: null) for X", "changed or was damaged",
            "re-ingest")
    assert snapshot(labelled) == before


@pytest.mark.parametrize("chunks", [2, 5])
def test_a_wrong_number_of_chunk_digests_is_refused_at_open(labelled, chunks):
    # 2: the digests of chunks 2 and 3 cut off; 5: one more than X has
    def resize(m):
        crcs = m["layout"]["X"]["digest"]["crc32c"]
        m["layout"]["X"]["digest"]["crc32c"] = (crcs * 2)[:8 * chunks]

    edit_json(labelled / MANIFEST_NAME, resize)
    refused(lambda: open_array(labelled), f"{labelled}::X",
            f"records {chunks} chunk digests for X, which has 4 chunks", "changed or was damaged")


def test_an_array_dropped_from_the_manifest_is_refused(labelled):
    # its layout record and its name in "arrays" removed: still an array of a store that
    # records digests for its arrays, so it needs one
    swap(chunk(labelled, "X", 1), chunk(labelled, "X", 2))

    def drop(m):
        m["layout"].pop("X")
        m["arrays"].remove("X")

    edit_json(labelled / MANIFEST_NAME, drop)
    refused(lambda: open_array(labelled), f"{labelled}::X", "records digests for the arrays",
            "none for X", "changed or was damaged")


def test_a_manifest_planted_in_an_array_folder_does_not_hide_its_record(labelled):
    # the array opened by its own folder: the group's manifest records it, whatever the folder
    # holds beside its chunks
    swap(chunk(labelled, "X", 1), chunk(labelled, "X", 2))
    (labelled / "X" / MANIFEST_NAME).write_text(json.dumps({"kind": "array"}))
    msg = refused(open_array(str(labelled / "X")).compute, f"{labelled}/X",
                  "changed or was damaged")
    assert "chunk (1, 0) (rows 100..200)" in msg or "chunk (2, 0) (rows 200..300)" in msg


def test_a_deleted_label_chunk_is_refused_not_read_as_the_fill_value(labelled):
    # Zarr reads an absent chunk as the fill value: code 0, the class 'neg'
    (labelled / "y" / "c" / "2").unlink()
    before = snapshot(labelled)
    for read in (lambda: open_targets(f"{labelled}::y", 400).rows(0, 400),
                 open_array(f"{labelled}::y", targets=True).compute):
        refused(read, f"{labelled}::y", "chunk (2,) (rows 200..300)", "missing",
                "fill value", "re-ingest")
    refused(lambda: SketchedKernelRidgeClassifier(random_state=0).fit(
        str(labelled), f"{labelled}::y"), "chunk (2,) (rows 200..300)", "missing")
    assert snapshot(labelled) == before


def test_a_chunk_deleted_after_the_input_was_opened_is_refused(labelled):
    A = open_array(labelled)  # every chunk present here
    chunk(labelled, "X", 3).unlink()
    refused(A.compute, f"{labelled}::X", "chunk (3, 0) (rows 300..400)", "missing",
            "fill value")


def test_a_chunk_deleted_on_s3_after_open_is_refused(s3):
    url = s3.url() + "/Z.zarr"  # a fresh prefix: the bucket lives for the session
    write_array(X, url, chunk_rows=100, compressor=None, storage_options=s3.storage_options)
    A = open_array(url, storage_options=s3.storage_options)
    s3.fs.rm_file(f"{url[len('s3://'):]}/X/c/2/0")
    refused(A.compute, url, "chunk (2, 0) (rows 200..300)", "missing", "fill value")


def test_the_targets_rows_message_reads_once(labelled):
    swap(labelled / "y" / "c" / "0", labelled / "y" / "c" / "1")
    msg = refused(lambda: open_targets(f"{labelled}::y", 400).rows(0, 400),
                  f"cannot read rows 0..400 of the targets {labelled}::y: cannot read chunk")
    assert ".." not in msg.replace("0..", "").replace("00..", "")  # row ranges only
    assert "StoreError:" not in msg and msg.count("re-ingest") == 1


def _big_endian_copy_in(group: Path) -> int:
    """Consolidated metadata edited into ``group``: its arrays' metadata, big-endian."""
    members = {}
    for folder in sorted(p for p in group.iterdir() if (p / "zarr.json").is_file()):
        meta = json.loads((folder / "zarr.json").read_text())
        for codec in meta.get("codecs", ()):
            if codec["name"] == "bytes":
                codec["configuration"]["endian"] = "big"
        members[folder.name] = meta
    edit_json(group / "zarr.json", lambda m: m.update(consolidated_metadata={
        "kind": "inline", "must_understand": False, "metadata": members}))
    return sum(m["node_type"] == "array" for m in members.values())


@pytest.mark.parametrize("group", ["state", "state/features_/state"])
def test_consolidated_metadata_edited_into_a_model_group_is_not_read(tmp_path, group):
    # the copy is not digested (it repeats the members' metadata); the loader reads every
    # group from its own zarr.json, as the digests do, so the edit changes nothing read
    clf = SketchedKernelRidgeClassifier(random_state=0).fit(X, LABELS)
    path = clf.save(tmp_path / "m.zarr")
    assert _big_endian_copy_in(path / group) >= 2
    before = snapshot(path)
    loaded = load(path)
    np.testing.assert_array_equal(loaded.decision_function(X), clf.decision_function(X))
    np.testing.assert_array_equal(loaded.features_.random_weights_, clf.features_.random_weights_)
    assert snapshot(path) == before

