"""Model save/load round trips and refusals."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

import distsketch
from distsketch import RandomFourierFeatures, StreamingKernelPCA
from distsketch.errors import StoreError
from distsketch.io import load, read_manifest, save_model

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


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
