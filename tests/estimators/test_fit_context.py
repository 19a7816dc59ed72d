"""The fit context is explicit: a decorator on each method, parameters checked once per fit."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import numpy as np
import pytest

import distsketch.estimators
from distsketch.estimators.base import (
    FIT_CONTEXT_MARKER,
    DistsketchEstimator,
    RowMapTransformer,
    fit_context,
)
from distsketch.estimators.decomposition.frequent_directions import FrequentDirections
from distsketch.estimators.decomposition.streaming_kpca import StreamingKernelPCA
from distsketch.estimators.nystrom.features import NystromKernelPCA
from distsketch.estimators.ridge.classifier import SketchedKernelRidgeClassifier
from distsketch.estimators.solvers.falkon import NystromKernelRidge
from distsketch.estimators.solvers.solver import KernelSolver

#: the context each method that changes (or summarises for) the fitted state must carry
EXPECTED = {"fit": "fit", "partial_fit": "fit", "merge": "merge", "merge_summaries": "merge",
            "fold": "merge", "summarize": "summary"}


def _estimator_classes() -> list[type]:
    for info in pkgutil.walk_packages(distsketch.estimators.__path__, "distsketch.estimators."):
        importlib.import_module(info.name)
    importlib.import_module("distsketch.workflow.preprocess")
    seen: list[type] = []
    todo = [DistsketchEstimator]
    while todo:
        cls = todo.pop()
        if cls not in seen and cls.__module__.startswith("distsketch."):
            seen.append(cls)
            todo.extend(cls.__subclasses__())
    return sorted(seen, key=lambda c: (c.__module__, c.__qualname__))


CLASSES = _estimator_classes()


def test_estimator_classes_found() -> None:
    names = {c.__name__ for c in CLASSES}
    assert {"SketchedKernelRidge", "NystromFeatures", "FrequentDirections",
            "Standardizer", "MergeableEstimator", "RoundedExpansion", "KernelSolver",
            "TensorSketch"} <= names


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__qualname__)
def test_every_state_changing_method_carries_its_context(cls: type) -> None:
    # a new estimator whose fit (or merge, fold, ...) lacks the decorator fails here
    for name, kind in EXPECTED.items():
        method = cls.__dict__.get(name)
        if method is None:
            continue
        marker = getattr(method, FIT_CONTEXT_MARKER, None)
        assert marker == kind, (
            f"{cls.__module__}.{cls.__qualname__}.{name} carries fit context {marker!r}, "
            f"expected {kind!r}: decorate it with fit_context / summary_context")


def test_an_undecorated_method_is_not_wrapped_implicitly() -> None:
    def fit(self: Any, X: Any, y: Any = None) -> Any:
        self.n_output_features_ = 1
        return self

    Plain = type("Plain", (RowMapTransformer,), {"fit": fit, "__module__": __name__})
    assert Plain.__dict__["fit"] is fit
    assert getattr(Plain.fit, FIT_CONTEXT_MARKER, None) is None

    Decorated = type("Decorated", (RowMapTransformer,),
                     {"fit": fit_context(fit), "__module__": __name__})
    assert Decorated.__dict__["fit"] is not fit
    assert getattr(Decorated.fit, FIT_CONTEXT_MARKER) == "fit"


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 4))
    return X, (X[:, 0] > 0).astype(np.int64)


CASES = [
    ("fit", lambda: NystromKernelPCA(n_components=3, n_landmarks=10, random_state=0)),
    ("fit", lambda: StreamingKernelPCA(n_components=3, random_state=0)),
    ("partial_fit", lambda: StreamingKernelPCA(n_components=3, random_state=0)),
    ("partial_fit", lambda: NystromKernelPCA(n_components=3, n_landmarks=10, random_state=0)),
    ("partial_fit", lambda: FrequentDirections(sketch_size=4)),
    ("fit", lambda: SketchedKernelRidgeClassifier(random_state=0)),
]


@pytest.mark.parametrize(("method", "make"), CASES,
                         ids=[f"{m}-{i}" for i, (m, _) in enumerate(CASES)])
def test_parameters_checked_once_per_fit(monkeypatch: pytest.MonkeyPatch, method: str,
                                         make: Any) -> None:
    est = make()
    cls = type(est)
    original = cls._check_params
    calls: list[str] = []

    def counting(self: Any) -> None:
        if self is est:  # not an estimator given as a parameter (those are fitted too)
            calls.append(type(self).__name__)
        original(self)

    monkeypatch.setattr(cls, "_check_params", counting)
    X, y = _data()
    getattr(est, method)(X, y)
    assert calls == [cls.__name__], f"{cls.__name__}.{method} checked its parameters {len(calls)}×"
    assert hasattr(est, "n_features_in_")


def _counting_table_checks(monkeypatch: pytest.MonkeyPatch, est: Any) -> list[int]:
    import distsketch.estimators.base as base

    calls: list[int] = []
    original = base.check_estimator_params

    def counting(obj: Any, *args: Any, **kwargs: Any) -> Any:
        if obj is est:
            calls.append(1)
        return original(obj, *args, **kwargs)

    monkeypatch.setattr(base, "check_estimator_params", counting)
    return calls


def test_fit_after_check_params_checks_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # the CLI and a workflow check before reading data, then fit: one check in all
    est = StreamingKernelPCA(n_components=2, n_random_features=16, random_state=0)
    calls = _counting_table_checks(monkeypatch, est)
    X, _ = _data()
    est.check_params(*X.shape)
    est.fit(X)
    assert len(calls) == 1
    est.fit(X)  # a second fit was not preceded by a check: it checks
    assert len(calls) == 2


def test_a_parameter_changed_after_check_params_is_checked_by_fit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    est = StreamingKernelPCA(n_components=2, n_random_features=16, random_state=0)
    calls = _counting_table_checks(monkeypatch, est)
    X, _ = _data()
    est.check_params(*X.shape)
    est.set_params(n_components=-1)
    with pytest.raises(ValueError, match="n_components"):
        est.fit(X)
    assert len(calls) == 2


def test_cli_fit_checks_the_parameters_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
                                            capsys: pytest.CaptureFixture) -> None:
    import distsketch.cli as cli
    import distsketch.estimators.base as base
    from distsketch.io import write_array

    calls: list[str] = []
    original = base.check_estimator_params

    def counting(obj: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(type(obj).__name__)
        return original(obj, *args, **kwargs)

    monkeypatch.setattr(base, "check_estimator_params", counting)
    X, _ = _data()
    write_array(X.astype(np.float32), tmp_path / "x.zarr", chunk_rows=50)
    code = cli.main(["fit", str(tmp_path / "x.zarr"), str(tmp_path / "m.zarr"), "--method",
                     "StreamingKernelPCA", "--n-components", "2", "--cluster", "sync"])
    assert code == 0, capsys.readouterr().err
    assert calls.count("StreamingKernelPCA") == 1, calls


def _public(est: Any) -> set[str]:
    return {k for k in vars(est) if k.endswith("_") and not k.startswith("_")}


RESET_CASES = [
    lambda: FrequentDirections(sketch_size=4),
    lambda: StreamingKernelPCA(n_components=3, random_state=0),
    lambda: NystromKernelPCA(n_components=3, n_landmarks=10, random_state=0),
    lambda: SketchedKernelRidgeClassifier(random_state=0),
    lambda: KernelSolver(random_state=0),
    lambda: NystromKernelRidge(n_centers=10, random_state=0),
]


@pytest.mark.parametrize("make", RESET_CASES, ids=lambda m: type(m()).__name__)
def test_fit_forgets_what_an_earlier_fit_learned(make: Any) -> None:
    # the fit context resets every fitted attribute before fit: a refit on other data holds
    # exactly what a fresh fit on that data holds
    X, y = _data()
    est = make().fit(X, y)
    est.stale_ = "learned by an earlier fit"
    est.fit(X[:40, :3], y[:40])
    fresh = make().fit(X[:40, :3], y[:40])
    assert not hasattr(est, "stale_")
    assert _public(est) == _public(fresh)
    assert est.n_features_in_ == 3
