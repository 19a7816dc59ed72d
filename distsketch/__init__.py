"""distsketch: out-of-core, distributed kernel approximation on Zarr and Dask.

Estimators and the subpackages ``metrics``, ``datasets`` and ``io`` are
imported lazily, so ``import distsketch`` stays light on workers;
``from distsketch import StreamingKernelPCA`` and ``distsketch.metrics`` work
as usual.
"""

from __future__ import annotations

import importlib
from typing import Any

from distsketch import registry as _registry
from distsketch._version import __version__
from distsketch.errors import (
    ClusterError,
    ConfigError,
    DistsketchError,
    InputError,
    MemoryBudgetError,
    StoreError,
    WorkflowError,
)

__all__ = [
    "ClusterError",
    "ConfigError",
    "DistsketchError",
    "InputError",
    "MemoryBudgetError",
    "NotFittedError",
    "StoreError",
    "WorkflowError",
    "__version__",
    *_registry.public_names(),
]

#: public subpackages, imported on first access (their own modules are fixed here)
_SUBMODULES = ("datasets", "io", "metrics")


def __getattr__(name: str) -> Any:
    if name == "NotFittedError":
        # made on first use: its scikit-learn base class costs a second to import
        from distsketch.errors import NotFittedError

        globals()[name] = NotFittedError
        return NotFittedError
    if name in _SUBMODULES:
        submodule = importlib.import_module(f"distsketch.{name}")
        globals()[name] = submodule
        return submodule
    module = _registry.ESTIMATORS.get(name) or _registry.FUNCTIONS.get(name)
    if module is None:
        raise AttributeError(f"module 'distsketch' has no attribute {name!r}")
    # the module comes from the registry's table; an ImportError stays one
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    # the public API only: no private helpers or modules imported for internal use
    return sorted([*__all__, *_SUBMODULES])
