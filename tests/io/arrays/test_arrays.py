"""open_array validation, and row-exact atomic writes of arrays."""

from __future__ import annotations

from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import distsketch
from distsketch.errors import InputError, StoreError
from distsketch.io import open_array, read_manifest, write_array

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
    (path / "X" / "c" / "3" / "0").unlink()
    with pytest.raises(StoreError, match=r"missing chunk.*\(3, 0\)"):
        open_array(str(path))


def test_corrupt_chunk_names_rows(store):
    path, _ = store
    (path / "X" / "c" / "4" / "0").write_bytes(b"garbage" * 5)
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


def test_write_array_manifest(tmp_path):
    A = np.arange(12, dtype=np.float64).reshape(6, 2)
    p = write_array(A, tmp_path / "m.zarr", chunk_rows=4, manifest={"note": "hello"})
    info = read_manifest(p)
    assert info["shape"] == [6, 2] and info["chunk_rows"] == 4 and info["note"] == "hello"
    assert info["distsketch_version"] == distsketch.__version__


# ------------------------------------------------------------------ write_array row safety


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 400), dask_rows=st.integers(1, 130), zarr_rows=st.integers(1, 130))
def test_write_array_never_loses_rows(tmp_path_factory, n, dask_rows, zarr_rows):
    """Dask chunks smaller than, larger than and misaligned with the Zarr chunks."""
    A = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    out = tmp_path_factory.mktemp("w") / "a.zarr"
    write_array(da.from_array(A, chunks=(dask_rows, 3)), out, chunk_rows=zarr_rows)
    arr = zarr.open_array(str(out), path="X", mode="r")
    assert arr.chunks[0] == zarr_rows and arr.nchunks_initialized == arr.nchunks
    np.testing.assert_array_equal(arr[...], A)
    assert read_manifest(out)["shape"] == [n, 3]


@pytest.mark.parametrize(("dask_rows", "zarr_rows"), [(7, 50), (50, 7), (33, 50), (1000, 1000)])
def test_write_array_threaded_scheduler(tmp_path, dask_rows, zarr_rows):
    A = np.random.default_rng(3).normal(size=(1000, 5)).astype(np.float32)
    import dask

    with dask.config.set(scheduler="threads"):
        write_array(da.from_array(A, chunks=(dask_rows, 5)), tmp_path / "a.zarr",
                    chunk_rows=zarr_rows)
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "a.zarr"), path="X")[...], A)
