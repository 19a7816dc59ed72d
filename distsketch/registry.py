"""The one table of distsketch's public names and where they live.

Every way of turning a *name* into a class or function goes through this
module: the lazy top-level attributes (``distsketch.StreamingKernelPCA``),
the CLI's ``--method``, a workflow spec's ``method.name`` and the class
recorded in a saved model.  Nothing in the package imports a module or
attribute whose name was read from a file or the command line; it looks the
name up here and imports only the modules written in this table.

Adding a public estimator is one line in :data:`ESTIMATORS` (a public
function: one line in :data:`FUNCTIONS`).

Examples
--------
>>> from distsketch import registry
>>> registry.resolve("streamingkernelpca").__name__
'StreamingKernelPCA'
>>> registry.qualified_name(registry.resolve("SRHT"))
'distsketch.estimators.features.polynomial.SRHT'
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal

from distsketch.errors import ConfigError, StoreError

__all__ = [
    "ESTIMATORS",
    "FUNCTIONS",
    "public_names",
    "qualified_name",
    "resolve",
    "stored_class",
]

#: public estimator class name -> module that defines it
ESTIMATORS: Mapping[str, str] = MappingProxyType({
    # foundation / streaming kernel PCA
    "RandomFourierFeatures": "distsketch.estimators.features.rff",
    "FrequentDirections": "distsketch.estimators.decomposition.frequent_directions",
    "StreamingKernelPCA": "distsketch.estimators.decomposition.streaming_kpca",
    # polynomial and dot-product kernel sketches
    "CountSketch": "distsketch.estimators.features.polynomial",
    "TensorSketch": "distsketch.estimators.features.polynomial",
    "SRHT": "distsketch.estimators.features.polynomial",
    "TensorSRHT": "distsketch.estimators.features.polynomial",
    "PolySketch": "distsketch.estimators.features.polynomial",
    "GaussianSketch": "distsketch.estimators.features.dot_product",
    "DotProductKernelSketch": "distsketch.estimators.features.dot_product",
    "KSpaceKernelPCA": "distsketch.estimators.decomposition.kspace",
    "KernelPCR": "distsketch.estimators.decomposition.kspace",
    "KernelPCRClassifier": "distsketch.estimators.decomposition.kspace_classifier",
    # Nystrom family and MEKA
    "NystromFeatures": "distsketch.estimators.nystrom.features",
    "NystromKernelPCA": "distsketch.estimators.nystrom.features",
    "BlockKernelApproximation": "distsketch.estimators.nystrom.block_kernel",
    "MEKA": "distsketch.estimators.nystrom.meka",
    # kernel ridge regression and kernel systems
    "SketchedKernelRidge": "distsketch.estimators.ridge.regressor",
    "SketchedKernelRidgeClassifier": "distsketch.estimators.ridge.classifier",
    "KernelSolver": "distsketch.estimators.solvers.solver",
    "MEKAKernelRidge": "distsketch.estimators.solvers.meka_ridge",
    "NystromKernelRidge": "distsketch.estimators.solvers.falkon",
    "NystromKernelRidgeClassifier": "distsketch.estimators.solvers.falkon_classifier",
    # sampling techniques
    "SparsifiedGram": "distsketch.estimators.sampling.sparsified",
    "SparsifiedKernelPCA": "distsketch.estimators.sampling.sparsified_kpca",
    "RoundedExpansion": "distsketch.estimators.sampling.rounding",
    "DatabaseFriendlyProjection": "distsketch.estimators.features.projection",
})

#: public function name -> module that defines it
FUNCTIONS: Mapping[str, str] = MappingProxyType({
    "load": "distsketch.io.model.store",
    "open_array": "distsketch.io.arrays.access",
    "write_array": "distsketch.io.arrays.access",
    "ingest": "distsketch.io.readers.ingest",
})

# Classes a saved model may hold but that are not exported: nested stateful
# objects (``__distsketch_state__``/``__distsketch_restore__``) and feature maps
# passed as ``SketchedKernelRidge(features=...)``.
_STORED_OBJECTS: Mapping[str, str] = MappingProxyType({
    "SparseTiles": "distsketch.estimators.sampling.sparsified",
    "StatisticalDimensionSketch": "distsketch.estimators.ridge.statistical_dimension",
    "Standardizer": "distsketch.workflow.preprocess",  # a workflow's scaler in a saved Pipeline
    "FalkonCheckpoint": "distsketch.estimators.solvers.falkon",  # NystromKernelRidge(checkpoint=...)
})

# scikit-learn transformers a model may hold as an estimator-valued parameter
# (``SketchedKernelRidge(features=...)`` accepts any transformer); each is
# rebuilt as ``cls(**params)`` plus its learned arrays, never unpickled.
# A Pipeline of these and of distsketch steps (with a StandardScaler) may be
# saved whole; no other scikit-learn class is ever reconstructed.
_SKLEARN_TYPES: frozenset[str] = frozenset({
    "sklearn.pipeline.Pipeline",
    "sklearn.preprocessing._data.StandardScaler",
    "sklearn.kernel_approximation.AdditiveChi2Sampler",
    "sklearn.kernel_approximation.Nystroem",
    "sklearn.kernel_approximation.PolynomialCountSketch",
    "sklearn.kernel_approximation.RBFSampler",
    "sklearn.kernel_approximation.SkewedChi2Sampler",
    # scalers and linear models a user puts around distsketch steps in a Pipeline; each
    # keeps its whole learned state in public attributes ending in "_" (a class that
    # needs a private one to predict, such as RidgeClassifier, is not listed)
    "sklearn.preprocessing._data.MinMaxScaler",
    "sklearn.preprocessing._data.MaxAbsScaler",
    "sklearn.preprocessing._data.RobustScaler",
    "sklearn.preprocessing._data.Normalizer",
    "sklearn.decomposition._pca.PCA",
    "sklearn.linear_model._base.LinearRegression",
    "sklearn.linear_model._ridge.Ridge",
    "sklearn.linear_model._logistic.LogisticRegression",
    "sklearn.svm._classes.LinearSVC",
    "sklearn.svm._classes.LinearSVR",
})

Kind = Literal["estimator", "function", "any"]


def public_names() -> list[str]:
    """All public estimator and function names, sorted."""
    return sorted({**ESTIMATORS, **FUNCTIONS})


def _load(name: str, module: str) -> Any:
    # ``module`` always comes from the tables above, never from user input
    return getattr(importlib.import_module(module), name)


def _table(kind: Kind) -> Mapping[str, str]:
    if kind == "estimator":
        return ESTIMATORS
    if kind == "function":
        return FUNCTIONS
    if kind == "any":
        return {**ESTIMATORS, **FUNCTIONS}
    raise ValueError(f"kind must be 'estimator', 'function' or 'any', got {kind!r}")


def resolve(name: str, *, kind: Kind = "estimator", where: str = "name") -> Any:
    """The public class or function called ``name`` (case-insensitive).

    Parameters
    ----------
    name : str
        A public name as a user writes it: ``"StreamingKernelPCA"``,
        ``"streamingkernelpca"``, ``" SRHT "``.
    kind : {"estimator", "function", "any"}, default "estimator"
        Which table to search.
    where : str, default "name"
        What the name came from (``"--method"``, ``"workflow spec"``), for
        error messages.

    Returns
    -------
    class or function

    Raises
    ------
    ConfigError
        If no public name of that kind matches (the message lists the valid
        names), if the name is public but of the other kind, or if its
        module cannot be imported in this installation.
    """
    table = _table(kind)
    key = str(name).strip().lower()
    match = next((n for n in table if n.lower() == key), None)
    if match is None:
        other = next((n for n in {**ESTIMATORS, **FUNCTIONS} if n.lower() == key), None)
        if other is not None:
            what = "an estimator" if kind == "estimator" else "a function"
            raise ConfigError(f"{where}: {other} is not {what}; valid names (any case): "
                              f"{', '.join(sorted(table))}.")
        noun = {"estimator": "method", "function": "function", "any": "name"}[kind]
        raise ConfigError(f"{where}: unknown {noun} {name!r}; valid names (any case): "
                          f"{', '.join(sorted(table))}.")
    try:
        return _load(match, table[match])
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{where}: {match} (module {table[match]}) is not available in this "
                          f"installation: {exc}.") from exc


def _loadable() -> dict[str, tuple[str, str]]:
    """Canonical stored path -> (name, module) of every class a model may name."""
    out = {f"{mod}.{n}": (n, mod) for n, mod in {**ESTIMATORS, **_STORED_OBJECTS}.items()}
    for path in _SKLEARN_TYPES:
        mod, _, n = path.rpartition(".")
        out[path] = (n, mod)
    return out


def stored_class(class_path: str) -> type:
    """The class a model store names, if it is one a model may hold.

    Only registered distsketch estimators, the stateful objects they hold,
    and a few scikit-learn transformers are accepted.  Nothing named by
    ``class_path`` itself is imported: the path is looked up in the tables of
    this module and only their modules are imported.  A ``distsketch.``
    path whose last component is a registered name is accepted too, so a
    model keeps loading after its class moved to another module.

    Parameters
    ----------
    class_path : str
        ``"module.ClassName"`` as read from a model store.

    Returns
    -------
    type

    Raises
    ------
    StoreError
        Naming the class, for any path not in the tables.
    """
    path = str(class_path)
    loadable = _loadable()
    entry = loadable.get(path)
    if entry is None and path.startswith("distsketch."):
        last = path.rpartition(".")[2]
        table = {**ESTIMATORS, **_STORED_OBJECTS}
        if last in table:
            entry = (last, table[last])
    if entry is None:
        raise StoreError(
            f"the model names class {path!r}, which is not a registered distsketch class; "
            "refusing to import it. A model store may hold only the estimators in "
            "distsketch.registry.ESTIMATORS (and the objects they hold): was it written by "
            "distsketch, and has it been edited?")
    name, module = entry
    try:
        return _load(name, module)
    except (ImportError, AttributeError) as exc:
        raise StoreError(f"the model names class {path!r}, which is not available in this "
                         f"installation: {exc}.") from exc


def qualified_name(cls: type | Any) -> str:
    """The path under which ``cls`` (a class or an instance) is saved.

    Raises
    ------
    StoreError
        If the class could not be loaded back by :func:`stored_class`: a
        model is never written that ``load`` would refuse.
    """
    cls = cls if isinstance(cls, type) else type(cls)
    name = cls.__qualname__
    for table in (ESTIMATORS, _STORED_OBJECTS):
        module = table.get(name)
        if module is not None and _load(name, module) is cls:
            return f"{module}.{name}"
    path = f"{cls.__module__}.{name}"
    if path in _SKLEARN_TYPES:
        return path
    raise StoreError(f"cannot save an object of class {path}: it is not a registered "
                     "distsketch class, so the model could not be loaded back. Register it in "
                     "distsketch.registry or store its arrays instead.")
