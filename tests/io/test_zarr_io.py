"""open_array validation, atomic writes, and model save/load round trips."""

from __future__ import annotations

from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import zarr

import distsketch
from distsketch import RandomFourierFeatures, StreamingKernelPCA
from distsketch.errors import InputError, StoreError
from distsketch.io import atomic_dir, load, open_array, read_manifest, save_model, write_array

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _siblings(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith(f".{path.name}."))


@pytest.fixture
def store(tmp_path) -> tuple[Path, np.ndarray]:
    A = np.random.default_rng(0).normal(size=(100, 6)).astype(np.float32)
    path = write_array(A, tmp_path / "a.zarr", chunk_rows=10)
    return path, A


# ------------------------------------------------------------------ open_array


def test_open_array_reads_store_group_and_memory(tmp_path, store):
    path, A = store
    X = open_array(str(path))
    assert isinstance(X, da.Array) and X.shape == A.shape and X.dtype == np.float32
    np.testing.assert_array_equal(X.compute(), A)
    np.testing.assert_array_equal(open_array(path, block_rows=7).compute(), A)
    assert open_array(path, block_rows=30).chunks[0][0] == 30
    # a group: "X" is picked, other arrays by name
    g = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    g.create_array("X", data=A)
    g.create_array("other", data=A[:, :2] * 2)
    np.testing.assert_array_equal(open_array(str(tmp_path / "g.zarr")).compute(), A)
    np.testing.assert_array_equal(open_array(f"{tmp_path / 'g.zarr'}::other").compute(), A[:, :2] * 2)
    # in-memory inputs become dask arrays of the same values
    np.testing.assert_array_equal(open_array(A).compute(), A)
    np.testing.assert_array_equal(open_array(da.from_array(A, chunks=9)).compute(), A)


def test_open_array_group_without_default_names_members(tmp_path):
    g = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    g.create_array("a", data=np.ones((3, 2)))
    g.create_array("b", data=np.ones((3, 2)))
    with pytest.raises(StoreError, match=r"\['a', 'b'\]"):
        open_array(str(tmp_path / "g.zarr"))


@pytest.mark.parametrize(("make", "cls", "fragment"), [
    (lambda p: None, StoreError, "does not exist"),
    (lambda p: (p.mkdir(), (p / "zarr.json").write_text("{not json")), StoreError, "corrupt"),
    (lambda p: zarr.create_array(str(p), shape=(4, 3, 2), dtype="f4"), InputError, "2-D"),
    (lambda p: zarr.create_array(str(p), shape=(5,), dtype="f4"), InputError, "2-D"),
    (lambda p: zarr.create_array(str(p), shape=(4, 3), dtype="c8"), InputError, "not real numeric"),
    (lambda p: zarr.create_array(str(p), shape=(0, 3), dtype="f4"), InputError, "0 rows"),
], ids=["missing", "corrupt-metadata", "3-D", "1-D", "complex", "zero-rows"])
def test_open_array_rejects(tmp_path, make, cls, fragment):
    p = tmp_path / "bad.zarr"
    make(p)
    with pytest.raises(cls, match=fragment) as info:
        open_array(str(p))
    assert "bad.zarr" in str(info.value)


def test_open_array_missing_chunk_is_an_error(store):
    path, _ = store
    (path / "c" / "3" / "0").unlink()
    with pytest.raises(StoreError, match=r"missing chunk.*\(3, 0\)"):
        open_array(str(path))


def test_corrupt_chunk_names_rows(store):
    path, _ = store
    (path / "c" / "4" / "0").write_bytes(b"garbage" * 5)
    X = open_array(str(path), block_rows=10)
    with pytest.raises(StoreError, match=r"rows 40\.\.50.*a\.zarr"):
        X.compute(scheduler="sync")


# ------------------------------------------------------------------ atomic writes


class _Boom:
    def __call__(self, block, block_info=None):
        if block_info[None]["array-location"][0][0] >= 60:
            raise RuntimeError("disk on fire")
        return block


def test_failed_write_leaves_nothing(tmp_path):
    A = da.from_array(np.ones((100, 4), np.float32), chunks=(20, 4))
    bad = A.map_blocks(_Boom(), dtype=A.dtype)
    out = tmp_path / "out.zarr"
    with pytest.raises(RuntimeError, match="disk on fire"):
        write_array(bad, out, chunk_rows=20)
    assert not out.exists() and _siblings(out) == []


def test_failed_overwrite_keeps_old_output(tmp_path, store):
    path, A = store
    bad = da.from_array(np.zeros((100, 6), np.float32), chunks=(20, 6)).map_blocks(
        _Boom(), dtype=np.float32)
    with pytest.raises(StoreError, match="already exists"):
        write_array(np.zeros((3, 6)), path)
    with pytest.raises(RuntimeError):
        write_array(bad, path, overwrite=True, chunk_rows=20)
    np.testing.assert_array_equal(open_array(str(path)).compute(), A)
    assert _siblings(path) == []
    write_array(np.zeros((3, 6), np.float32), path, overwrite=True)
    assert open_array(str(path)).shape == (3, 6) and _siblings(path) == []


def test_atomic_dir_commits_only_on_success(tmp_path):
    target = tmp_path / "d"
    with pytest.raises(KeyError):
        with atomic_dir(target) as tmp:
            (tmp / "f").write_text("x")
            raise KeyError("stop")
    assert not target.exists() and _siblings(target) == []
    with atomic_dir(target) as tmp:
        (tmp / "f").write_text("x")
    assert (target / "f").read_text() == "x" and _siblings(target) == []


def test_write_array_manifest(tmp_path):
    A = np.arange(12, dtype=np.float64).reshape(6, 2)
    p = write_array(A, tmp_path / "m.zarr", chunk_rows=4, manifest={"note": "hello"})
    info = read_manifest(p)
    assert info["shape"] == [6, 2] and info["chunk_rows"] == 4 and info["note"] == "hello"
    assert info["distsketch_version"] == distsketch.__version__


# ------------------------------------------------------------------ models


def test_rff_save_load_round_trip(tmp_path):
    X = np.random.default_rng(1).normal(size=(50, 4))
    rff = RandomFourierFeatures(gamma=0.3, n_components=16, random_state=7).fit(X)
    p = rff.save(tmp_path / "rff.zarr")
    back = load(p)
    assert type(back) is RandomFourierFeatures and back.get_params() == rff.get_params()
    assert back.seed_ == rff.seed_
    np.testing.assert_array_equal(back.random_weights_, rff.random_weights_)
    np.testing.assert_array_equal(back.transform(X), rff.transform(X))
    info = read_manifest(p)
    assert info["kind"] == "model" and info["seed"] == rff.seed_
    assert info["class"].endswith("RandomFourierFeatures")
    with pytest.raises(StoreError, match="already exists"):
        rff.save(p)
    assert distsketch.load(p).n_output_features_ == 16


def test_skpca_save_load_round_trip(tmp_path):
    X = np.random.default_rng(2).normal(size=(300, 5)).astype(np.float32)
    model = StreamingKernelPCA(n_components=3, n_random_features=64, sketch_size=8, gamma=0.2,
                               random_state=3).fit(X)
    back = load(save_model(model, tmp_path / "m.zarr", extra={"input": "memory"}))
    np.testing.assert_array_equal(back.components_, model.components_)
    np.testing.assert_array_equal(back.transform(X), model.transform(X))
    assert back.n_samples_seen_ == 300
    assert zarr.open_group(str(tmp_path / "m.zarr")).attrs["info"]["input"] == "memory"


def test_load_rejects_missing_and_incomplete(tmp_path):
    with pytest.raises(StoreError, match="no model"):
        load(tmp_path / "nothing.zarr")
    (tmp_path / "half.zarr").mkdir()
    with pytest.raises(StoreError, match="no distsketch manifest"):
        load(tmp_path / "half.zarr")
