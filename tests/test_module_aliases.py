"""The flat module paths of earlier releases still import, as the modules that replaced them."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import distsketch.estimators
import distsketch.io
from distsketch.module_aliases import aliases

# importing either package installs its table
assert distsketch.estimators.__name__ and distsketch.io.__name__
OLD = aliases()


def test_every_moved_module_of_both_packages_has_an_old_name() -> None:
    assert "distsketch.estimators.rff" in OLD and "distsketch.io.urls" in OLD
    packages = {name.rsplit(".", 1)[0] for name in OLD}
    assert packages == {"distsketch.estimators", "distsketch.io"}
    assert len(OLD) == len(set(OLD.values()))  # one old name per new module


@pytest.mark.parametrize("old", sorted(OLD))
def test_old_path_is_the_new_module(old: str) -> None:
    assert importlib.import_module(old) is importlib.import_module(OLD[old])


def test_a_class_imported_by_its_old_path_is_the_same_class() -> None:
    from distsketch.estimators.rff import RandomFourierFeatures as Old

    from distsketch import RandomFourierFeatures
    from distsketch.estimators.ridge import SketchedKernelRidge
    from distsketch.io.arrays import open_array

    assert Old is RandomFourierFeatures
    assert SketchedKernelRidge.__module__ == "distsketch.estimators.ridge.regressor"
    assert open_array.__module__ == "distsketch.io.arrays.access"


def test_names_outside_the_tables_are_not_aliased() -> None:
    for name in ("distsketch.estimators.os", "distsketch.io.pickle", "distsketch.estimators.x"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(name)


def test_old_paths_import_in_a_fresh_interpreter() -> None:
    # the aliases are installed by the package a user imports first, whichever it is
    code = ("import distsketch.estimators.ridge_defaults as a, distsketch.io.stores as b; "
            "print(a.__name__, b.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["distsketch.estimators.ridge.defaults", "distsketch.io.arrays.stores"]


@pytest.mark.parametrize("path", ["distsketch.estimators.rff.RandomFourierFeatures",
                                  "distsketch.estimators.ridge.SketchedKernelRidge",
                                  "distsketch.estimators.nystrom.NystromFeatures",
                                  "distsketch.estimators.falkon.FalkonCheckpoint"])
def test_a_class_recorded_under_its_old_module_path_loads(path: str) -> None:
    # models saved before the move name the flat module; the registry matches the class name
    import distsketch
    from distsketch.registry import stored_class

    name = path.rpartition(".")[2]
    cls = stored_class(path)
    assert cls.__name__ == name
    if hasattr(distsketch, name):
        assert cls is getattr(distsketch, name)
