"""Stores are read inside themselves, and what distsketch wrote it can verify.

Each case damages a model, a workflow checkpoint, an input or an output as an
attacker or a broken disk would: a symbolic link out of the store, an edited
``format``, a flipped byte.  Each is one ``StoreError`` naming the path (the
link, the array and chunk) and the fix, never data read from elsewhere, zeros
or a different model.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import zarr

import distsketch
from distsketch import RandomFourierFeatures, StreamingKernelPCA
from distsketch.errors import StoreError
from distsketch.io import ingest, load, open_array, read_manifest, write_array
from distsketch.io.model.store import FORMAT_VERSION
from distsketch.io.storage.codecs import codecs, has_checksum
from distsketch.workflow import run_workflow

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

X = np.random.default_rng(7).normal(size=(300, 4))


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != ".lock"}


def skpca(path: Path, seed: int) -> Path:
    return StreamingKernelPCA(n_components=3, n_random_features=16, sketch_size=8,
                              random_state=seed).fit(X).save(path)


def flip_byte(chunk: Path) -> None:
    """Flip one bit in the middle of a chunk file (as a bad disk would)."""
    body = bytearray(chunk.read_bytes())
    body[len(body) // 2] ^= 0x10
    chunk.write_bytes(bytes(body))


def set_format(model: Path, fmt) -> None:
    meta = model / "zarr.json"
    body = json.loads(meta.read_text())
    if fmt is None:
        del body["attributes"]["format"]
    else:
        body["attributes"]["format"] = fmt
    meta.write_text(json.dumps(body))


def refused(call, *needles: str) -> str:
    with pytest.raises(StoreError) as exc:
        call()
    msg = str(exc.value)
    for needle in needles:
        assert needle in msg, (needle, msg)
    return msg


@pytest.fixture
def two_models(tmp_path) -> tuple[Path, Path]:
    return skpca(tmp_path / "a.zarr", 1), skpca(tmp_path / "b.zarr", 2)


# --- symbolic links inside a store ----------------------------------------------------------

def test_model_chunk_linked_to_another_store_is_refused(two_models):
    a, b = two_models
    chunk = a / "state" / "components_" / "c" / "0" / "0"
    chunk.unlink()
    chunk.symlink_to(b / "state" / "components_" / "c" / "0" / "0")
    before = snapshot(a)
    refused(lambda: load(a), "symbolic link", str(chunk), "cp -rL")
    assert snapshot(a) == before


def test_model_array_folder_linked_to_another_store_is_refused(two_models):
    a, b = two_models
    folder = a / "state" / "components_"
    shutil.rmtree(folder)
    folder.symlink_to(b / "state" / "components_", target_is_directory=True)
    refused(lambda: load(a), "symbolic link", str(folder))


def test_model_whose_root_is_a_link_loads(two_models, tmp_path):
    # the root is the path the user named; only links inside a store are refused
    a, _ = two_models
    (tmp_path / "alias.zarr").symlink_to(a, target_is_directory=True)
    np.testing.assert_array_equal(load(tmp_path / "alias.zarr").components_,
                                  load(a).components_)


def test_fifo_inside_a_model_is_refused_without_opening_it(two_models):
    a, _ = two_models
    fifo = a / "state" / "components_" / "c" / "0" / "0"
    fifo.unlink()
    os.mkfifo(fifo)
    refused(lambda: load(a), str(fifo), "not a regular file")


@pytest.fixture
def input_store(tmp_path) -> Path:
    p = tmp_path / "in.zarr"
    arr = zarr.create_array(store=str(p), shape=(300, 4), dtype="f8", chunks=(100, 4),
                            compressors=None)
    arr[...] = X
    return p


def test_input_chunk_linked_to_an_outside_file_is_refused(input_store, tmp_path):
    secret = tmp_path / "key.bin"
    secret.write_bytes(os.urandom(100 * 4 * 8))  # exactly one raw chunk's size
    chunk = input_store / "c" / "1" / "0"
    chunk.unlink()
    chunk.symlink_to(secret)
    refused(lambda: open_array(input_store), "Zarr store", str(chunk), "symbolic link")
    refused(lambda: open_array(f"{input_store}::X"), str(chunk))


def test_input_chunk_linked_from_another_store_is_refused(input_store, tmp_path):
    other = tmp_path / "other.zarr"
    shutil.copytree(input_store, other)
    zarr.open_array(str(other), mode="r+")[100:200] = 0.0
    chunk = input_store / "c" / "1" / "0"
    chunk.unlink()
    chunk.symlink_to(other / "c" / "1" / "0")
    refused(lambda: open_array(input_store), str(chunk))


def test_input_in_a_group_with_a_linked_array_folder_is_refused(tmp_path):
    src = write_array(X, tmp_path / "src.zarr")
    group = write_array(X, tmp_path / "g.zarr")
    shutil.rmtree(group / "X")
    (group / "X").symlink_to(src / "X", target_is_directory=True)
    refused(lambda: open_array(f"{group}::X"), str(group / "X"))


# --- workflow checkpoints -------------------------------------------------------------------

def workflow(tmp_path: Path, out: str, seed: int) -> dict:
    store = tmp_path / "X.zarr"
    if not store.exists():
        arr = zarr.create_array(store=str(store), shape=(200, 4), dtype=X.dtype, chunks=(100, 4))
        arr[...] = X[:200]
    return {"input": str(store), "segment_rows": 100, "cluster": "sync", "seed": seed,
            "method": {"name": "StreamingKernelPCA",
                       "params": {"n_random_features": 16, "n_components": 2, "sketch_size": 8}},
            "outputs": {"dir": str(tmp_path / out)},
            "report": {"kernel_error": False, "png": False}}


def quiet(msg: str) -> None:
    pass


@pytest.fixture
def checkpoint(tmp_path) -> tuple[dict, Path, Path]:
    """A committed run over 200 rows (and another run's state), then 100 rows appended."""
    cfg, other = workflow(tmp_path, "out", 1), workflow(tmp_path, "other", 2)
    run_workflow(cfg, log=quiet)
    run_workflow(other, log=quiet)
    arr = zarr.open_array(str(tmp_path / "X.zarr"), mode="r+")
    arr.resize((300, 4))
    arr[200:] = X[200:]
    summary = tmp_path / "out" / "state" / "summary" / "model.zarr"
    return cfg, summary, tmp_path / "other" / "state" / "summary" / "model.zarr"


def resume_refused(cfg: dict, *needles: str) -> None:
    out = Path(cfg["outputs"]["dir"])
    before = snapshot(out)
    msg = refused(lambda: run_workflow(cfg, log=quiet), *needles)
    assert "--full" in msg
    assert snapshot(out) == before
    res = run_workflow(cfg, full=True, log=quiet)
    assert res.status == "full" and res.rows_after == 300


def test_checkpoint_array_linked_to_another_runs_state_is_refused(checkpoint):
    cfg, summary, other = checkpoint
    folder = summary / "state" / "sketch_"
    shutil.rmtree(folder)
    folder.symlink_to(other / "state" / "sketch_", target_is_directory=True)
    resume_refused(cfg, "symbolic link", str(folder))


def test_checkpoint_summary_folder_linked_to_another_run_is_refused(checkpoint):
    cfg, summary, other = checkpoint
    shutil.rmtree(summary.parent)
    summary.parent.symlink_to(other.parent, target_is_directory=True)
    resume_refused(cfg, "symbolic link", str(summary.parent))


# --- a recorded format cannot be lowered to skip checks -------------------------------------

@pytest.mark.parametrize("fmt", [1, 2, -5, None])
def test_model_format_edited_down_with_a_lost_chunk_is_refused(two_models, fmt):
    a, _ = two_models
    (a / "state" / "components_" / "c" / "0" / "0").unlink()
    set_format(a, fmt)
    refused(lambda: load(a), f"format {1 if fmt is None else fmt}", "older",
            f"format {FORMAT_VERSION}", "Re-fit")


@pytest.mark.parametrize("fmt", [1, -5])
def test_checkpoint_format_edited_down_with_a_lost_chunk_is_refused(checkpoint, fmt):
    cfg, summary, _ = checkpoint
    (summary / "state" / "sketch_" / "c" / "0" / "0").unlink()
    set_format(summary, fmt)
    resume_refused(cfg, f"format {fmt}", "older")


@pytest.mark.parametrize("fmt", ["3", 3.0, True, [3]])
def test_model_format_that_is_not_an_integer_is_refused(two_models, fmt):
    a, _ = two_models
    set_format(a, fmt)
    refused(lambda: load(a), "not an integer")


def test_model_array_without_its_checksum_codec_is_refused(two_models):
    # an edit that drops the checksum from an array's codecs does not turn it off
    a, _ = two_models
    meta = a / "state" / "components_" / "zarr.json"
    body = json.loads(meta.read_text())
    body["codecs"] = [c for c in body["codecs"] if c["name"] != "crc32c"]
    meta.write_text(json.dumps(body))
    refused(lambda: load(a), "components_", "no crc32c checksum")


# --- a flipped byte -------------------------------------------------------------------------

def test_flipped_byte_in_a_model_chunk_names_array_and_chunk(two_models):
    a, _ = two_models
    flip_byte(a / "state" / "components_" / "c" / "0" / "0")
    refused(lambda: load(a), "components_", "chunk (0, 0)", "checksum does not match")


def test_flipped_byte_in_a_checkpoint_chunk_is_refused(checkpoint):
    cfg, summary, _ = checkpoint
    flip_byte(summary / "state" / "sketch_" / "c" / "0" / "0")
    resume_refused(cfg, "sketch_", "chunk (0, 0)", "checksum does not match")


@pytest.mark.parametrize("compressor", ["lz4", "zstd", None])
def test_flipped_byte_in_an_output_chunk_names_the_chunk(tmp_path, compressor):
    out = write_array(X, tmp_path / "Z.zarr", chunk_rows=100, compressor=compressor)
    flip_byte(out / "X" / "c" / "1" / "0")
    Z = open_array(out)
    refused(Z.compute, "chunk (1, 0) (rows 100..200)", "checksum does not match")


def test_every_writer_puts_a_checksum_on_every_array(tmp_path):
    model = RandomFourierFeatures(n_components=4, random_state=0).fit(X).save(tmp_path / "m.zarr")
    group = zarr.open_group(str(model), mode="r")
    arrays = [arr for _, arr in group.arrays()] + [arr for _, arr in group["state"].arrays()]
    assert len(arrays) >= 2 and all(has_checksum(arr) for arr in arrays)
    out = write_array(X, tmp_path / "Z.zarr", compressor="zstd")
    assert has_checksum(zarr.open_array(str(out), path="X"))
    np.save(tmp_path / "x.npy", X)
    ingested = ingest(tmp_path / "x.npy", tmp_path / "in.zarr")
    assert has_checksum(zarr.open_array(str(ingested), path="X"))
    assert read_manifest(ingested) is not None
    assert all(codec.to_dict()["name"] == "crc32c" for codec in
               (codecs(c)[-1] for c in ("lz4", "zstd", None)))


def test_checksummed_model_round_trips_bitwise(tmp_path):
    model = distsketch.RandomFourierFeatures(n_components=8, random_state=3).fit(X)
    back = load(model.save(tmp_path / "m.zarr"))
    np.testing.assert_array_equal(back.random_weights_, model.random_weights_)
    np.testing.assert_array_equal(back.transform(X), model.transform(X))


def test_a_hard_linked_part_file_in_a_store_is_replaced_not_written_through(tmp_path):
    # the manifest is written beside as NAME.part, then renamed; a .part planted as a hard link
    # to a file outside the store would have that file overwritten by an append's manifest
    np.save(tmp_path / "x.npy", X[:200])
    store = ingest(tmp_path / "x.npy", tmp_path / "s.zarr", chunk_rows=100)
    victim = tmp_path / "victim.txt"
    victim.write_text("someone else's file\n")
    os.link(victim, store / "distsketch-manifest.json.part")
    distsketch.io.append(store, X[200:])
    assert victim.read_text() == "someone else's file\n"
    assert read_manifest(store)["layout"]["X"]["shape"] == [300, 4]
    assert not (store / "distsketch-manifest.json.part").exists()
    np.testing.assert_array_equal(open_array(store).compute(), X.astype(np.float32))
