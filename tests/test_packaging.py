"""Packaging: the declared dependency floors are the pinned ones CI tests, and the wheel
ships the example cluster and workflow specs (distsketch.data) that the docs name."""

from __future__ import annotations

import fnmatch
import os
import re
import tomllib
from pathlib import Path

import pytest
from packaging.version import Version

from distsketch.data import copy_example_specs, example_spec, example_specs
from distsketch.errors import ConfigError, StoreError

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
TOP_LEVEL_SPECS = sorted(f"{folder}/{p.name}" for folder in ("clusters", "workflows")
                         for p in (ROOT / folder).glob("*.yaml"))


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~ ;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


# ----------------------------------------------------------------------------- floors

def test_every_dependency_has_a_floor_pinned_exactly_in_constraints_minimum():
    floors = {}
    # the runtime dependencies and the extras whose tests the minimum-versions job runs
    extras = PYPROJECT["project"]["optional-dependencies"]["parquet"]
    for req in [*PYPROJECT["project"]["dependencies"], *extras]:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)(\[[^\]]*\])?>=([0-9][0-9.]*)", req)
        assert m, f"dependency {req!r} must be 'name>=floor' (one floor, nothing else)"
        floors[_name(m.group(1))] = m.group(3)
    pins = {}
    for line in (ROOT / "constraints" / "minimum.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints/minimum.txt: {line!r} must pin with =="
            pins[_name(name)] = version
    assert set(pins) == set(floors)
    for name, floor in floors.items():
        assert Version(pins[name]) == Version(floor), (name, pins[name], floor)


def test_ci_installs_the_floors_and_the_test_extra():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "-c constraints/minimum.txt" in ci and '".[test]"' in ci
    assert "\nmypy\n" in ci and PYPROJECT["tool"]["mypy"]["files"] == ["distsketch"]


# ----------------------------------------------------------------------------- example specs

def test_every_documented_spec_is_shipped_with_the_package():
    assert len(TOP_LEVEL_SPECS) >= 8
    assert example_specs() == TOP_LEVEL_SPECS
    for name in TOP_LEVEL_SPECS:
        assert example_spec(name).read_bytes() == (ROOT / name).read_bytes(), name


def test_the_package_data_globs_put_every_spec_in_the_wheel():
    package_data = PYPROJECT["tool"]["setuptools"]["package-data"]
    globs = package_data["distsketch.data"]
    for name in TOP_LEVEL_SPECS:
        assert any(fnmatch.fnmatch(name, g) for g in globs), name
    assert "py.typed" in package_data["distsketch"]
    # the shipped files are links to the top-level ones, so the two cannot drift apart
    for name in TOP_LEVEL_SPECS:
        link = ROOT / "distsketch" / "data" / name
        assert link.is_symlink() and link.resolve() == (ROOT / name).resolve(), name


def test_shipped_specs_load():
    from distsketch.cluster import load_spec
    from distsketch.workflow import load_workflow_spec

    for name in example_specs():
        if name.startswith("clusters/"):
            assert load_spec(example_spec(name))["kind"], name
        else:
            spec = load_workflow_spec(example_spec(name))
            assert spec.method.name, name


def test_unknown_spec_name_lists_the_shipped_ones():
    with pytest.raises(ConfigError, match=r"clusters/slurm\.yaml"):
        example_spec("clusters/nope.yaml")
    with pytest.raises(ConfigError, match="no example spec"):
        example_spec("../pyproject.toml")


def test_copy_example_specs_keeps_the_layout(tmp_path):
    written = copy_example_specs(tmp_path / "project")
    assert sorted(p.relative_to(tmp_path / "project").as_posix() for p in written) == TOP_LEVEL_SPECS
    for p in written:
        assert p.read_bytes() == (ROOT / p.relative_to(tmp_path / "project")).read_bytes()
        assert not p.is_symlink()


def test_copy_example_specs_replaces_nothing_and_writes_nothing_on_conflict(tmp_path):
    dest = tmp_path / "project"
    (dest / "workflows").mkdir(parents=True)
    mine = dest / "workflows" / "skpca.yaml"
    mine.write_text("my own spec\n")
    with pytest.raises(StoreError, match=r"skpca\.yaml"):
        copy_example_specs(dest)
    assert mine.read_text() == "my own spec\n"
    assert sorted(os.listdir(dest)) == ["workflows"] and os.listdir(dest / "workflows") == ["skpca.yaml"]


# ----------------------------------------------------------------------------- BLAS control

def test_threadpoolctl_controls_every_blas_that_numpy_and_scipy_load():
    # bitwise determinism pins BLAS to one thread per task (distsketch.blas); a
    # threadpoolctl that does not recognise a loaded BLAS leaves it multi-threaded, and
    # results then differ between schedulers in the last bits (threadpoolctl < 3.5 does
    # not know the libscipy_openblas of the NumPy 2 wheels)
    import numpy as np
    import scipy.linalg
    from threadpoolctl import threadpool_info

    np.dot(np.ones((4, 4)), np.ones((4, 4)))
    scipy.linalg.eigh(np.eye(4))
    blas = re.compile(r"(openblas|mkl_rt|libblis|flexiblas)[^/]*\.so")
    loaded = set()
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and blas.search(os.path.basename(fields[5])):
            loaded.add(os.path.realpath(fields[5].strip()))
    known = {os.path.realpath(info["filepath"]) for info in threadpool_info()
             if info["user_api"] == "blas"}
    assert loaded, "no BLAS library found in /proc/self/maps"
    assert loaded <= known, f"BLAS libraries threadpoolctl cannot limit: {sorted(loaded - known)}"
