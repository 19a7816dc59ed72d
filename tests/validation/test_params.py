"""Parameter constraints: one vocabulary for estimators, public functions and spec sections."""

from __future__ import annotations

import numpy as np
import pytest

from distsketch import RandomFourierFeatures, StreamingKernelPCA
from distsketch.errors import ConfigError
from distsketch.validation import (
    InstanceOf,
    Interval,
    Options,
    StrOptions,
    check_section,
    validate_params,
)


@pytest.mark.parametrize("constraint,good,bad", [
    (Interval(int, 1, None), [1, 10**9], [0, -3, 1.5, True]),
    (Interval(float, 0, 1, closed="neither"), [0.5, 1e-9], [0.0, 1.0, "x"]),
    (Interval(float, 0, None, closed="left"), [0.0, 7], [-1e-12]),
    (Options({"fd", "rnca"}), ["fd", "rnca"], ["FD", None, 3]),
])
def test_constraints(constraint, good, bad):
    assert all(constraint.accepts(v) for v in good)
    assert not any(constraint.accepts(v) for v in bad)


@pytest.mark.parametrize("param,value", [
    ("n_components", 0), ("gamma", -1.0), ("kernel", "polynomial"), ("orthogonal", "yes"),
    ("random_state", "seed"),
])
def test_invalid_parameters_named_in_error(param, value):
    est = RandomFourierFeatures(**{param: value})
    with pytest.raises(ConfigError, match=f"parameter {param}="):
        est.fit(np.ones((3, 2)))


def test_str_options_and_instance_of():
    assert StrOptions({"auto"}).accepts("auto") and not StrOptions({"auto"}).accepts(1)
    flag, count = InstanceOf(bool), InstanceOf(int, type(None))
    assert flag.accepts(True) and not flag.accepts(1)
    assert count.accepts(3) and count.accepts(None) and not count.accepts(True)
    assert str(count) == "int/NoneType"


@validate_params({"k": [Interval(int, 1, None)], "mode": [StrOptions({"a", "b"}), None]})
def _top(values, k=3, *, mode=None):
    return sorted(values)[:k]


def test_validate_params_decorator_checks_passed_and_default_values():
    assert _top([3, 1, 2], 2) == [1, 2]
    with pytest.raises(ConfigError, match=r"_top: parameter k=0 is invalid; it must be an int"):
        _top([1], k=0)
    with pytest.raises(ConfigError, match="parameter mode='c'"):
        _top([1], mode="c")
    with pytest.raises(TypeError, match="unknown parameters"):
        validate_params({"nope": [None]})(lambda x: x)


def test_ingest_uses_the_decorator(tmp_path):
    from distsketch.io import ingest

    (tmp_path / "a.csv").write_text("1,2\n")
    for kw, needle in [({"chunk_rows": 0}, "chunk_rows=0"), ({"zero_based": "yes"}, "zero_based"),
                       ({"compressor": "gzip"}, "compressor='gzip'"),
                       ({"skip_header": -1}, "skip_header=-1")]:
        with pytest.raises(ConfigError, match=needle):
            ingest(tmp_path / "a.csv", tmp_path / "o.zarr", **kw)
    assert not (tmp_path / "o.zarr").exists()


TABLE = {"cores": [InstanceOf(int)], "memory": [InstanceOf(str)], "adapt": [InstanceOf(dict)]}


@pytest.mark.parametrize("section, needle", [
    ([1, 2], "must be a mapping, got list"),
    ({"cpus": 2}, "option 'cpus' is not known for kind 'x'; known options: ['adapt', 'cores'"),
    ({"cores": "8"}, "option 'cores' of kind 'x' must be int, got '8'"),
    ({"memory": "1GB"}, "missing required option 'cores'"),
])
def test_check_section_names_key_and_place(section, needle):
    with pytest.raises(ConfigError) as exc:
        check_section(section, TABLE, "spec f.yaml", owner="kind 'x'", required=("cores",))
    assert needle in str(exc.value) and str(exc.value).startswith("spec f.yaml")


def test_check_section_returns_a_copy():
    sec = {"cores": 2}
    out = check_section(sec, TABLE, "s")
    assert out == sec and out is not sec


def test_parameters_checked_by_the_fit_wrapper_also_in_partial_fit():
    est = StreamingKernelPCA(n_components=2, n_random_features=16, sketch_size=4, random_state=0)
    est.partial_fit(np.random.default_rng(0).normal(size=(20, 3)))
    est.set_params(sketch_size=0)
    with pytest.raises(ConfigError, match="sketch_size=0"):
        est.partial_fit(np.ones((5, 3)))
    assert getattr(RandomFourierFeatures.fit, "_validates_params", False)
