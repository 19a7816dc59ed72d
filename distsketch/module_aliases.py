"""Old import paths of modules that moved into sub-packages.

Each package installs a finder for its own table of old names
(``distsketch.estimators.rff``), which hands back the module at its new path: the
same module object, so patches and ``isinstance`` checks see one class.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Mapping, Sequence
from types import ModuleType

__all__ = ["aliases", "install"]


class _AliasLoader(importlib.abc.Loader):
    """Loads an old module name as the module at its new path."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        # the target module ran when it was imported; running it again would re-create
        # its classes
        return None


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Finds the old names of one package's moved modules."""

    def __init__(self, aliases: Mapping[str, str]) -> None:
        self.aliases = dict(aliases)

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        new = self.aliases.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(new))


def install(package: str, moved: Mapping[str, str]) -> None:
    """Make ``package.<old>`` import as ``package.<new>`` for each entry of ``moved``.

    Parameters
    ----------
    package : str
        The package whose modules moved, e.g. ``"distsketch.io"``.
    moved : mapping of str to str
        Old module name -> new dotted path, both relative to ``package``.
    """
    aliases = {f"{package}.{old}": f"{package}.{new}" for old, new in moved.items()}
    if not any(isinstance(f, _AliasFinder) and f.aliases == aliases for f in sys.meta_path):
        sys.meta_path.append(_AliasFinder(aliases))


def aliases() -> dict[str, str]:
    """Every old module name installed so far -> the module path it imports as."""
    return {old: new for f in sys.meta_path if isinstance(f, _AliasFinder)
            for old, new in f.aliases.items()}
