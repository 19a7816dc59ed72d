"""The class registry: every public name resolves, and a model store can make the
loader import nothing but registered classes."""

from __future__ import annotations

import builtins
import importlib
import inspect
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import distsketch
from distsketch import registry
from distsketch.errors import ConfigError, StoreError

X = np.random.default_rng(0).normal(size=(60, 5))


@pytest.mark.parametrize("name", sorted(registry.ESTIMATORS))
def test_every_estimator_resolves_to_its_class(name):
    cls = registry.resolve(name)
    assert inspect.isclass(cls) and cls.__name__ == name and hasattr(cls, "fit")
    assert cls.__module__ == registry.ESTIMATORS[name]
    assert registry.resolve(name.lower()) is cls and registry.resolve(f" {name.upper()} ") is cls
    assert getattr(distsketch, name) is cls
    # saved under its registered path, and that path loads it back
    assert registry.stored_class(registry.qualified_name(cls)) is cls


@pytest.mark.parametrize("name", sorted(registry.FUNCTIONS))
def test_every_function_resolves(name):
    fn = registry.resolve(name, kind="function")
    assert callable(fn) and not inspect.isclass(fn) and fn.__name__ == name
    assert getattr(distsketch, name) is fn


def test_dir_lists_only_the_public_api():
    names = dir(distsketch)
    # the public names plus the lazily imported subpackages
    assert names == sorted([*distsketch.__all__, "datasets", "io", "metrics"])
    assert set(registry.public_names()) <= set(names)
    assert not [n for n in names if n.startswith("_") and n != "__version__"]
    assert "importlib" not in names and "registry" not in names


def test_unknown_name_lists_the_valid_ones():
    with pytest.raises(ConfigError, match="unknown method 'NoSuchThing'") as info:
        registry.resolve("NoSuchThing", where="--method")
    assert "StreamingKernelPCA" in str(info.value) and "--method" in str(info.value)
    with pytest.raises(ConfigError, match="is not an estimator"):
        registry.resolve("open_array")
    with pytest.raises(ConfigError, match="is not a function"):
        registry.resolve("SRHT", kind="function")
    with pytest.raises(AttributeError):
        distsketch.NoSuchThing  # noqa: B018


def test_module_that_fails_to_import_is_a_config_error(monkeypatch):
    real = importlib.import_module

    def broken(name, *a, **k):
        if name == registry.ESTIMATORS["MEKA"]:
            raise ImportError("broken dependency")
        return real(name, *a, **k)

    monkeypatch.setattr(registry.importlib, "import_module", broken)
    with pytest.raises(ConfigError, match="not available in this installation"):
        registry.resolve("meka", where="workflow spec")


def test_cli_method_resolves_through_the_registry():
    from distsketch.cli.fit import resolve_estimator

    assert resolve_estimator("KernelSolver") == (distsketch.KernelSolver, {})
    assert resolve_estimator("kernelsolver")[0] is distsketch.KernelSolver
    assert resolve_estimator("rnca") == (distsketch.StreamingKernelPCA, {"method": "rnca"})
    with pytest.raises(ConfigError, match=r"unknown method.*skpca"):
        resolve_estimator("os.system")


# ------------------------------------------------------------------ model loading

@pytest.fixture
def sentinel(tmp_path, monkeypatch):
    """A module on sys.path that records being imported, and ``arm()``: from then
    on every import_module, os.system, subprocess.Popen and eval call is recorded."""
    marker = tmp_path / "imported.txt"
    (tmp_path / "ds_sentinel.py").write_text(
        f"open({str(marker)!r}, 'w').write('imported')\n"
        "class Thing:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    calls: list = []

    def recorder(label, real):
        def call(*a, **k):
            calls.append((label, a[:1]))
            return real(*a, **k)
        return call

    def arm():
        monkeypatch.setattr(importlib, "import_module",
                            recorder("import_module", importlib.import_module))
        monkeypatch.setattr(os, "system", recorder("os.system", lambda *a, **k: 0))
        monkeypatch.setattr(subprocess, "Popen", recorder("Popen", lambda *a, **k: None))
        monkeypatch.setattr(builtins, "eval", recorder("eval", builtins.eval))

    yield marker, calls, arm
    sys.modules.pop("ds_sentinel", None)


HOSTILE = ["os.system", "subprocess.Popen", "builtins.eval", "ds_sentinel.Thing",
           # non-registered distsketch internals
           "distsketch.estimators.base.DistsketchEstimator", "distsketch.workflow.RNCAModel",
           "distsketch.io.arrays.access.open_zarr", "distsketch.cli.main",
           # a registered name under a non-distsketch module
           "ds_sentinel.SRHT"]


@pytest.mark.parametrize("path", HOSTILE)
def test_stored_class_refuses_unregistered_and_imports_nothing(sentinel, path):
    marker, calls, arm = sentinel
    arm()
    with pytest.raises(StoreError, match=rf"names class .{re.escape(path)}.*not a registered"):
        registry.stored_class(path)
    assert calls == [] and not marker.exists() and "ds_sentinel" not in sys.modules


@pytest.mark.parametrize("path", HOSTILE)
def test_load_refuses_a_store_naming_a_foreign_class(tmp_path, sentinel, path):
    model_dir = tmp_path / "m.zarr"
    distsketch.RandomFourierFeatures(n_components=8, random_state=0).fit(X).save(model_dir)
    meta = model_dir / "zarr.json"
    doc = json.loads(meta.read_text())
    doc["attributes"]["class"] = path
    meta.write_text(json.dumps(doc))
    marker, calls, arm = sentinel
    arm()
    with pytest.raises(StoreError, match="not a registered distsketch class"):
        distsketch.load(model_dir)
    # zarr may import its own codec modules while opening the group; nothing else runs
    assert [c for c in calls if not str(c[1]).startswith(("('zarr", "('numcodecs"))] == [], calls
    assert not marker.exists() and "ds_sentinel" not in sys.modules


def test_moved_class_still_loads_by_its_registered_name():
    assert registry.stored_class("distsketch.estimators.old_place.SRHT") is distsketch.SRHT
    assert registry.stored_class("distsketch.estimators.sampling.sparsified.SparseTiles").__name__ == \
        "SparseTiles"


def test_saving_an_unregistered_class_is_refused(tmp_path):
    from distsketch.estimators.features.rff import RandomFourierFeatures

    class Custom(RandomFourierFeatures):
        pass

    with pytest.raises(StoreError, match="not a registered distsketch class"):
        registry.qualified_name(Custom)
    est = Custom(n_components=4, random_state=0).fit(X)
    with pytest.raises(StoreError, match="Custom"):
        est.save(tmp_path / "c.zarr")
    assert not (tmp_path / "c.zarr").exists()


def test_scikit_learn_feature_map_in_a_model_round_trips(tmp_path):
    from sklearn.kernel_approximation import RBFSampler

    krr = distsketch.SketchedKernelRidge(
        features=RBFSampler(n_components=16, random_state=0), alpha=0.1).fit(X, X[:, 0])
    krr.save(tmp_path / "k.zarr")
    back = distsketch.load(tmp_path / "k.zarr")
    assert isinstance(back.get_params()["features"], RBFSampler)
    np.testing.assert_array_equal(back.predict(X[:7]), krr.predict(X[:7]))


def test_every_concrete_estimator_class_can_be_saved():
    """No distsketch estimator is written under a path the loader would refuse."""
    import pkgutil

    from distsketch.estimators.base import DistsketchEstimator

    for mod in pkgutil.iter_modules(importlib.import_module("distsketch.estimators").__path__):
        importlib.import_module(f"distsketch.estimators.{mod.name}")

    def subclasses(c):
        for s in c.__subclasses__():
            yield s
            yield from subclasses(s)

    # abstract bases (fitted only through their subclasses) are not stored
    bases = {"GramFolding", "LandmarkFolding", "LinearStageSketch", "MergeableEstimator", "RidgeFolding",
             "RowMapTransformer", "_TermSketch"}
    found = {c for c in subclasses(DistsketchEstimator)
             if c.__module__.startswith("distsketch.estimators") and c.__name__ not in bases}
    assert len(found) >= len(registry.ESTIMATORS)
    for cls in found:
        assert registry.stored_class(registry.qualified_name(cls)) is cls


def test_statistical_dimension_sketch_as_features_round_trips(tmp_path):
    from distsketch.estimators.ridge.statistical_dimension import StatisticalDimensionSketch

    feats = StatisticalDimensionSketch(base=distsketch.RandomFourierFeatures(n_components=32),
                                       alpha=0.1, random_state=0)
    krr = distsketch.SketchedKernelRidge(features=feats, alpha=0.1).fit(X, X[:, 0])
    krr.save(tmp_path / "k.zarr")
    back = distsketch.load(tmp_path / "k.zarr")
    assert type(back.get_params()["features"]) is StatisticalDimensionSketch
    np.testing.assert_array_equal(back.predict(X[:7]), krr.predict(X[:7]))
