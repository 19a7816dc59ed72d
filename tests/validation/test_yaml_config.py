"""The one YAML loader: safe loading and ConfigError naming the file."""

from __future__ import annotations

import pytest

from distsketch.errors import ConfigError
from distsketch.validation import load_yaml, loads_yaml


def test_load_yaml_reads_mapping(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("kind: local\nn_workers: 2\n")
    assert load_yaml(p, "cluster spec") == {"kind": "local", "n_workers": 2}


def test_load_yaml_errors_name_the_file(tmp_path):
    with pytest.raises(ConfigError, match=r"workflow spec .*nope.yaml does not exist; see x/"):
        load_yaml(tmp_path / "nope.yaml", "workflow spec", "see x/")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1\n")
    with pytest.raises(ConfigError, match=r"spec .*bad.yaml is not valid YAML"):
        load_yaml(bad)


def test_yaml_never_builds_python_objects():
    with pytest.raises(ConfigError, match="not valid YAML"):
        loads_yaml("!!python/object/apply:os.system ['true']", "--param value")
    assert loads_yaml("[1, 2]") == [1, 2]


@pytest.mark.parametrize(("text", "value"), [
    ("1e-3", 0.001), ("1E+2", 100.0), ("-2.5e-1", -0.25), ("1e300", 1e300), ("3", 3),
    ("0.5", 0.5), ("[1e-4, 1e-3]", [0.0001, 0.001]), ("{alpha: 1e-3}", {"alpha": 0.001}),
    ("1e-3x", "1e-3x"), ("e5", "e5"),
])
def test_numbers_with_an_exponent_and_no_dot_are_floats(text, value):
    out = loads_yaml(text)
    assert out == value and type(out) is type(value)


def test_aliases_within_the_limits_still_work():
    assert loads_yaml("a: &x {k: 1}\nb: *x\nc: [*x, *x]") == {"a": {"k": 1}, "b": {"k": 1},
                                                                "c": [{"k": 1}, {"k": 1}]}
    deep = "[" * 50 + "]" * 50
    assert loads_yaml(deep) is not None


@pytest.mark.parametrize(("text", "needle"), [
    ("a: &s {self: *s}", "recursive alias *s"),
    ("a: &s [1, *s]", "recursive alias *s"),
    ("[" * 1000 + "]" * 1000, "nested more than 100 levels"),
    ("a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [{', '.join(['*a' if i == 1 else f'*a{i - 1}'] * 10)}]\n"
        for i in range(1, 8)), "expand to more than 100000 values"),
])
def test_alias_bombs_recursion_and_nesting_are_refused_before_expansion(text, needle):
    with pytest.raises(ConfigError) as info:
        loads_yaml(text, "spec s.yaml")
    assert str(info.value).startswith("spec s.yaml is refused: ") and needle in str(info.value)
