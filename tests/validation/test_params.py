"""Parameter constraints: one vocabulary for estimators, public functions and spec sections."""

from __future__ import annotations

import re

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
    ({"cpus": 2}, "option 'cpus' is not known for kind 'x'. Known options: adapt, cores, memory."),
    ({"core": 2}, "option 'core' is not known for kind 'x'. Did you mean 'cores'? Known options: "),
    ({"cores": "8"}, "option cores='8' of kind 'x' is invalid; it must be int."),
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


_ONE_STYLE = r"^.+: (parameter|option|key) \w+=.+ is invalid; it must be .+\.$"


def test_estimators_workflow_specs_and_cluster_specs_fail_in_one_message_style(tmp_path):
    from distsketch.cluster import validate_spec
    from distsketch.workflow import load_workflow_spec

    with pytest.raises(ConfigError) as est:
        RandomFourierFeatures(n_components=0).fit(np.ones((3, 2)))
    spec = {"input": str(tmp_path / "X.zarr"), "method": {"name": "StreamingKernelPCA"},
            "outputs": {"dir": str(tmp_path / "out")}, "seed": -1}
    with pytest.raises(ConfigError) as workflow:
        load_workflow_spec(spec)
    with pytest.raises(ConfigError) as cluster:
        validate_spec({"kind": "local", "processes": 2})
    assert str(est.value).startswith("RandomFourierFeatures: parameter n_components=0 is invalid")
    assert str(workflow.value).startswith("workflow spec: key seed=-1 is invalid")
    assert str(cluster.value) == ("cluster spec: option processes=2 of kind 'local' is invalid; "
                                  "it must be bool.")
    for exc in (est, workflow, cluster):
        assert re.match(_ONE_STYLE, str(exc.value)), str(exc.value)


def test_satisfies_sits_in_a_table_and_says_what_it_wants():
    from distsketch.validation import Satisfies, check_params

    table = {"name": [Satisfies(lambda v: isinstance(v, str) and "/" not in v, "a file name"), None]}
    check_params({"name": "a.zarr"}, table, "f")
    check_params({"name": None}, table, "f")
    with pytest.raises(ConfigError, match=r"^f: parameter name='a/b' is invalid; it must be a "
                                          r"file name or None\.$"):
        check_params({"name": "a/b"}, table, "f")


def test_a_huge_invalid_value_is_shown_bounded():
    from distsketch.validation import check_params

    shared: list = ["x"] * 10
    for _ in range(8):
        shared = [shared] * 10  # 10**9 items once printed in full
    with pytest.raises(ConfigError) as exc:
        check_params({"k": shared}, {"k": [Interval(int, 1, None)]}, "f")
    assert len(str(exc.value)) < 1000 and "f: parameter k=[[[" in str(exc.value)


def test_unknown_names_suggest_a_close_match_and_list_the_known_ones():
    from distsketch.validation import check_names

    check_names(["alpha"], {"alpha", "gamma"}, "w")
    with pytest.raises(ConfigError) as exc:
        check_names(["alhpa"], {"alpha", "gamma"}, "w", owner="Ridge")
    assert str(exc.value) == ("w: parameter 'alhpa' is not known for Ridge. Did you mean 'alpha'? "
                              "Known parameters: alpha, gamma.")
    with pytest.raises(ConfigError, match=r"^w: key 3 is not known\. Known keys: a\.$"):
        check_names([3], {"a"}, "w", noun="key")


class _Pair(RandomFourierFeatures):
    """A feature map with a relation between two parameters, declared in the hook."""

    def _check_params(self) -> None:
        if self.n_components % 2:
            raise ConfigError(f"_Pair: n_components={self.n_components} must be even.")


def test_the_declared_hook_runs_in_the_fit_context_the_cli_and_the_workflow():
    from distsketch.cli.common import check_before_cluster
    from distsketch.estimators.base import DistsketchEstimator
    from distsketch.workflow.methods import check_method_params

    assert DistsketchEstimator._check_params(RandomFourierFeatures()) is None  # declared, no-op
    X = np.ones((4, 2))
    for call in (lambda: _Pair(n_components=3).fit(X),
                 lambda: check_before_cluster(_Pair(n_components=3), 4, 2),
                 lambda: check_method_params(_Pair, {"n_components": 3}, "spec")):
        with pytest.raises(ConfigError, match="n_components=3 must be even"):
            call()
    assert _Pair(n_components=4).fit(X).n_components == 4


def test_no_hook_is_looked_up_by_its_name():
    from pathlib import Path

    import distsketch

    root = Path(distsketch.__file__).parent
    found = [str(p.relative_to(root)) for p in root.rglob("*.py")
             if 'getattr(estimator, name' in p.read_text() or '"_check_params' in p.read_text()]
    assert found == []
