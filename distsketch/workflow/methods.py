"""The method adapter: a spec's estimator as a foldable, checkpointable state."""

from __future__ import annotations

import inspect
import numbers
from pathlib import Path
from typing import Any

import numpy as np

from distsketch import registry
from distsketch.errors import ConfigError, WorkflowError
from distsketch.validation import Interval, check_names, check_params

__all__ = ["HOLDOUT", "MEDIAN", "MethodAdapter", "build_params", "check_method_params",
           "data_driven", "held_out", "resolve_method", "takes_classes", "with_method_blocks",
           "without_held_out"]

#: the value of a kernel scale chosen by the median heuristic on a row sample of the input
MEDIAN = "median"
# parameters that may be given as MEDIAN (the kernel scale of a method or its feature map)
_DATA_DRIVEN = ("gamma",)
#: the workflow key (``method.holdout``) of the fraction of rows kept out of the fit
HOLDOUT = "holdout"
# workflow keys that travel in method.params but are not constructor arguments
_WORKFLOW_KEYS = ("classes", HOLDOUT)


def held_out(seed: int, start: int, stop: int, fraction: float | None) -> np.ndarray:
    """Which global rows ``[start, stop)`` are held out of the fit (a boolean mask): a pure
    function of the seed and the row, the same for any segmenting, chunking or resume."""
    if not fraction:
        return np.zeros(stop - start, dtype=bool)
    from distsketch.ops.random import hash_uniform

    return hash_uniform(seed, "workflow.holdout", np.arange(start, stop, dtype=np.int64)) < fraction


def without_held_out(X: Any, y: Any, seed: int, start: int, stop: int,
                     fraction: float | None) -> tuple[Any, Any]:
    """Rows ``[start, stop)`` and their targets (either may be None) less the held-out ones."""
    keep = ~held_out(seed, start, stop, fraction)
    if keep.all():
        return X, y
    return (None if X is None else X[keep]), (None if y is None else np.asarray(y)[keep])


def resolve_method(name: str, where: str) -> type:
    """The estimator class a spec's method name stands for, through :mod:`distsketch.registry`
    (nothing is imported by a dotted path)."""
    if name.lower() == "rnca":
        raise ConfigError(
            f"{where}: the method 'rnca' is StreamingKernelPCA with method: rnca; write "
            "method: {name: StreamingKernelPCA, params: {method: rnca, n_random_features: m, "
            "n_components: k, gamma: ...}} and rerun with --full.")
    cls = registry.resolve(name, kind="estimator", where=where)
    if not hasattr(cls, "fit"):
        raise ConfigError(f"{where}: {name} is not an estimator (it has no fit method).")
    return cls


def takes_classes(cls: type) -> bool:
    """True for a classifier whose ``partial_fit`` needs every label on its first call."""
    partial_fit = getattr(cls, "partial_fit", None)
    return callable(partial_fit) and "classes" in inspect.signature(partial_fit).parameters


def check_method_params(cls: type, params: dict[str, Any], where: str) -> dict[str, Any]:
    """Check a spec's ``method.params`` against the estimator before any run starts; returns
    them with ``classes`` sorted and a ``features`` block as ``{"name", "params"}``.

    Besides ``cls``'s parameters: ``classes`` (a classifier with ``partial_fit(...,
    classes)``), ``holdout`` (a method that predicts) and ``gamma: median``.
    """
    valid = set(inspect.signature(cls).parameters) | ({"classes"} if takes_classes(cls) else set())
    if HOLDOUT in params:
        _check_holdout(cls, params[HOLDOUT], where)
        valid.add(HOLDOUT)
    check_names(params, valid, f"{where}: method.params", owner=cls.__name__)
    out = dict(params)
    if "classes" in out:
        out["classes"] = _check_classes(out["classes"], where)
    if isinstance(out.get("features"), (dict, str)):
        out["features"] = _check_features(out["features"], where)
    checked = {k: v for k, v in out.items() if k not in _WORKFLOW_KEYS}
    if isinstance(checked.get("features"), dict):
        checked["features"] = _placeholder(out["features"])
    _check_values(cls, checked, f"{where}: method.params")
    return out


def _check_values(cls: type, params: dict[str, Any], where: str) -> None:
    """Run ``cls(**params)``'s ``check_params``, what ``fit`` runs first (a MEDIAN stands in as 1.0)."""
    try:
        cls(**_stand_in(params)).check_params()
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from exc


def with_method_blocks(params: dict[str, Any], method: dict[str, Any], where: str) -> dict[str, Any]:
    """``params`` with a method's ``features:`` block and ``holdout:`` fraction put in (the same
    spec as giving them inside ``params``; given in both places is an error)."""
    out = dict(params)
    for key in ("features", HOLDOUT):
        if method.get(key) is None:
            continue
        if key in out:
            raise ConfigError(f"{where}: method.{key} and method.params.{key} are both given; "
                              "keep one.")
        out[key] = method[key]
    return out


_HOLDOUT = {HOLDOUT: [Interval(float, 0.0, 0.5, closed="right")]}
_HOLDOUT_WHAT = {HOLDOUT: "a fraction in (0, 0.5] of the rows kept out of the fit to measure it "
                          "(e.g. holdout: 0.1)"}


def _check_holdout(cls: type, value: Any, where: str) -> None:
    check_params({HOLDOUT: value}, _HOLDOUT, f"{where}: method", noun="key", what=_HOLDOUT_WHAT)
    if not callable(getattr(cls, "predict", None)):
        raise ConfigError(f"{where}: method.holdout needs a method that predicts its targets; "
                          f"{cls.__name__} has no predict.")


def _check_features(section: Any, where: str) -> dict[str, Any]:
    """A feature-map section as ``{"name": <registered name>, "params": {...}}``, checked."""
    where = f"{where}: method.features"
    if isinstance(section, str):
        section = {"name": section}
    if "name" not in section or not isinstance(section["name"], str):
        raise ConfigError(f"{where} needs a 'name': a distsketch feature map such as "
                          "RandomFourierFeatures, NystromFeatures or PolySketch.")
    nested = section.get("params")
    flat = {k: v for k, v in section.items() if k not in ("name", "params")}
    if nested is not None and (flat or not isinstance(nested, dict)):
        raise ConfigError(f"{where}: give the feature map's parameters either beside its name "
                          "({name: RandomFourierFeatures, n_components: 2048}) or as a 'params' "
                          "mapping, not both.")
    params = dict(nested) if nested is not None else flat
    cls = registry.resolve(section["name"], kind="estimator", where=where)
    if not hasattr(cls, "transform"):
        raise ConfigError(f"{where}: {cls.__name__} is not a feature map (it has no transform).")
    check_names(params, inspect.signature(cls).parameters, where, owner=cls.__name__)
    _check_values(cls, params, where)
    return {"name": cls.__name__, "params": params}


def _stand_in(params: dict[str, Any]) -> dict[str, Any]:
    # a MEDIAN is chosen only when the run starts: 1.0 stands in for the checks before
    return {k: (1.0 if k in _DATA_DRIVEN and v == MEDIAN else v) for k, v in params.items()}


def _placeholder(section: dict[str, Any]) -> Any:
    # an instance of the feature map for the method's own checks
    return registry.resolve(section["name"], kind="estimator")(**_stand_in(section["params"]))


def data_driven(params: dict[str, Any]) -> list[str]:
    """Where ``params`` ask for a MEDIAN: ``"gamma"`` and/or ``"features.gamma"``."""
    out = [k for k in _DATA_DRIVEN if params.get(k) == MEDIAN]
    feats = params.get("features")
    if isinstance(feats, dict):
        out += [f"features.{k}" for k in _DATA_DRIVEN if feats["params"].get(k) == MEDIAN]
    return out


def build_params(params: dict[str, Any], where: str = "workflow spec") -> dict[str, Any]:
    """Constructor arguments: a ``features`` block becomes its (unfitted) feature map."""
    left = data_driven(params)
    if left:
        raise WorkflowError(f"{where}: {', '.join(left)} = median was not chosen before the fit; "
                            "this is a bug, please report it.")
    out = dict(params)
    feats = out.get("features")
    if isinstance(feats, dict):
        cls = registry.resolve(feats["name"], kind="estimator", where=where)
        out["features"] = cls(**feats["params"])
    return out


def _check_classes(value: Any, where: str) -> list[Any]:
    ok = isinstance(value, (list, tuple)) and len(value) >= 2
    kinds = {isinstance(v, str) for v in value} if ok else set()
    ok = ok and len(kinds) == 1 and all(
        isinstance(v, str) or (isinstance(v, numbers.Real) and not isinstance(v, bool)
                               and np.isfinite(v)) for v in value)  # type: ignore[call-overload]
    if ok:
        classes = np.unique(np.asarray(value))
        ok = classes.size == len(value)
    if not ok:
        raise ConfigError(f"{where}: method.params.classes must list every label once, at least "
                          f"two, all numbers or all strings (e.g. classes: [0, 1, 2]); got "
                          f"{value!r}. Leave it out to learn the labels from the targets.")
    return classes.tolist()


class MethodAdapter:
    """Fold row segments into an estimator (the state itself), checkpoint it, hand out the
    model; an estimator without an exact ``partial_fit`` is fitted on all rows at once.

    ``params``' ``random_state`` defaults to the workflow ``seed``.
    """

    def __init__(self, name: str, params: dict[str, Any], seed: int):
        self.name = name
        self.params = dict(params)
        self.cls = resolve_method(name, "workflow spec")
        # a classifier's labels: from the spec, else learned from the targets before the fold
        given = self.params.pop("classes", None)
        self.holdout: float | None = self.params.pop(HOLDOUT, None)
        self.seed = seed
        self.classes: np.ndarray | None = None if given is None else np.asarray(given)
        self.classes_given = given is not None
        # NystromKernelPCA.partial_fit keeps its first landmarks: merging would not equal a refit
        self.incremental = (hasattr(self.cls, "partial_fit")
                            and getattr(self.cls, "partial_fit_equals_fit", True))
        if "random_state" in inspect.signature(self.cls).parameters:
            self.params.setdefault("random_state", seed)
        self.needs_classes = self.incremental and takes_classes(self.cls)
        self.state: Any = None
        #: values chosen from the data for this state ({"features.gamma": 0.013}), for the report
        self.resolved: dict[str, float] = {}

    def resolve_data_driven(self, X: Any, seed: int, say: Any = None) -> dict[str, float]:
        """Choose every ``gamma: median`` from 1000 sampled rows of the preprocessed ``X``, once
        per new state (which keeps the value for later runs)."""
        from distsketch.workflow.preprocess import median_gamma

        where = data_driven(self.params)
        if not where:
            return {}
        gamma = median_gamma(X, n_sample=1000, random_state=seed)
        for key in where:
            if key.startswith("features."):
                feats = self.params["features"]
                self.params["features"] = {**feats, "params": {**feats["params"],
                                                               key.split(".", 1)[1]: gamma}}
            else:
                self.params[key] = gamma
            self.resolved[key] = gamma
        if say is not None:
            say(f"gamma = {gamma:.6g} (median heuristic on a sample of 1000 rows) for "
                f"{', '.join(where)}")
        return dict(self.resolved)

    def _new(self) -> Any:
        return self.cls(**build_params(self.params, f"workflow method {self.name}"))

    def update(self, X: Any, start: int, y: np.ndarray | None = None) -> None:
        """Fold the rows ``X`` (global rows from ``start``), less the held-out ones, into the state."""
        if self.holdout:
            stop = start + int(X.shape[0])
            X, y = self.fitted_rows(X, y, start, stop)
            if int(X.shape[0]) == 0:
                if self.state is None:
                    raise WorkflowError(f"{self.name}: every row of {start}..{stop} is "
                                        "held out (method.holdout); there is nothing to fit. Use "
                                        "more rows or a smaller holdout.")
                return
        if not self.incremental:
            if start != 0:
                raise WorkflowError(f"{self.name} has no partial_fit: it can only be fitted on all "
                                    "rows at once; rerun with --full.")
            est = self._new()
            self.state = est.fit(X) if y is None else est.fit(X, y)
            return
        if self.state is None:
            self.state = self._new()
        if y is None:
            self.state.partial_fit(X)
        elif self.needs_classes and self.classes is not None:
            self.check_labels(y, start)
            self.state.partial_fit(X, y, classes=self.classes)
        else:
            self.state.partial_fit(X, y)

    def fitted_rows(self, X: Any, y: Any, start: int, stop: int) -> tuple[Any, Any]:
        """Global rows ``[start, stop)`` and their targets as the fit sees them."""
        return without_held_out(X, y, self.seed, start, stop, self.holdout)

    def check_labels(self, y: np.ndarray, start: int) -> None:
        """Refuse labels outside the classes fixed for this state, naming the first one."""
        assert self.classes is not None
        new = np.setdiff1d(np.unique(np.ravel(y)), self.classes)
        if new.size == 0:
            return
        rows = f"rows {start}..{start + len(y)}"
        if self.classes_given:
            fix = ("add it to method.params.classes and rerun with --full")
            source = "method.params.classes"
        else:
            fix = "rerun with --full to learn the classes from all targets again"
            source = "the classes learned from the targets when the workflow state was created"
        raise WorkflowError(f"{self.name}: the targets of {rows} hold the label {new[0].item()!r}, "
                            f"which is not among {source} ({self.classes.tolist()}); {fix}.")

    def save(self, path: Path) -> None:
        """Write the state as the model store ``path`` (inside an uncommitted checkpoint)."""
        from distsketch.io.model.store import save_model

        save_model(self.state, path)

    def load(self, store: Any) -> None:
        """Read the state :meth:`save` wrote (a local path, or a location on an object store)."""
        from distsketch.io.model.store import load

        self.state = load(store)
        # a state created by an earlier run: the value it chose for gamma: median, for the report
        for key in data_driven(self.params):
            owner = self.state
            if key.startswith("features."):
                owner = getattr(owner, "features_", None)
            value = getattr(owner, key.rpartition(".")[2], None)
            if isinstance(value, numbers.Real) and not isinstance(value, bool):
                self.resolved[key] = float(value)

    def model(self) -> Any:
        """The fitted estimator: the folded state is already the model (nothing to finalize)."""
        return self.state
