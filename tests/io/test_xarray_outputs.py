"""Every kind of distsketch output opens in xarray (or names its dimensions).

Arrays carry ``dimension_names``, groups consolidated metadata, and the
manifest's provenance is also a Zarr attribute.
"""

from __future__ import annotations

import uuid

import numpy as np
import pytest
import zarr

import distsketch
from distsketch.io import ingest, open_array, read_manifest, write_array

xr = pytest.importorskip("xarray")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _data(n: int = 200, d: int = 5, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)


def test_ingested_store_opens_in_xarray(tmp_path):
    X = _data()
    y = (np.arange(200) % 4).astype(np.int64)
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", y)
    ingest(tmp_path / "x.npy", tmp_path / "x.zarr", chunk_rows=64, labels=tmp_path / "y.npy")
    ds = xr.open_zarr(tmp_path / "x.zarr", consolidated=True)  # fails without consolidation
    assert ds["X"].dims == ("sample", "feature") and ds["y"].dims == ("sample",)
    np.testing.assert_array_equal(ds["X"].values, X)
    np.testing.assert_array_equal(ds["y"].values, y)
    prov = ds.attrs["provenance"]
    manifest = read_manifest(tmp_path / "x.zarr")
    assert prov["source"] == manifest["source"] == str(tmp_path / "x.npy")
    assert prov["format"] == "npy" and prov["rows"] == 200
    assert prov["distsketch_version"] == distsketch.__version__


def test_written_array_names_its_dimensions(tmp_path):
    X = _data()
    write_array(X, tmp_path / "z.zarr", chunk_rows=50, manifest={"stage": "features"})
    arr = zarr.open_array(zarr.storage.LocalStore(tmp_path / "z.zarr"), mode="r")
    assert tuple(arr.metadata.dimension_names) == ("sample", "component")
    assert arr.attrs["provenance"]["stage"] == "features"
    assert arr.attrs["provenance"]["shape"] == [200, 5]


def test_written_group_opens_in_xarray(tmp_path):
    X = _data()
    model = distsketch.RandomFourierFeatures(n_components=12, random_state=1).fit(X)
    Z = model.transform(X)
    write_array(Z, tmp_path / "f.zarr", chunk_rows=50, name="features",
                manifest={"model_class": "RandomFourierFeatures"})
    ds = xr.open_zarr(tmp_path / "f.zarr", consolidated=True)
    assert ds["features"].dims == ("sample", "component")
    np.testing.assert_array_equal(ds["features"].values, Z)
    assert ds.attrs["provenance"]["model_class"] == "RandomFourierFeatures"
    da_ = xr.open_dataarray(tmp_path / "f.zarr", engine="zarr")
    assert da_.name == "features" and da_.shape == Z.shape
    # distsketch reads the group layout too (the one array, or path::name)
    np.testing.assert_array_equal(open_array(tmp_path / "f.zarr").compute(), Z)
    np.testing.assert_array_equal(open_array(f"{tmp_path / 'f.zarr'}::features").compute(), Z)


def test_model_store_opens_in_xarray(tmp_path):
    X = _data()
    model = distsketch.StreamingKernelPCA(method="rnca", n_components=3, n_random_features=32,
                                          random_state=0).fit(X)
    model.save(tmp_path / "m.zarr")
    root = xr.open_zarr(tmp_path / "m.zarr", consolidated=True)
    assert root.attrs["provenance"]["class"].endswith("StreamingKernelPCA")
    state = xr.open_zarr(tmp_path / "m.zarr", group="state", consolidated=True)
    np.testing.assert_array_equal(state["components_"].values, model.components_)
    assert state["components_"].dims == ("components__0", "components__1")


def test_url_outputs_open_in_xarray(tmp_path):
    X = _data()
    np.save(tmp_path / "x.npy", X)
    base = f"memory://xr-{uuid.uuid4().hex[:8]}"
    ingest(tmp_path / "x.npy", f"{base}/x.zarr", chunk_rows=64)
    write_array(X * 2, f"{base}/f.zarr", name="features")
    np.testing.assert_array_equal(xr.open_zarr(f"{base}/x.zarr")["X"].values, X)
    np.testing.assert_array_equal(xr.open_zarr(f"{base}/f.zarr")["features"].values, X * 2)
