"""An import-linter contract type for submodules of an external package.

import-linter's ``forbidden`` contract sees an external package only as a
whole (``dask``), never a submodule (``dask.array``): the import graph holds
external packages squashed to their top level.  This contract reads the
import statements themselves, so "only ``distsketch.graph`` imports
``dask.array``" can be stated while ``dask.config`` or ``dask.base`` stay
allowed everywhere.  ``lint-imports`` (run from the repository root) loads it
through ``contract_types`` in pyproject.toml.
"""

from __future__ import annotations

import re

from grimp import ImportGraph
from importlinter import Contract, ContractCheck, fields, output

__all__ = ["ForbiddenSubmoduleContract", "imports_submodule"]


def imports_submodule(line: str, submodule: str) -> bool:
    """Whether the import statement ``line`` imports ``submodule`` (or a module inside it).

    ``import dask.array as da``, ``from dask.array.core import Array`` and
    ``from dask import array`` import ``dask.array``; ``import dask.config``
    and ``from dask.base import tokenize`` do not.
    """
    package, _, name = submodule.rpartition(".")
    dotted = rf"\b{re.escape(submodule)}\b(?!\w)"
    from_package = rf"^\s*from\s+{re.escape(package)}\s+import\s+.*\b{re.escape(name)}\b"
    return bool(re.search(dotted, line) or re.search(from_package, line))


class ForbiddenSubmoduleContract(Contract):
    """Only the ``allowed_modules`` (and what they contain) import the ``forbidden_modules``.

    Configuration options:
        - source_modules:    Packages checked (with everything inside them).
        - forbidden_modules: Dotted submodules of external packages, e.g. ``dask.array``.
        - allowed_modules:   Packages inside the sources that may import them. (Optional.)

    Only direct imports count: importing an allowed module that imports a
    forbidden one is the point of the contract.
    """

    type_name = "forbidden_submodule"

    source_modules = fields.ListField(subfield=fields.ModuleField())
    forbidden_modules = fields.ListField(subfield=fields.StringField())
    allowed_modules = fields.ListField(subfield=fields.ModuleField(), required=False, default=[])

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        allowed = [m.name for m in self.allowed_modules]  # type: ignore[attr-defined]
        found: list[tuple[str, int, str]] = []
        for source in self.source_modules:  # type: ignore[attr-defined]
            modules = {source.name} | set(graph.find_descendants(source.name))
            for importer in sorted(modules):
                if any(importer == a or importer.startswith(a + ".") for a in allowed):
                    continue
                for forbidden in self.forbidden_modules:  # type: ignore[attr-defined]
                    root = forbidden.split(".")[0]
                    for detail in graph.get_import_details(importer=importer, imported=root):
                        if imports_submodule(detail["line_contents"], forbidden):
                            found.append((importer, int(detail["line_number"]),
                                          detail["line_contents"]))
        return ContractCheck(kept=not found, metadata={"found": found})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for importer, line_number, line in check.metadata["found"]:
            output.print_error(f"{importer}:{line_number}: {line}", bold=False)
            output.new_line()
