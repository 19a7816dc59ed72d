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


@pytest.mark.parametrize("dtype", [str, object])
def test_string_class_labels_round_trip(tmp_path, dtype):
    from distsketch import SketchedKernelRidgeClassifier

    X = np.random.default_rng(3).normal(size=(300, 3))
    y = np.where(X[:, 0] * X[:, 1] > 0, "same sign", "opposite").astype(dtype)
    clf = SketchedKernelRidgeClassifier(random_state=0).fit(X, y)
    clf.save(tmp_path / "m.zarr")
    back = load(tmp_path / "m.zarr")
    assert back.classes_.dtype == clf.classes_.dtype
    np.testing.assert_array_equal(back.classes_, clf.classes_)
    np.testing.assert_array_equal(back.predict(X), clf.predict(X))


def test_damaged_string_labels_are_refused(tmp_path):
    import json

    from distsketch import SketchedKernelRidgeClassifier

    X = np.random.default_rng(3).normal(size=(100, 3))
    clf = SketchedKernelRidgeClassifier(random_state=0).fit(X, np.where(X[:, 0] > 0, "a", "b"))
    clf.save(tmp_path / "m.zarr")
    meta = tmp_path / "m.zarr" / "zarr.json"
    body = json.loads(meta.read_text())
    found = []

    def damage(node):
        if isinstance(node, dict):
            if "__strings__" in node:
                node["__strings__"] = ["a", 7]
                found.append(node)
            for v in node.values():
                damage(v)
        elif isinstance(node, list):
            for v in node:
                damage(v)

    damage(body["attributes"])
    assert len(found) == 1
    meta.write_text(json.dumps(body))
    with pytest.raises(StoreError, match="not a list of strings"):
        load(tmp_path / "m.zarr")


def test_non_finite_numbers_in_learned_json_round_trip(tmp_path):
    # JSON has no inf/nan and some Zarr versions refuse them in attributes: they are tagged
    X = np.random.default_rng(3).normal(size=(40, 3))
    rff = RandomFourierFeatures(n_components=8, random_state=0).fit(X)
    rff.extra_ = {"scores": [1.5, float("inf"), -np.inf], "gap": np.float64("nan")}
    back = load(save_model(rff, tmp_path / "m.zarr"))
    assert back.extra_["scores"][:2] == [1.5, float("inf")] and back.extra_["scores"][2] == -np.inf
    assert np.isnan(back.extra_["gap"])
