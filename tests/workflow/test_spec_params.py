"""A method's params are checked when the spec is loaded: names (with a suggestion) and values."""

from __future__ import annotations

import pytest

import distsketch.cli as cli
from distsketch.errors import ConfigError
from distsketch.workflow import load_workflow_spec, run_workflow


def spec(tmp, params, name="StreamingKernelPCA"):
    return {"input": str(tmp / "X.zarr"), "method": {"name": name, "params": params},
            "outputs": {"dir": str(tmp / "out")}, "cluster": "sync"}


def test_typo_names_the_valid_parameters_and_a_close_match(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_workflow_spec(spec(tmp_path, {"n_component": 3, "gamma": 0.5}))
    msg = str(info.value)
    assert "method.params: parameter 'n_component' is not known for StreamingKernelPCA." in msg
    assert "Did you mean 'n_components'?" in msg
    assert "Known parameters: " in msg and "sketch_size" in msg and "random_state" in msg
    # no close match: the list only
    with pytest.raises(ConfigError,
                       match=r"parameter 'zzz' is not known for StreamingKernelPCA\. Known parameters: "):
        load_workflow_spec(spec(tmp_path, {"zzz": 1}))
    # 'classes' belongs to classifiers only
    with pytest.raises(ConfigError, match="parameter 'classes' is not known"):
        load_workflow_spec(spec(tmp_path, {"classes": [0, 1]}))


@pytest.mark.parametrize("params, match", [
    ({"n_components": 0}, "n_components"),
    ({"method": "svd"}, "method"),
    ({"n_components": 50, "sketch_size": 16}, r"exceeds min\(sketch_size, n_random_features\)"),
])
def test_bad_values_refused_when_the_spec_is_loaded(tmp_path, params, match):
    # X.zarr does not exist: the spec is refused before any input is opened
    with pytest.raises(ConfigError, match=match):
        run_workflow(spec(tmp_path, params), log=lambda m: None)
    assert not (tmp_path / "out").exists()


def test_cli_run_reports_the_typo_not_an_internal_error(tmp_path, capsys):
    path = tmp_path / "wf.yaml"
    path.write_text("input: X.zarr\nmethod:\n  name: SketchedKernelRidge\n  params: {alhpa: 0.1}\n"
                    "outputs: {dir: out}\ncluster: sync\n")
    assert cli.main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Did you mean 'alpha'?" in err and "unexpected error" not in err
    assert not (tmp_path / "out").exists()


def test_yaml_numbers_with_an_exponent_are_numbers_in_a_spec(tmp_path):
    path = tmp_path / "wf.yaml"
    path.write_text("input: X.zarr\nmethod:\n  name: SketchedKernelRidge\n"
                    "  params: {alpha: 1e-3, alphas: [1e-4, 1E+2]}\noutputs: {dir: out}\n")
    params = load_workflow_spec(path).method.params
    assert params["alpha"] == 0.001 and isinstance(params["alpha"], float)
    assert list(params["alphas"]) == [0.0001, 100.0]


def test_text_where_a_number_is_expected_says_yaml_read_it_as_text(tmp_path):
    path = tmp_path / "wf.yaml"
    path.write_text("input: X.zarr\nmethod:\n  name: SketchedKernelRidge\n"
                    "  params: {alpha: '1e-3'}\noutputs: {dir: out}\n")
    with pytest.raises(ConfigError) as info:
        load_workflow_spec(path)
    assert "alpha='1e-3'" in str(info.value) and "YAML read it as text" in str(info.value)


def test_spec_key_does_not_copy_storage_options(tmp_path):
    # a mapping handed in from Python that shares one list 10**9 times once copied
    shared: list = ["x"] * 10
    for _ in range(8):
        shared = [shared] * 10
    spec = load_workflow_spec({**spec_mapping(tmp_path), "storage_options": {"bomb": shared}})
    assert spec.as_dict()["storage_options"] == ["bomb"] and len(spec.key()) == 24


def spec_mapping(tmp):
    return spec(tmp, {"n_components": 2})
