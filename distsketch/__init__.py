"""distsketch: out-of-core, distributed kernel approximation on Zarr and Dask.

Estimators are imported lazily, so ``import distsketch`` stays light on
workers; ``from distsketch import StreamingKernelPCA`` works as usual.
"""

from __future__ import annotations

import importlib
from typing import Any

from distsketch._version import __version__
from distsketch.errors import (
    ClusterError,
    ConfigError,
    DistsketchError,
    InputError,
    MemoryBudgetError,
    NotFittedError,
    StoreError,
    WorkflowError,
)

# public name -> module that defines it
_LAZY: dict[str, str] = {
    # foundation / streaming kernel PCA
    "RandomFourierFeatures": "distsketch.estimators.rff",
    "FrequentDirections": "distsketch.estimators.frequent_directions",
    "StreamingKernelPCA": "distsketch.estimators.streaming_kpca",
    "load": "distsketch.io.model",
    "open_array": "distsketch.io.zarr_io",
    "write_array": "distsketch.io.zarr_io",
    "ingest": "distsketch.io.readers",
    # polynomial and dot-product kernel sketches
    "CountSketch": "distsketch.estimators.polynomial",
    "TensorSketch": "distsketch.estimators.polynomial",
    "SRHT": "distsketch.estimators.polynomial",
    "TensorSRHT": "distsketch.estimators.polynomial",
    "PolySketch": "distsketch.estimators.polynomial",
    "GaussianSketch": "distsketch.estimators.dot_product",
    "DotProductKernelSketch": "distsketch.estimators.dot_product",
    "KSpaceKernelPCA": "distsketch.estimators.kspace",
    "KernelPCR": "distsketch.estimators.kspace",
    # Nystrom family and MEKA
    "NystromFeatures": "distsketch.estimators.nystrom",
    "NystromKernelPCA": "distsketch.estimators.nystrom",
    "BlockKernelApproximation": "distsketch.estimators.block_kernel",
    "MEKA": "distsketch.estimators.meka",
    # kernel ridge regression and kernel systems
    "SketchedKernelRidge": "distsketch.estimators.ridge",
    "SketchedKernelRidgeClassifier": "distsketch.estimators.ridge_classifier",
    "KernelSolver": "distsketch.estimators.solver",
    "MEKAKernelRidge": "distsketch.estimators.solver",
    # sampling techniques
    "SparsifiedGram": "distsketch.estimators.sparsified",
    "SparsifiedKernelPCA": "distsketch.estimators.sparsified_kpca",
    "RoundedExpansion": "distsketch.estimators.rounding",
    "DatabaseFriendlyProjection": "distsketch.estimators.projection",
}

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
    *sorted(_LAZY),
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'distsketch' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
