"""The seams between layers: the CLI and the workflow use estimators through public API only."""

import ast
import pathlib

import pytest

import distsketch

ROOT = pathlib.Path(distsketch.__file__).parent

# private names of the standard library's argparse that the CLI reads to word its messages
STDLIB_PRIVATE = {"_SubParsersAction", "_option_string_actions", "_broken"}


def _modules(package: str) -> list[pathlib.Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", ["cli", "workflow"])
def test_no_private_name_of_another_object_is_used(package):
    """``obj._name`` only on ``self``/``cls``: an estimator is driven by its public methods."""
    found = []
    for path in _modules(package):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__") and node.attr not in STDLIB_PRIVATE
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)}")
    assert not found, "private names used across objects:\n" + "\n".join(found)


@pytest.mark.parametrize("package", ["cli", "workflow"])
def test_no_private_name_is_imported_from_another_layer(package):
    found = []
    for path in _modules(package):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("distsketch.") \
                    and not (node.module or "").startswith(f"distsketch.{package}"):
                found += [f"{path.relative_to(ROOT)}:{node.lineno} {node.module}.{a.name}"
                          for a in node.names if a.name.startswith("_")]
    assert not found, "private names imported:\n" + "\n".join(found)


def test_the_workflow_switches_on_no_estimator_class():
    """Segment folding asks the protocol (``is_mergeable``), never for a class by name."""
    estimators = {name for name in distsketch.__all__
                  if isinstance(getattr(distsketch, name), type)
                  and hasattr(getattr(distsketch, name), "fit")}
    found = []
    for path in _modules("workflow"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Name) and node.id in estimators:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.id}")
    assert not found, "estimator classes named in the workflow:\n" + "\n".join(found)
