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
