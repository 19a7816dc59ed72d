"""Inputs and outputs on object stores: S3 (a moto server) and ``memory://``.

Everything written to a URL reads back bitwise equal to the same write on
local disk; nothing is ever written to a local directory named after the
scheme; a store without its manifest is uncommitted; the overwrite rules of
local outputs hold for URLs; a URL that cannot be written is a StoreError.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import dask
import numpy as np
import pytest
import zarr

import distsketch
from distsketch.errors import InputError, StoreError
from distsketch.io import ingest, load, open_array, read_manifest, resolve, write_array
from distsketch.io import publish as publish_mod
from distsketch.io.arrays.stores import zarr_store
from distsketch.io.commit.manifest import MANIFEST_NAME

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


class Backend:
    """A URL prefix on one object store, with its options and filesystem."""

    def __init__(self, base: str, options: dict | None, fs):
        self.base, self.options, self.fs = base, options, fs

    def url(self, name: str) -> str:
        return f"{self.base}/{name}"

    def keys(self, name: str) -> list[str]:
        loc = resolve(self.url(name), self.options)
        self.fs.invalidate_cache()
        return sorted(f[len(loc.path) + 1:] for f in self.fs.find(loc.path))

    def remove(self, name: str, key: str) -> None:
        loc = resolve(self.url(name), self.options)
        self.fs.rm_file(f"{loc.path}/{key}")
        self.fs.invalidate_cache()


@pytest.fixture(params=["s3", "memory"])
def store(request, tmp_path, monkeypatch) -> Backend:
    """A fresh prefix on S3 or memory://, with the working directory in tmp_path."""
    monkeypatch.chdir(tmp_path)  # a stray local "s3:" or "memory:" folder would appear here
    if request.param == "s3":
        s3 = request.getfixturevalue("s3")
        yield Backend(s3.url(), s3.storage_options, s3.fs)
    else:
        import fsspec

        base = f"memory://ds-{uuid.uuid4().hex[:10]}"
        fs = fsspec.filesystem("memory")
        yield Backend(base, None, fs)
        fs.rm(resolve(base).path, recursive=True)
    assert not [p for p in os.listdir(tmp_path) if ":" in p], os.listdir(tmp_path)


def _data(n: int = 300, d: int = 6, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)


def _same(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()


# ---------------------------------------------------------------- round trips


def test_write_open_array_bitwise_equal_to_local(store, tmp_path):
    X = _data()
    local = write_array(X, tmp_path / "x.zarr", chunk_rows=64)
    url = write_array(X, store.url("x.zarr"), chunk_rows=64, storage_options=store.options)
    assert url.endswith("/x.zarr") and "://" in url
    got = open_array(store.url("x.zarr"), storage_options=store.options)
    _same(got.compute(), open_array(local).compute())
    _same(got.compute(), X)
    assert read_manifest(url, storage_options=store.options)["kind"] == "array"
    keys = store.keys("x.zarr")
    assert {MANIFEST_NAME, ".distsketch", "zarr.json", "X/zarr.json", "X/c/0/0", "X/c/4/0"} <= set(keys)
    assert not [k for k in keys if ".tmp-" in k]
    # nothing is left beside the output either (the temporary prefix was removed)
    parent = resolve(store.base, store.options)
    store.fs.invalidate_cache()
    assert [Path(p).name for p in store.fs.ls(parent.path, detail=False)] == ["x.zarr"]


def test_model_save_load_bitwise_equal_to_local(store, tmp_path):
    X = _data()
    model = distsketch.RandomFourierFeatures(n_components=16, random_state=3).fit(X)
    model.save(tmp_path / "m.zarr")
    out = model.save(store.url("m.zarr"), storage_options=store.options)
    assert out == resolve(store.url("m.zarr"), store.options).url
    remote = distsketch.load(store.url("m.zarr"), storage_options=store.options)
    local = load(tmp_path / "m.zarr")
    _same(remote.random_weights_, local.random_weights_)
    _same(remote.transform(X), model.transform(X))


def test_ingest_to_url_bitwise_equal_to_local(store, tmp_path):
    X = _data(250, 5, seed=1)
    y = np.arange(250, dtype=np.int64) % 3
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", y)
    ingest(tmp_path / "x.npy", tmp_path / "x.zarr", chunk_rows=40, labels=tmp_path / "y.npy")
    url = ingest(tmp_path / "x.npy", store.url("x.zarr"), chunk_rows=40,
                 labels=tmp_path / "y.npy", storage_options=store.options)
    for name in ("X", "y"):
        a = zarr.open_array(zarr.storage.LocalStore(tmp_path / "x.zarr" / name), mode="r")[...]
        b = open_array(f"{url}::{name}", storage_options=store.options,
                       targets=name == "y").compute()
        _same(b, a)
    assert read_manifest(url, storage_options=store.options)["rows"] == 250


def test_transform_written_to_url_equals_local(store, tmp_path):
    """A lazy pipeline reading a URL store and writing another URL store."""
    X = _data(400, 4)
    write_array(X, store.url("in.zarr"), chunk_rows=100, storage_options=store.options)
    Xd = open_array(store.url("in.zarr"), storage_options=store.options)
    model = distsketch.RandomFourierFeatures(n_components=8, random_state=0).fit(Xd)
    write_array(model.transform(Xd), store.url("z.zarr"), storage_options=store.options)
    write_array(model.transform(X), tmp_path / "z.zarr", chunk_rows=100)
    _same(open_array(store.url("z.zarr"), storage_options=store.options).compute(),
          open_array(tmp_path / "z.zarr").compute())


# ---------------------------------------------------------------- commit and safety


def test_store_without_manifest_is_uncommitted(store):
    write_array(_data(), store.url("x.zarr"), storage_options=store.options)
    distsketch.RandomFourierFeatures(n_components=4, random_state=0).fit(_data()).save(
        store.url("m.zarr"), storage_options=store.options)
    store.remove("x.zarr", MANIFEST_NAME)
    store.remove("m.zarr", MANIFEST_NAME)
    with pytest.raises(StoreError, match=r"has no manifest: an interrupted write.*[Rr]erun"):
        open_array(store.url("x.zarr"), storage_options=store.options)
    with pytest.raises(StoreError, match="has no manifest: an interrupted write"):
        load(store.url("m.zarr"), storage_options=store.options)
    # the uncommitted store is distsketch's (it has the marker): rewriting it is allowed
    write_array(_data(seed=2), store.url("x.zarr"), overwrite=True, storage_options=store.options)
    _same(open_array(store.url("x.zarr"), storage_options=store.options).compute(), _data(seed=2))


@pytest.mark.parametrize("store", ["memory"], indirect=True)  # the same code path as S3
def test_interrupted_publish_leaves_an_uncommitted_store(store, monkeypatch):
    write_array(_data(), store.url("x.zarr"), storage_options=store.options)

    seen = {}

    def crash(name, loc):
        if name == "copied":
            # everything but the manifest is in place: the manifest is written last
            seen["keys"] = store.keys("x.zarr")
            raise OSError("connection lost")

    monkeypatch.setattr(publish_mod, "_step", crash)
    with pytest.raises(StoreError, match=r"connection lost.*left uncommitted"):
        write_array(_data(seed=1), store.url("x.zarr"), overwrite=True,
                    storage_options=store.options)
    assert ".distsketch" in seen["keys"] and "zarr.json" in seen["keys"]
    assert MANIFEST_NAME not in seen["keys"]
    with pytest.raises(StoreError, match="has no manifest"):
        open_array(store.url("x.zarr"), storage_options=store.options)
    monkeypatch.setattr(publish_mod, "_step", lambda name, loc: None)
    write_array(_data(seed=1), store.url("x.zarr"), overwrite=True, storage_options=store.options)
    _same(open_array(store.url("x.zarr"), storage_options=store.options).compute(), _data(seed=1))


@pytest.mark.parametrize("store", ["memory"], indirect=True)  # the same code path as S3
def test_failed_write_keeps_previous_output(store):
    X = _data()
    write_array(X, store.url("x.zarr"), storage_options=store.options)
    bad = X.copy()
    bad[17, 2] = np.nan
    with pytest.raises(InputError, match="NaN or Inf"):
        write_array(bad, store.url("x.zarr"), overwrite=True, storage_options=store.options)
    _same(open_array(store.url("x.zarr"), storage_options=store.options).compute(), X)
    parent = resolve(store.base, store.options)
    store.fs.invalidate_cache()
    assert [Path(p).name for p in store.fs.ls(parent.path, detail=False)] == ["x.zarr"]


@pytest.mark.parametrize("store", ["memory"], indirect=True)  # the same code path as S3
def test_existing_output_needs_overwrite(store):
    write_array(_data(), store.url("x.zarr"), storage_options=store.options)
    with pytest.raises(StoreError, match="already exists; pass overwrite=True"):
        write_array(_data(seed=1), store.url("x.zarr"), storage_options=store.options)
    _same(open_array(store.url("x.zarr"), storage_options=store.options).compute(), _data())


def test_foreign_prefix_is_never_replaced(store):
    X = _data()
    loc = resolve(store.url("theirs.zarr"), store.options)
    foreign = zarr.create_array(store=zarr.storage.FsspecStore.from_url(
        loc.url, storage_options=loc.storage_options), shape=X.shape, chunks=(100, 6),
        dtype=X.dtype)
    foreign[...] = X
    before = store.keys("theirs.zarr")
    with pytest.raises(StoreError, match="did not write it and will not replace it"):
        write_array(_data(seed=1), store.url("theirs.zarr"), overwrite=True,
                    storage_options=store.options)
    with pytest.raises(StoreError, match="not written by distsketch"):
        distsketch.RandomFourierFeatures(n_components=4, random_state=0).fit(X).save(
            store.url("theirs.zarr"), storage_options=store.options)
    assert store.keys("theirs.zarr") == before
    # a store without distsketch's marker is not "uncommitted": it is read as it is
    _same(open_array(store.url("theirs.zarr"), storage_options=store.options).compute(), X)
    # a single object at the URL is never replaced either
    store.fs.pipe_file(resolve(store.url("file.bin"), store.options).path, b"user data")
    with pytest.raises(StoreError, match="existing object"):
        write_array(X, store.url("file.bin"), overwrite=True, storage_options=store.options)


@pytest.mark.parametrize("store", ["memory"], indirect=True)  # the same code path as S3
def test_output_inside_url_input_is_refused(store):
    write_array(_data(), store.url("in.zarr"), storage_options=store.options)
    Xd = open_array(store.url("in.zarr"), storage_options=store.options)
    with pytest.raises(InputError, match="inside the input"):
        write_array(Xd * 2, store.url("in.zarr/out"), storage_options=store.options)
    with pytest.raises(InputError, match="is the input"):
        write_array(Xd * 2, store.url("in.zarr"), overwrite=True, storage_options=store.options)


def test_missing_chunk_on_url_is_detected(store):
    write_array(_data(), store.url("x.zarr"), chunk_rows=64, storage_options=store.options)
    store.remove("x.zarr", "X/c/2/0")
    with pytest.raises(StoreError, match=r"missing chunk \(2, 0\) \(rows 128..192\).*data was lost"):
        open_array(store.url("x.zarr"), storage_options=store.options)
    # a foreign store written with empty chunks skipped: absent chunks are the fill value
    loc = resolve(store.url("sparse.zarr"), store.options)
    arr = zarr.create_array(store=zarr.storage.FsspecStore.from_url(
        loc.url, storage_options=loc.storage_options), shape=(40, 3), chunks=(10, 3),
        dtype="f4", fill_value=0.0, config={"write_empty_chunks": False})
    arr[10:20] = 1.0
    with pytest.raises(StoreError, match="allow_missing_chunks=True"):
        open_array(store.url("sparse.zarr"), storage_options=store.options)
    got = open_array(store.url("sparse.zarr"), storage_options=store.options,
                     allow_missing_chunks=True).compute()
    expected = np.zeros((40, 3), np.float32)
    expected[10:20] = 1.0
    _same(got, expected)


@pytest.mark.parametrize("store", ["memory"], indirect=True)  # the same code path as S3
def test_missing_chunk_of_url_model_is_detected(store):
    model = distsketch.RandomFourierFeatures(n_components=4, random_state=0).fit(_data())
    model.save(store.url("m.zarr"), storage_options=store.options)
    store.remove("m.zarr", "state/random_weights_/c/0/0")
    with pytest.raises(StoreError, match="random_weights_: model array is missing chunk"):
        load(store.url("m.zarr"), storage_options=store.options)


# ---------------------------------------------------------------- URLs that cannot be written


def test_unwritable_urls_are_store_errors(s3, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    X = _data(20, 2)
    with pytest.raises(StoreError, match=r"foo://x/a.zarr.*protocol"):
        write_array(X, "foo://x/a.zarr")
    with pytest.raises(StoreError, match=r"gs://bucket/a.zarr.*needs gcsfs.*pip install gcsfs"):
        write_array(X, "gs://bucket/a.zarr")
    with pytest.raises(StoreError, match=r"s3://no-such-bucket-ds/a.zarr.*bucket"):
        write_array(X, "s3://no-such-bucket-ds/a.zarr", storage_options=s3.storage_options)
    with pytest.raises(StoreError, match="no-such-bucket-ds"):
        distsketch.RandomFourierFeatures(n_components=4, random_state=0).fit(X).save(
            "s3://no-such-bucket-ds/m.zarr", storage_options=s3.storage_options)
    np.save(tmp_path / "x.npy", X)
    with pytest.raises(StoreError, match="no-such-bucket-ds"):
        ingest(tmp_path / "x.npy", "s3://no-such-bucket-ds/x.zarr",
               storage_options=s3.storage_options)
    assert sorted(os.listdir(tmp_path)) == ["x.npy"]  # no local fallback of any kind


def test_unreachable_endpoint_is_a_store_error(s3, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bad = {"key": "x", "secret": "y", "client_kwargs": {"endpoint_url": "http://127.0.0.1:9"},
           "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 1}}
    with pytest.raises(StoreError, match=s3.url("nowhere.zarr")):
        write_array(_data(20, 2), s3.url("nowhere.zarr"), storage_options=bad)
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------- options from the dask config


def test_storage_options_from_dask_config(s3):
    X = _data(50, 3)
    url = s3.url()
    with dask.config.set({"distsketch.storage-options": s3.storage_options}):
        write_array(X, url + "/x.zarr")
        _same(open_array(url + "/x.zarr").compute(), X)
    # explicit options are merged over the configured ones, nested mappings key by key
    wrong = {**s3.storage_options,
             "client_kwargs": {"endpoint_url": "http://127.0.0.1:9", "region_name": "us-east-1"}}
    with dask.config.set({"distsketch.storage-options": wrong}):
        got = open_array(url + "/x.zarr",
                         storage_options={"client_kwargs": {"endpoint_url": s3.endpoint}})
        _same(got.compute(), X)


def test_bad_config_value_is_a_config_error():
    from distsketch.errors import ConfigError

    with dask.config.set({"distsketch.storage-options": "anon"}):
        with pytest.raises(ConfigError, match=r"distsketch\.storage-options"):
            resolve("memory://x/a.zarr")


# ---------------------------------------------------------------- paths mean the same everywhere


def test_resolve_normalises_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve("a/b.zarr").url == str(tmp_path / "a" / "b.zarr")
    assert resolve(f"file://{tmp_path}/c.zarr/").url == str(tmp_path / "c.zarr")
    assert resolve("file://" + str(tmp_path)).is_local
    m = resolve("memory://bucket/x.zarr/")
    assert (m.url, m.path, m.is_local) == ("memory:///bucket/x.zarr", "/bucket/x.zarr", False)
    assert resolve("memory:///bucket/x.zarr") == m


def test_relative_path_is_resolved_on_the_client(tmp_path, monkeypatch):
    """The graph names the store absolutely: it reads the same data from another cwd."""
    X = _data(120, 3)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    write_array(X, "data.zarr", chunk_rows=50)
    Xd = open_array("data.zarr")
    monkeypatch.chdir(tmp_path / "b")  # a worker started elsewhere
    _same(Xd.compute(), X)
    # the output path too is fixed when write_array is called
    out = write_array(Xd, "../a/copy.zarr")
    assert out == tmp_path / "a" / "copy.zarr"
    _same(open_array(tmp_path / "a" / "copy.zarr").compute(), X)


def test_relative_path_under_workers_in_another_cwd(tmp_path, monkeypatch):
    """A distributed worker process started in another directory reads the same store."""
    distributed = pytest.importorskip("distributed")
    X = _data(200, 3)
    (tmp_path / "client").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "client")
    write_array(X, "data.zarr", chunk_rows=50)
    Xd = open_array("data.zarr")

    def chdir_elsewhere(dask_worker=None):
        os.chdir(tmp_path / "elsewhere")
        return os.getcwd()

    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        cwds = client.run(chdir_elsewhere)
        assert set(cwds.values()) == {str(tmp_path / "elsewhere")}
        _same(Xd.compute(), X)


def test_location_reads_and_writes_small_objects(store):
    loc = resolve(store.url("state"), store.options)
    assert not loc.isfile("state.json")
    loc.write_bytes("state.json", b'{"rows": 3}')
    assert loc.isfile("state.json") and loc.read_bytes("state.json") == b'{"rows": 3}'
    assert loc.child("a").sibling("b").url == loc.child("b").url
    with pytest.raises(FileNotFoundError):
        loc.read_bytes("missing.json")


def test_file_url_is_the_local_store(tmp_path):
    X = _data(100, 3)
    out = write_array(X, f"file://{tmp_path}/x.zarr", chunk_rows=25)
    assert out == tmp_path / "x.zarr"  # a local output: renamed into place, a Path returned
    _same(open_array(f"file://{tmp_path}/x.zarr").compute(), X)
    (tmp_path / "x.zarr" / "X" / "c" / "1" / "0").unlink()
    with pytest.raises(StoreError, match=r"missing chunk \(1, 0\) \(rows 25..50\)"):
        open_array(f"file://{tmp_path}/x.zarr")


@pytest.mark.parametrize("store", ["memory"], indirect=True)  # the same code path as S3
def test_check_replaceable_on_urls(store):
    from distsketch.io.storage.safety import check_replaceable

    write_array(_data(), store.url("ours.zarr"), storage_options=store.options)
    assert check_replaceable(store.url("ours.zarr")).url.endswith("/ours.zarr")
    store.fs.pipe_file(resolve(store.url("theirs/data.bin")).path, b"x")
    with pytest.raises(StoreError, match="did not write it"):
        check_replaceable(store.url("theirs"))
    with pytest.raises(InputError, match="inside the input"):
        check_replaceable(store.url("ours.zarr/sub"), inputs=[store.url("ours.zarr::X")])


def test_class_names_ingested_to_url(store, tmp_path):
    """A CSV label column of names on an object store: codes, names and feature names."""
    (tmp_path / "t.csv").write_text("lettr,a,b\nT,1,2\nA,3,4\nT,5,6\n")
    url = ingest(tmp_path / "t.csv", store.url("t.zarr"), label_column="lettr",
                 storage_options=store.options)
    y = open_array(f"{url}::y", storage_options=store.options, targets=True).compute()
    assert y.tolist() == ["T", "A", "T"]
    g = zarr.open_group(zarr_store(resolve(url, store.options)), mode="r")
    assert g["X"].attrs["feature_names"] == ["a", "b"]
